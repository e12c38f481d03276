import type { Interruption } from './attempt-control.js';

/** How one attempt ended, as the recorder needs to know it. */
export type AttemptOutcome =
  | { kind: 'succeeded'; resultJson: string }
  /** A transactional handler's work and the job's completion committed together. */
  | { kind: 'committed' }
  | { kind: 'failed'; error: string; permanent: boolean }
  | { kind: 'interrupted'; reason: Interruption };
