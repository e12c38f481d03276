import { monotonicNow } from '../base/monotonic-clock.js';
import type { Attempt } from './attempt.js';
import type { HeldLease } from './lease-keeper.js';
import { MAX_TIMER_MS } from './max-timer.js';
import { WakeSignal } from './wake-signal.js';

/** Attempts started and not over yet (running, or writing their outcome), by job id. */
export class InFlightAttempts {
  private readonly byJob = new Map<string, Attempt>();
  private readonly emptied = new WakeSignal();

  get size(): number {
    return this.byJob.size;
  }

  get(jobId: string): Attempt | undefined {
    return this.byJob.get(jobId);
  }

  add(attempt: Attempt): void {
    this.byJob.set(attempt.id, attempt);
  }

  /** The attempt is over. A newer attempt of its job may have taken the id's place: that one stays. */
  remove(attempt: Attempt): void {
    if (this.byJob.get(attempt.id) === attempt) this.byJob.delete(attempt.id);
    if (this.byJob.size === 0) this.emptied.notify();
  }

  /** The leases to renew: an interrupted attempt's is given up. */
  leases(): HeldLease[] {
    return [...this.byJob.values()].filter((attempt) => !attempt.interruption);
  }

  /** Resolves once none is left, or at `deadline` (monotonic ms). */
  async untilEmpty(deadline: number): Promise<void> {
    while (this.byJob.size > 0) {
      const left = deadline - monotonicNow();
      if (left <= 0) return;
      await this.emptied.wait(Math.min(left, MAX_TIMER_MS));
    }
  }

  /**
   * A drain's time is up: interrupts the attempts whose handler still runs (their jobs are
   * released) and returns how many. The others keep their lease until their write lands, but a
   * failing write now gives up after a few tries: a database that is away cannot hold the shutdown.
   */
  timeOut(timeoutMs: number): number {
    const running = [...this.byJob.values()].filter((attempt) => attempt.slotHeld && !attempt.interruption);
    for (const attempt of running) attempt.interrupt('drain', new Error(`shutdown: drain timed out after ${timeoutMs} ms; the job is released`));
    for (const attempt of this.byJob.values()) attempt.drainTimedOut = true;
    return running.length;
  }
}
