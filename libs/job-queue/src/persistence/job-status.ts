/** `failed` means waiting for a retry; `dead` is the dead-letter state. */
export const JOB_STATUSES = ['pending', 'processing', 'completed', 'failed', 'dead', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses a worker may claim from. */
export const WAITING_STATUSES = ['pending', 'failed'] as const satisfies readonly JobStatus[];

/**
 * Statuses as an SQL list, `('pending', 'failed')`, written into statement texts when they are
 * built. The claim's list must imply the predicate of the claim index (migration
 * 1764403200000-create-jobs), which spells the waiting statuses in this order.
 */
export function sqlStatusList(statuses: readonly JobStatus[]): string {
  return `(${statuses.map((status) => `'${status}'`).join(', ')})`;
}

/** `('pending', 'failed')`: the waiting statuses in SQL. */
export const WAITING_SQL = sqlStatusList(WAITING_STATUSES);
