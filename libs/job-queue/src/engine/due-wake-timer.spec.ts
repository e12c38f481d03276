import { afterEach, describe, expect, it, vi } from 'vitest';
import { DueWakeTimer, MAX_DUE_WAKES } from './due-wake-timer.js';
import { until } from './scripted-store.stub.js';

const timers: DueWakeTimer[] = [];

/** A timer noting when (performance.now) each wake-up came. */
function timer(): { timer: DueWakeTimer; wokeAt: number[] } {
  const wokeAt: number[] = [];
  const made = new DueWakeTimer(() => wokeAt.push(performance.now()));
  timers.push(made);
  return { timer: made, wokeAt };
}

afterEach(() => {
  for (const made of timers.splice(0)) made.clear();
  vi.useRealTimers();
});

describe('DueWakeTimer', () => {
  it('wakes for each due time in order, keeping the earliest 1,000', async () => {
    const { timer: due, wokeAt } = timer();
    const from = performance.now();
    // Out of order, and more than are kept: the latest beyond 1,000 are dropped, not the earliest.
    for (let i = 0; i < 1_005; i++) due.wakeIn(10_000 + i);
    due.wakeIn(300);
    due.wakeIn(100);
    expect(due.pending).toBe(MAX_DUE_WAKES);
    await until(() => wokeAt.length >= 2, 'the wake-ups at +100 and +300 ms');
    expect(wokeAt[0] - from).toBeGreaterThanOrEqual(100);
    expect(wokeAt[1] - from).toBeGreaterThanOrEqual(300);
    expect(due.pending).toBe(MAX_DUE_WAKES - 2);
  });

  it('wakes once for the due times that have passed when it fires', async () => {
    const { timer: due, wokeAt } = timer();
    due.wakeIn(5);
    due.wakeIn(5);
    due.wakeIn(6);
    // All three pass before the timer can fire.
    const busyUntil = performance.now() + 20;
    while (performance.now() < busyUntil);
    await until(() => wokeAt.length >= 1 && due.pending === 0, 'the wake-up');
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(wokeAt).toHaveLength(1);
  });

  it('ignores a due time that is not a finite number', () => {
    const { timer: due } = timer();
    due.wakeIn(Number.NaN);
    due.wakeIn(Infinity);
    expect(due.pending).toBe(0);
  });

  it('forgets every due time on clear', async () => {
    const { timer: due, wokeAt } = timer();
    due.wakeIn(10);
    due.clear();
    expect(due.pending).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(wokeAt).toEqual([]);
  });

  it('does not put off a wake-up when the wall clock steps back (NTP, a resumed VM)', async () => {
    // Only the wall clock is faked (Date, moving with real time); timers and performance.now keep real time.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    const { timer: due, wokeAt } = timer();
    const from = performance.now();
    due.wakeIn(50);
    vi.setSystemTime(Date.now() - 3_600_000);
    await until(() => wokeAt.length >= 1, 'the wake-up 50 ms later');
    expect(wokeAt[0] - from).toBeGreaterThanOrEqual(50);
  });
});
