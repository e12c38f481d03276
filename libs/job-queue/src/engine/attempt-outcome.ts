import type { Interruption } from './attempt-control.js';

/** How one attempt ended, as the recorder needs to know it. */
export type AttemptOutcome =
  | { kind: 'succeeded'; resultJson: string }
  | { kind: 'failed'; error: string; permanent: boolean }
  | { kind: 'interrupted'; reason: Interruption };
