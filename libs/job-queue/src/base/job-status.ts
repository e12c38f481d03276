/**
 * `failed` means waiting for a retry; `dead` is the dead-letter state; `blocked`, waiting for the
 * jobs it depends on (`dependsOn`).
 */
export const JOB_STATUSES = ['pending', 'processing', 'completed', 'failed', 'dead', 'cancelled', 'blocked'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses a worker may claim from. */
export const WAITING_STATUSES = ['pending', 'failed'] as const satisfies readonly JobStatus[];

/** Statuses a job never leaves on its own (only an operator's retry of a dead job does). */
export const FINISHED_STATUSES = ['completed', 'dead', 'cancelled'] as const satisfies readonly JobStatus[];
