/** What a process hears on the queue's notification channel. */
export type JobNotification = { kind: 'new' } | { kind: 'cancel'; jobId: string } | { kind: 'finished'; jobId: string };
