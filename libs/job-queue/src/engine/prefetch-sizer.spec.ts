import { describe, expect, it } from 'vitest';
import { PrefetchSizer } from './prefetch-sizer.js';

describe('PrefetchSizer', () => {
  const sizerAt = (ceiling: number, types: string[]) => {
    const clock = { now: 1_000_000 };
    return { sizer: new PrefetchSizer(ceiling, types, () => clock.now), clock };
  };
  /** `perMs` jobs of `type` finish each millisecond for `ms` milliseconds. */
  const stream = (sizer: PrefetchSizer, clock: { now: number }, type: string, perMs: number, ms: number) => {
    for (let i = 0; i < ms; i++, clock.now++) for (let j = 0; j < perMs; j++) sizer.record(type);
  };

  it('keeps about 100 ms of work at the recent rate, within the ceiling, and none once nothing finishes', () => {
    const { sizer, clock } = sizerAt(1_000, ['only']);
    expect(sizer.total()).toBe(0);
    stream(sizer, clock, 'only', 2, 300);
    // 2,000 jobs/s: 200 in 100 ms.
    expect(sizer.total()).toBeGreaterThanOrEqual(190);
    expect(sizer.total()).toBeLessThanOrEqual(210);
    expect(sizerAt(50, ['only']).sizer.total()).toBe(0);
    clock.now += 300;
    expect(sizer.total()).toBe(0);
  });

  it('with one type gives no per-type parts: the worker’s rate is that type’s', () => {
    const { sizer, clock } = sizerAt(1_000, ['only']);
    stream(sizer, clock, 'only', 1, 100);
    expect(sizer.perType()).toBeUndefined();
    expect(sizer.reachable()).toBe(sizer.total());
  });

  it('holds each type to about 100 ms of its own work: none for a slow type, even just after one of its jobs finished', () => {
    const { sizer, clock } = sizerAt(1_000, ['fast', 'slow']);
    stream(sizer, clock, 'fast', 1, 300);
    // A job of the slow type (it runs for seconds) finishes now, beside 1,000 fast ones a second.
    sizer.record('slow');
    const parts = sizer.perType()!;
    expect(parts.get('slow')).toBe(0);
    expect(parts.get('fast')).toBeGreaterThanOrEqual(95);
    expect(parts.get('fast')).toBeLessThanOrEqual(105);
    expect(sizer.total()).toBeGreaterThanOrEqual(95);
  });

  it('gives a type its part as soon as three of its jobs finish in a burst', () => {
    const { sizer, clock } = sizerAt(1_000, ['a', 'b']);
    sizer.record('a');
    sizer.record('a');
    clock.now += 1;
    // Two read over the window (201 ms so far): under 10 jobs/s, so none.
    expect(sizer.perType()!.get('a')).toBe(0);
    sizer.record('a');
    // Three in their first millisecond, read over one 50 ms bucket: 60 jobs/s, 6 in 100 ms.
    expect(sizer.perType()!.get('a')).toBe(6);
  });

  it('can fill only to what the types’ parts add up to, when that is less than the total', () => {
    const { sizer, clock } = sizerAt(1_000, ['a', 'b']);
    // Two types, each finishing one job every 150 ms for a second: about 13 jobs/s in all (a total
    // of 1), and 6.7 each (parts of none).
    for (let i = 0; i < 7; i++, clock.now += 150) {
      sizer.record('a');
      sizer.record('b');
    }
    expect(sizer.total()).toBe(1);
    expect([...sizer.perType()!.values()]).toEqual([0, 0]);
    expect(sizer.reachable()).toBe(0);
  });

  it('keeps no per-type meters with prefetch off', () => {
    const { sizer, clock } = sizerAt(0, ['a', 'b']);
    stream(sizer, clock, 'a', 5, 100);
    expect(sizer.perType()).toBeUndefined();
    expect(sizer.total()).toBe(0);
  });
});
