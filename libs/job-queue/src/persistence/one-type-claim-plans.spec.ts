import { describe, expect, it } from 'vitest';
import { OneTypeClaimPlans } from './one-type-claim-plans.js';

describe('OneTypeClaimPlans', () => {
  /** A table whose size the test sets, read through a counter, on a clock the test moves. */
  const tableOf = (initialPages: number) => {
    const state = { pages: initialPages, reads: 0, now: 1_000_000, fail: false };
    let release: (() => void) | null = null;
    const plans = new OneTypeClaimPlans(async () => {
      state.reads++;
      if (release === null && state.reads > 1) await new Promise<void>((resolve) => (release = resolve));
      release = null;
      if (state.fail) throw new Error('connection refused');
      return state.pages;
    }, () => state.now);
    return { state, plans, finishRead: () => release?.() };
  };

  it('caps a claim at the next power of 4 from 16, and hands claims past 4,096 to the planned-each-time claim', async () => {
    const { plans } = tableOf(1_000);
    expect((await plans.planFor(1))?.cap).toBe(16);
    expect((await plans.planFor(16))?.cap).toBe(16);
    expect((await plans.planFor(17))?.cap).toBe(64);
    expect((await plans.planFor(510))?.cap).toBe(1_024);
    expect((await plans.planFor(4_096))?.cap).toBe(4_096);
    expect(await plans.planFor(4_097)).toBeNull();
  });

  it.each([
    [0, 0],
    [15, 0],
    [16, 1],
    [63, 1],
    [64, 2],
    [255, 2],
    [256, 3],
    [5_000_000, 3],
  ])('puts a table of %i pages in size class %i', async (pages, sizeClass) => {
    const { plans } = tableOf(pages);
    expect((await plans.planFor(10))?.sizeClass).toBe(sizeClass);
  });

  it('reads the size before the first claim, then again in the background about once a second', async () => {
    const { state, plans, finishRead } = tableOf(3);
    expect(await plans.planFor(10)).toEqual({ cap: 16, sizeClass: 0 });
    expect(state.reads).toBe(1);

    state.pages = 10_000;
    state.now += 500;
    expect((await plans.planFor(10))?.sizeClass).toBe(0);
    expect(state.reads).toBe(1);

    // Past a second: this claim still runs on the size it knows, while the new one is read.
    state.now += 600;
    expect((await plans.planFor(10))?.sizeClass).toBe(0);
    expect((await plans.planFor(10))?.sizeClass).toBe(0);
    expect(state.reads).toBe(2);
    finishRead();
    await new Promise((resolve) => setImmediate(resolve));
    expect((await plans.planFor(10))?.sizeClass).toBe(3);
  });

  it('after a long idle spell waits for a fresh size before claiming', async () => {
    const { state, plans, finishRead } = tableOf(3);
    await plans.planFor(10);
    state.pages = 10_000;
    state.now += 60_000;
    const planned = plans.planFor(10);
    await new Promise((resolve) => setImmediate(resolve));
    finishRead();
    expect((await planned)?.sizeClass).toBe(3);
  });

  it('forgets the size when it cannot be read, so claims fall back to the planned-each-time claim', async () => {
    const { state, plans, finishRead } = tableOf(300);
    await plans.planFor(10);
    state.fail = true;
    state.now += 60_000;
    const planned = plans.planFor(10);
    await new Promise((resolve) => setImmediate(resolve));
    finishRead();
    expect(await planned).toBeNull();

    state.fail = false;
    const again = plans.planFor(10);
    await new Promise((resolve) => setImmediate(resolve));
    finishRead();
    expect(await again).toEqual({ cap: 16, sizeClass: 3 });
  });
});
