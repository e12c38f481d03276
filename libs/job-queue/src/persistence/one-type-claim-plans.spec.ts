import { describe, expect, it } from 'vitest';
import { OneTypeClaimPlans } from './one-type-claim-plans.js';

describe('OneTypeClaimPlans', () => {
  /**
   * A table whose size the test sets, on a clock the test moves. The first read answers at once;
   * later ones wait for `finishRead`, so the test sees what claims do while a read is under way.
   */
  const tableOf = (initialPages: number) => {
    const state = { pages: initialPages, reads: 0, now: 1_000_000, fail: false };
    let release: (() => void) | null = null;
    const plans = new OneTypeClaimPlans(
      async () => {
        state.reads++;
        if (state.reads > 1) await new Promise<void>((resolve) => (release = resolve));
        if (state.fail) throw new Error('connection refused');
        return state.pages;
      },
      () => state.now,
    );
    const finishRead = async () => {
      release?.();
      release = null;
      await new Promise((resolve) => setImmediate(resolve));
    };
    return { state, plans, finishRead };
  };

  it('caps a claim at the next power of 4 from 16, and plans claims past 4,096 each time', async () => {
    const { plans } = tableOf(1_000);
    expect((await plans.planFor(1))?.cap).toBe(16);
    expect((await plans.planFor(16))?.cap).toBe(16);
    expect((await plans.planFor(17))?.cap).toBe(64);
    expect((await plans.planFor(510))?.cap).toBe(1_024);
    expect((await plans.planFor(4_096))?.cap).toBe(4_096);
    expect(await plans.planFor(4_097)).toBeNull();
  });

  it.each([
    [0, true],
    [63, true],
    [64, false],
    [5_000_000, false],
  ])('on a table of %i pages gives the guarded small-table form: %s', async (pages, smallTable) => {
    const { plans } = tableOf(pages);
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable });
  });

  it('reads the size before the first claim, then again in the background about once a second', async () => {
    const { state, plans, finishRead } = tableOf(3);
    expect((await plans.planFor(10))?.smallTable).toBe(true);
    expect(state.reads).toBe(1);

    state.pages = 10_000;
    state.now += 500;
    expect((await plans.planFor(10))?.smallTable).toBe(true);
    expect(state.reads).toBe(1);

    // Past a second: claims go on with the size they know while the new one is read, once.
    state.now += 600;
    expect((await plans.planFor(10))?.smallTable).toBe(true);
    expect((await plans.planFor(10))?.smallTable).toBe(true);
    expect(state.reads).toBe(2);
    await finishRead();
    expect((await plans.planFor(10))?.smallTable).toBe(false);
  });

  it('after a guarded claim found nothing, reads the size at once and tells whether the table grew large', async () => {
    const { state, plans, finishRead } = tableOf(3);
    await plans.planFor(10);
    const stillSmall = plans.grewLarge();
    await finishRead();
    expect(await stillSmall).toBe(false);

    state.pages = 64;
    const grown = plans.grewLarge();
    await finishRead();
    expect(await grown).toBe(true);
    expect((await plans.planFor(10))?.smallTable).toBe(false);
    expect(state.reads).toBe(3);
  });

  it('keeps the last size known when a read fails', async () => {
    const { state, plans, finishRead } = tableOf(300);
    expect((await plans.planFor(10))?.smallTable).toBe(false);
    state.fail = true;
    state.now += 1_100;
    expect((await plans.planFor(10))?.smallTable).toBe(false);
    await finishRead();
    expect((await plans.planFor(10))?.smallTable).toBe(false);
    const grown = plans.grewLarge();
    await finishRead();
    expect(await grown).toBe(true);
    expect(state.reads).toBe(3);
  });

  it('plans each claim while the size cannot be read, trying again once a second rather than per claim', async () => {
    const { state, plans, finishRead } = tableOf(300);
    state.reads = 1; // every read from here waits for finishRead
    state.fail = true;
    const first = plans.planFor(10);
    await finishRead();
    expect(await first).toBeNull();
    expect(await plans.planFor(10)).toBeNull();
    expect(state.reads).toBe(2);

    state.fail = false;
    state.now += 1_100;
    const again = plans.planFor(10);
    await finishRead();
    expect(await again).toEqual({ cap: 16, smallTable: false });
    expect(state.reads).toBe(3);
  });
});
