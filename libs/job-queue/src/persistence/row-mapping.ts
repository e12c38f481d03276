import type { JobRecord } from './job-record.js';

/** snake_case row from job.sql.ts RECORD_COLUMNS → the public JobRecord. */
export function toJobRecord(row: Record<string, any>): JobRecord {
  return {
    id: row.id,
    type: row.type,
    payload: row.payload,
    status: row.status,
    priority: row.priority,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    lastError: row.last_error,
    errors: row.errors ?? [],
    result: row.result,
    progress: row.progress ?? null,
    logs: row.logs ?? [],
    idempotencyKey: row.idempotency_key,
    orderingKey: row.ordering_key ?? null,
    debounceKey: row.debounce_key ?? null,
    group: row.group_key ?? null,
    workerId: row.worker_id,
    runAt: row.run_at,
    createdAt: row.created_at,
    claimedAt: row.claimed_at,
    completedAt: row.completed_at,
    retryAfter: row.retry_after,
    deadAt: row.dead_at,
    leaseExpiresAt: row.lease_expires_at,
  };
}
