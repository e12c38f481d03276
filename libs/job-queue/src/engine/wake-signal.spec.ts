import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WakeSignal } from './wake-signal.js';

/** Tracks whether a promise has settled, without awaiting it. */
function track(promise: Promise<unknown>) {
  const state = { settled: false };
  void promise.then(() => (state.settled = true));
  return state;
}

describe('WakeSignal', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps a notify that arrives before anyone waits', async () => {
    const signal = new WakeSignal();
    signal.notify();
    const wait = track(signal.wait(60_000));
    await vi.advanceTimersByTimeAsync(0);
    expect(wait.settled).toBe(true);
  });

  it('keeps a kept notify for one wait only; several notifies collapse into one', async () => {
    const signal = new WakeSignal();
    signal.notify();
    signal.notify();
    const first = track(signal.wait(1_000));
    await vi.advanceTimersByTimeAsync(0);
    expect(first.settled).toBe(true);
    const second = track(signal.wait(1_000));
    await vi.advanceTimersByTimeAsync(999);
    expect(second.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(second.settled).toBe(true);
  });

  it('resolves a wait when its timeout passes, and not before', async () => {
    const signal = new WakeSignal();
    const wait = track(signal.wait(500));
    await vi.advanceTimersByTimeAsync(499);
    expect(wait.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(wait.settled).toBe(true);
  });

  it('wakes a waiter at once when notified', async () => {
    const signal = new WakeSignal();
    const wait = track(signal.wait(60_000));
    await vi.advanceTimersByTimeAsync(10);
    expect(wait.settled).toBe(false);
    signal.notify();
    await vi.advanceTimersByTimeAsync(0);
    expect(wait.settled).toBe(true);
    expect(vi.getTimerCount()).toBe(0); // the timeout was cleared
  });

  it('does not carry a notify consumed by a waiter over to the next wait', async () => {
    const signal = new WakeSignal();
    const first = track(signal.wait(1_000));
    signal.notify();
    await vi.advanceTimersByTimeAsync(0);
    expect(first.settled).toBe(true);
    const second = track(signal.wait(1_000));
    await vi.advanceTimersByTimeAsync(0);
    expect(second.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(second.settled).toBe(true);
  });

  it('keeps a notify that arrives after a wait timed out', async () => {
    const signal = new WakeSignal();
    const first = track(signal.wait(100));
    await vi.advanceTimersByTimeAsync(100);
    expect(first.settled).toBe(true);
    signal.notify();
    const second = track(signal.wait(60_000));
    await vi.advanceTimersByTimeAsync(0);
    expect(second.settled).toBe(true);
  });
});

describe('WakeSignal with real timers', () => {
  it('times out on its own, and says so', async () => {
    const signal = new WakeSignal();
    await expect(signal.wait(20)).resolves.toBe(false);
  });

  it('says when it was notified, or a kept wake ended the wait at once', async () => {
    const signal = new WakeSignal();
    const waiting = signal.wait(60_000);
    signal.notify();
    await expect(waiting).resolves.toBe(true);
    signal.notify();
    await expect(signal.wait(60_000)).resolves.toBe(true);
  });
});
