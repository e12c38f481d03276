/** `failed` means waiting for a retry; `dead` is the dead-letter state. */
export const JOB_STATUSES = ['pending', 'processing', 'completed', 'failed', 'dead', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses a worker may claim from. */
export const WAITING_STATUSES: readonly JobStatus[] = ['pending', 'failed'];
