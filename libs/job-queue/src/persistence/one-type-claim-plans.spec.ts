import { describe, expect, it } from 'vitest';
import { OneTypeClaimPlans } from './one-type-claim-plans.js';

describe('OneTypeClaimPlans', () => {
  const capOf = async (plans: OneTypeClaimPlans, limit: number) => (await plans.planFor(limit))?.cap ?? null;
  /** Which form a claim of 10 gets: the guarded small-table one, the large one, or none (planned each time). */
  const formOf = async (plans: OneTypeClaimPlans) => {
    const plan = await plans.planFor(10);
    return plan === null ? null : plan.smallTable ? 'small' : 'large';
  };
  /**
   * A table whose size the test sets, on a clock the test moves. The first read answers at once;
   * later ones wait for `finishRead`, so the test sees what claims do while a read is under way.
   */
  const tableOf = (initialPages: number) => {
    const state = { pages: initialPages, hashMemKb: 8_192, reads: 0, now: 1_000_000, fail: false };
    let release: (() => void) | null = null;
    const plans = new OneTypeClaimPlans(
      async () => {
        state.reads++;
        if (state.reads > 1) await new Promise<void>((resolve) => (release = resolve));
        if (state.fail) throw new Error('connection refused');
        return { pages: state.pages, hashMemKb: state.hashMemKb };
      },
      () => state.now,
    );
    const finishRead = async () => {
      release?.();
      release = null;
      await new Promise((resolve) => setImmediate(resolve));
    };
    /** A second later, a claim starts the next read, which finds `pages` (the size unchanged if omitted). */
    const readAgain = async (pages = state.pages) => {
      state.pages = pages;
      state.now += 1_100;
      await plans.planFor(10);
      await finishRead();
    };
    return { state, plans, finishRead, readAgain };
  };

  it('caps a claim at the next power of 4 from 16, and plans claims past 4,096 each time', async () => {
    const { plans } = tableOf(1_000);
    expect(await capOf(plans, 1)).toBe(16);
    expect(await capOf(plans, 16)).toBe(16);
    expect(await capOf(plans, 17)).toBe(64);
    expect(await capOf(plans, 510)).toBe(1_024);
    expect(await capOf(plans, 4_096)).toBe(4_096);
    expect(await capOf(plans, 4_097)).toBeNull();
  });

  it.each([
    [0, 'small'],
    [63, 'small'],
    [64, 'large'],
    [5_000_000, 'large'],
  ])('on a table of %i pages gives a claim of 10 the %s form', async (pages, form) => {
    const { plans } = tableOf(pages);
    expect(await formOf(plans)).toBe(form);
    expect(await capOf(plans, 10)).toBe(16);
  });

  it('reads the size before the first claim, then again in the background about once a second', async () => {
    const { state, plans, finishRead } = tableOf(3);
    expect(await formOf(plans)).toBe('small');
    expect(state.reads).toBe(1);

    state.pages = 10_000;
    state.now += 500;
    expect(await formOf(plans)).toBe('small');
    expect(state.reads).toBe(1);

    // Past a second: claims go on with the size they know while the new one is read, once.
    state.now += 600;
    expect(await formOf(plans)).toBe('small');
    expect(await formOf(plans)).toBe('small');
    expect(state.reads).toBe(2);
    await finishRead();
    expect(await formOf(plans)).toBe('large');
  });

  it('takes a turned-away guarded claim as news that the table is large, until a read says otherwise', async () => {
    const { state, plans, readAgain } = tableOf(3);
    expect(await formOf(plans)).toBe('small');
    plans.sawLargeTable();
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: false, generation: 0 });
    expect(state.reads).toBe(1);
    // Truncated meanwhile: the next read finds it small, and the large form gets fresh names.
    await readAgain();
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: true, generation: 1 });
    // A large size already known stays as read.
    await readAgain(500);
    plans.sawLargeTable();
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: false, generation: 1 });
  });

  it('takes no read sent before a turned-away claim for a shrink', async () => {
    const { state, plans, finishRead } = tableOf(3);
    expect(await formOf(plans)).toBe('small');
    state.now += 1_100;
    await plans.planFor(10); // a read goes out, and finds 3 pages…
    plans.sawLargeTable(); // …while a claim is turned away, the table now large
    await finishRead();
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: false, generation: 0 });
  });

  it('plans each claim on a small table when hashes get under 4 MB, where the guarded form could compare each keyed job with the whole set', async () => {
    const { state, plans, readAgain } = tableOf(3);
    state.hashMemKb = 4_095;
    expect(await formOf(plans)).toBeNull();
    // The large form has no hashed set: the memory does not matter there.
    await readAgain(500);
    expect(await formOf(plans)).toBe('large');
    state.hashMemKb = 4_096;
    await readAgain(3);
    expect(await formOf(plans)).toBe('small');
  });

  it('keeps the last size known when a background read fails, and reads again a second later', async () => {
    const { state, plans, finishRead } = tableOf(300);
    expect(await formOf(plans)).toBe('large');
    state.fail = true;
    state.now += 1_100;
    expect(await formOf(plans)).toBe('large');
    await finishRead();
    expect(await formOf(plans)).toBe('large');
    expect(state.reads).toBe(2);

    state.fail = false;
    state.pages = 10;
    state.now += 1_100;
    expect(await formOf(plans)).toBe('large');
    await finishRead();
    expect(await formOf(plans)).toBe('small');
  });

  it('plans each claim while the size cannot be read, trying again once a second rather than per claim', async () => {
    const { state, plans, finishRead } = tableOf(300);
    state.reads = 1; // every read from here waits for finishRead
    state.fail = true;
    const first = capOf(plans, 10);
    await finishRead();
    expect(await first).toBeNull();
    expect(await capOf(plans, 10)).toBeNull();
    expect(state.reads).toBe(2);

    state.fail = false;
    state.now += 1_100;
    const again = capOf(plans, 10);
    await finishRead();
    expect(await again).toBe(16);
    expect(state.reads).toBe(3);
  });

  it('starts a new generation of large-form names when a read finds the table fallen below 64 pages', async () => {
    const { plans, readAgain } = tableOf(300);
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: false, generation: 0 });
    // Growing keeps the generation: a plan made on 64 pages or more suits any larger table.
    await readAgain(100_000);
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: false, generation: 0 });
    // Truncated to a few pages: the guarded form, and a later large table gets fresh names.
    await readAgain(2);
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: true, generation: 1 });
    await readAgain(500);
    expect(await plans.planFor(10)).toEqual({ cap: 16, smallTable: false, generation: 1 });
  });

  it('gives the large form up after twenty shrinks, so a table that keeps shrinking cannot pile up statements', async () => {
    const { plans, readAgain } = tableOf(300);
    expect(await formOf(plans)).toBe('large');
    for (let shrink = 0; shrink < 20; shrink++) {
      for (const pages of [2, 300]) await readAgain(pages);
    }
    expect(await formOf(plans)).toBeNull();
    // The guarded form is safe at any size, so small tables keep it.
    await readAgain(2);
    expect(await formOf(plans)).toBe('small');
  });
});
