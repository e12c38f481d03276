import { WAITING_STATUSES } from '../base/job-status.js';
import { sqlStatusList, WAITING_SQL } from './job-status.js';
import type { JobTables } from './job-tables.js';

/** Columns of a JobRecord (row-mapping.ts), in the shape `toJobRecord` reads. */
export const RECORD_COLUMNS = `id::text AS id, type, payload, status, priority, attempts, max_attempts, last_error, errors,
    result, progress, logs, COALESCE(idempotency_key, expired_idempotency_key) AS idempotency_key, debounce_key, ordering_key, group_key, worker_id, run_at, created_at, claimed_at, completed_at, retry_after, dead_at, lease_expires_at`;

/** Statuses a job can be cancelled from: waiting (for its turn or its dependencies) or running. */
const CANCELLABLE = sqlStatusList([...WAITING_STATUSES, 'processing', 'blocked']);

/** Operators' reads and actions (JobQueueAdmin), and the health numbers. */
export function adminSql({ jobs, channel }: JobTables) {
  return {
    /** Read-only, like stats and listDead: each sees one snapshot, whatever runs beside it. */
    getJob: `SELECT ${RECORD_COLUMNS} FROM ${jobs} WHERE id = $1`,

    /** Read-only. */
    stats: `SELECT type, status, count(*)::int AS count FROM ${jobs} GROUP BY type, status`,

    /** Read-only, newest first. */
    listDead: `
      SELECT ${RECORD_COLUMNS} FROM ${jobs} j
      WHERE status = 'dead' AND ($1::text IS NULL OR type = $1)
      ORDER BY dead_at DESC, j.id DESC LIMIT $2`,

    /** Only a row still `dead` moves; two concurrent retries update it once. */
    retryDead: `
      UPDATE ${jobs}
      SET status = 'pending', attempts = 0, lease_expiries = 0, run_at = now(), dead_at = NULL, retry_after = NULL,
          worker_id = NULL, claimed_at = NULL, completed_at = NULL
      WHERE id = $1 AND status = 'dead'
      RETURNING ${RECORD_COLUMNS}`,

    /** Wakes idle workers after a dead-letter retry (inserts notify by trigger); it writes nothing. */
    notifyNew: `SELECT pg_notify('${channel}', 'new')`,

    /**
     * Locks the row, then cancels it if it has not finished. A running job loses its lease token,
     * so its worker can no longer complete it; the notification lets that worker abort at once.
     */
    cancel: `
      WITH target AS MATERIALIZED (
        SELECT id, status AS previous_status FROM ${jobs} WHERE id = $1 FOR UPDATE
      ), cancelled AS (
        UPDATE ${jobs} j
        SET status = 'cancelled', retry_after = NULL, prefetched = false, lease_token = NULL, lease_expires_at = NULL
        FROM target
        WHERE j.id = target.id AND j.status IN ${CANCELLABLE}
        RETURNING j.id
      ), notified AS (
        SELECT pg_notify('${channel}', 'cancel:' || id) FROM cancelled
      )
      SELECT target.previous_status, (SELECT count(*) FROM notified)::int AS notified FROM target`,

    /** Reads nothing: only that the database answers. */
    ping: `SELECT 1`,

    /**
     * Read-only health numbers: waiting jobs (counted up to $1, so a huge backlog stays cheap) and
     * dead letters of the last hour, both on partial indexes, and whether the server takes writes.
     */
    queueSnapshot: `
      SELECT (SELECT count(*) FROM (SELECT 1 FROM ${jobs} WHERE status IN ${WAITING_SQL} LIMIT $1) w)::int AS depth,
             (SELECT count(*) FROM ${jobs} WHERE status = 'dead' AND dead_at > now() - interval '1 hour')::int AS dead_last_hour,
             (pg_is_in_recovery() OR current_setting('transaction_read_only')::bool) AS read_only`,

    /**
     * Read-only, for metrics: per type, how long the oldest due waiting job has waited (seconds).
     * It reads the waiting jobs' partial claim index only, never the finished ones.
     */
    oldestWaiting: `
      SELECT type, extract(epoch FROM now() - min(run_at))::float8 AS age_seconds
      FROM ${jobs} WHERE status IN ${WAITING_SQL} AND run_at <= now() GROUP BY type`,

    /** Read-only: waiting jobs of the types that are due now (a tester's drain asks whether any is left). */
    countDue: `SELECT count(*)::int AS due FROM ${jobs} WHERE status IN ${WAITING_SQL} AND run_at <= now() AND type = ANY($1::text[])`,

    /** Read-only: waiting jobs of the given types, each counted up to $2. */
    depthByType: `
      SELECT t.type, (SELECT count(*) FROM (SELECT 1 FROM ${jobs} j
                      WHERE j.type = t.type AND j.status IN ${WAITING_SQL} LIMIT $2) w)::int AS depth
      FROM unnest($1::text[]) AS t(type)`,
  };
}

export type AdminSql = ReturnType<typeof adminSql>;
