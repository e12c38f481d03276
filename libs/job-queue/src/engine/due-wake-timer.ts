import { monotonicNow } from '../base/monotonic-clock.js';
import { MAX_TIMER_MS } from './max-timer.js';

/** Due times kept at once, the earliest; beyond that (a failure storm) the rest wait for the poll. */
export const MAX_DUE_WAKES = 1_000;
/** A timer can fire up to a millisecond early (libuv rounds): wake this much after the due time. */
const DUE_WAKE_MARGIN_MS = 5;

/**
 * Calls `onDue` when known jobs come due (retries this worker scheduled, delayed jobs announced),
 * so a short delay is not stretched to the poll interval. One timer, armed for the earliest due
 * time; on the monotonic clock, so a wall-clock step moves nothing.
 */
export class DueWakeTimer {
  /** Due times (monotonic ms), earliest first. */
  private readonly due: number[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly onDue: () => void) {}

  /** Due times waiting; for tests. */
  get pending(): number {
    return this.due.length;
  }

  wakeIn(delayMs: number): void {
    if (!Number.isFinite(delayMs)) return;
    const at = monotonicNow() + delayMs + DUE_WAKE_MARGIN_MS;
    const due = this.due;
    if (due.length >= MAX_DUE_WAKES) {
      if (at >= due[due.length - 1]) return;
      due.pop();
    }
    // Usually the latest yet: the search from the end stops at once.
    let i = due.length;
    while (i > 0 && due[i - 1] > at) i--;
    due.splice(i, 0, at);
    if (i === 0) this.arm();
  }

  /** Forgets every due time and stops the timer. */
  clear(): void {
    this.due.length = 0;
    this.arm();
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.due.length === 0) return;
    this.timer = setTimeout(() => this.fire(), Math.min(MAX_TIMER_MS, Math.max(0, this.due[0] - monotonicNow())));
    this.timer.unref?.();
  }

  private fire(): void {
    this.timer = null;
    const now = monotonicNow();
    // Past MAX_TIMER_MS the timer fires before the first due time: only re-armed then.
    if (this.due[0] <= now) {
      let passed = 1;
      while (passed < this.due.length && this.due[passed] <= now) passed++;
      this.due.splice(0, passed);
      this.onDue();
    }
    this.arm();
  }
}
