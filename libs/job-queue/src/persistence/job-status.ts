import { type JobStatus, WAITING_STATUSES } from '../base/job-status.js';

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
