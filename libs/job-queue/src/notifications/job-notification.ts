/** What a process hears on the queue's notification channel. */
export type JobNotification =
  | { kind: 'new' }
  /** Delayed jobs were added: the earliest comes due at `at` (epoch ms, this process's clock). */
  | { kind: 'due'; at: number }
  | { kind: 'cancel'; jobId: string }
  | { kind: 'finished'; jobId: string };
