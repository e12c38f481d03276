/** What a process hears on the queue's notification channel. */
export type JobNotification =
  | { kind: 'new' }
  /** Delayed jobs were added: the earliest comes due in `inMs` (as the database counted it). */
  | { kind: 'due'; inMs: number }
  | { kind: 'cancel'; jobId: string }
  | { kind: 'finished'; jobId: string }
  /** A type was paused or resumed: re-read the paused list. */
  | { kind: 'paused' }
  /** A runtime schedule was added, changed or removed: re-read them. */
  | { kind: 'schedules' };
