/** The outcomes throughput counts: a completion, a failed attempt that will be retried, a dead letter. */
export type TalliedOutcome = 'completed' | 'failed' | 'dead';

/** Where the engine and the reaper count outcomes; counting is in memory, the writes are batched elsewhere. */
export interface OutcomeTally {
  count(type: string, outcome: TalliedOutcome): void;
}
