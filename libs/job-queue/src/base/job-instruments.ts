import type { OutcomeTally, TalliedOutcome } from './outcome-tally.js';

/**
 * What the producer and the engine report for metrics (`metrics` option). Absent unless the app
 * turns metrics on, so the hot path then pays one null check. Calls must be cheap and never throw.
 */
export interface JobInstruments extends OutcomeTally {
  /** Jobs inserted (deduplicated enqueues are not). */
  enqueued(type: string, count: number): void;
  /** An attempt's handler returned: how long it ran, its outcome, and how long the job waited from due to start (when known). */
  attemptTimed(type: string, outcome: TalliedOutcome, durationMs: number, waitMs: number | null): void;
  /** Where to read the attempts running in this process, per type. */
  watchInFlight?(read: () => ReadonlyMap<string, number>): void;
  /** The module has shut down. */
  release?(): void;
}
