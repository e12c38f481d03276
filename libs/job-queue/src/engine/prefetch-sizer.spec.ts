import { describe, expect, it } from 'vitest';
import { PrefetchSizer } from './prefetch-sizer.js';

describe('PrefetchSizer', () => {
  const sizerAt = (ceiling: number, types: Array<{ type: string; concurrency: number }>) => {
    const clock = { now: 1_000_000 };
    return { sizer: new PrefetchSizer(ceiling, types, () => clock.now), clock };
  };
  const only = [{ type: 'only', concurrency: 10 }];
  /** `perMs` jobs of `type`, each run `runMs`, finish each millisecond for `ms` milliseconds. */
  const stream = (sizer: PrefetchSizer, clock: { now: number }, type: string, perMs: number, ms: number, runMs = 0) => {
    for (let i = 0; i < ms; i++, clock.now++) for (let j = 0; j < perMs; j++) sizer.record(type, clock.now - runMs);
  };

  it('keeps about 100 ms of work at the recent rate, within the ceiling, and none once nothing finishes', () => {
    const { sizer, clock } = sizerAt(1_000, only);
    expect(sizer.total()).toBe(0);
    stream(sizer, clock, 'only', 2, 300);
    // 2,000 jobs/s: 200 in 100 ms.
    expect(sizer.total()).toBeGreaterThanOrEqual(190);
    expect(sizer.total()).toBeLessThanOrEqual(210);
    clock.now += 300;
    expect(sizer.total()).toBe(0);

    const capped = sizerAt(50, only);
    stream(capped.sizer, capped.clock, 'only', 2, 300);
    expect(capped.sizer.total()).toBe(50);
  });

  it('with one type, or with prefetch off, gives no per-type shares', () => {
    const one = sizerAt(1_000, only);
    stream(one.sizer, one.clock, 'only', 1, 100);
    expect(one.sizer.timesTypes).toBe(false);
    expect(one.sizer.perType()).toBeUndefined();
    const off = sizerAt(0, [
      { type: 'a', concurrency: 5 },
      { type: 'b', concurrency: 5 },
    ]);
    stream(off.sizer, off.clock, 'a', 5, 100);
    expect(off.sizer.timesTypes).toBe(false);
    expect(off.sizer.perType()).toBeUndefined();
    expect(off.sizer.total()).toBe(0);
  });

  describe('with several types', () => {
    const mixed = () =>
      sizerAt(1_000, [
        { type: 'fast', concurrency: 8 },
        { type: 'slow', concurrency: 3 },
        { type: 'medium', concurrency: 2 },
      ]);

    it('holds each type to what its own slots start in about 100 ms at its jobs’ run time', () => {
      const { sizer, clock } = mixed();
      stream(sizer, clock, 'fast', 1, 300, 2);
      // Three slow jobs that started together two seconds ago finish together: no rate can tell
      // them from fast ones, their run time can.
      for (let i = 0; i < 3; i++) sizer.record('slow', clock.now - 2_000);
      // 50 ms jobs, two slots: one frees every 25 ms, four in 100 ms.
      sizer.record('medium', clock.now - 50);
      const shares = sizer.perType()!;
      expect(shares.get('slow')).toBe(0);
      expect(shares.get('medium')).toBe(4);
      // 2 ms jobs in 8 slots: 400 in 100 ms, far above what the worker's own rate gives in all.
      expect(shares.get('fast')).toBe(400);
      expect(sizer.total()).toBeGreaterThanOrEqual(95);
      expect(sizer.total()).toBeLessThanOrEqual(105);
    });

    it('follows a type’s run time as it changes, a few jobs at a time', () => {
      const { sizer, clock } = mixed();
      sizer.record('medium', clock.now - 10);
      expect(sizer.perType()!.get('medium')).toBe(20);
      for (let i = 0; i < 8; i++) sizer.record('medium', clock.now - 400);
      expect(sizer.perType()!.get('medium')).toBe(0);
    });

    it('gives none to a type none of whose jobs finished in the last quarter second, however short they were', () => {
      const { sizer, clock } = mixed();
      expect(sizer.perType()!.get('fast')).toBe(0);
      sizer.record('fast', clock.now);
      expect(sizer.perType()!.get('fast')).toBe(800);
      clock.now += 249;
      expect(sizer.perType()!.get('fast')).toBe(800);
      clock.now += 1;
      expect(sizer.perType()!.get('fast')).toBe(0);
    });
  });
});
