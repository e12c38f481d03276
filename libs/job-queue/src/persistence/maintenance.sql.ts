import type { JobTables } from './job-tables.js';
import { FINISHED_STATUSES } from '../base/job-status.js';
import { edgesOfDeleted } from './dependency.sql.js';
import { sqlStatusList } from './job-status.js';
import { attemptError } from './outcome.sql.js';

/**
 * A job whose lease expired this many times more than its max attempts is dead-lettered, charged
 * or not: the backstop for a job that kills its worker before its start was charged. Innocent
 * jobs held unstarted by crashing workers lose their worker as often: it takes this many crashes
 * holding the same job. See docs/decisions/0090-attempts-charged-at-start.md.
 */
export const LEASE_EXPIRIES_BEYOND_ATTEMPTS = 10;

/** The maintenance leader's statements: its lock, the lease reaper and retention. */
export function maintenanceSql({ schema, jobs, starts, walk, channel, dependencies }: JobTables) {
  /**
   * A finished job some unfinished job depends on stays: its dependants read its result
   * (job.dependencies()). Only rows marked has_dependants look any further.
   */
  const neededByDependants = (j: string) => `(${j}.has_dependants AND EXISTS (
          SELECT 1 FROM ${dependencies} d JOIN ${jobs} c ON c.id = d.job_id
          WHERE d.depends_on = ${j}.id AND c.status NOT IN ${sqlStatusList(FINISHED_STATUSES)}))`;
  return {
    /**
     * Transaction-scoped: released at commit, so a dead leader never blocks the next one. A leader
     * cut off mid-pass (a partition, no reset) would hold it until the server noticed, hours with
     * default keepalives: the server ends a pass left idle for 10 s, and the next leader goes on.
     */
    tryMaintenanceLock: `SELECT pg_try_advisory_xact_lock(19025, hashtext('${schema}')) AS acquired,
                                set_config('idle_in_transaction_session_timeout', '10000', true)`,

    /**
     * Takes back jobs whose worker stopped renewing. SKIP LOCKED plus the status recheck on the
     * locked row make a concurrent renewal or completion win cleanly: such a row is skipped.
     * A charged attempt (the job had started) counts: the job waits for its retry, or is
     * dead-lettered if that was its last attempt. A prefetched one (claimed, never started, or
     * started within its last few ms) goes back to pending in its place in line, attempts
     * unchanged, nothing added to its errors. Every expiry counts in lease_expiries, and a job
     * that has lost its worker LEASE_EXPIRIES_BEYOND_ATTEMPTS times more than its max attempts is
     * dead-lettered whatever its attempts (the crash-loop backstop).
     */
    reapExpiredLeases: `
      WITH expired AS MATERIALIZED (
        SELECT id FROM ${jobs}
        WHERE status = 'processing' AND lease_expires_at < now()
        ORDER BY lease_expires_at LIMIT $1
        FOR UPDATE SKIP LOCKED
      ), judged AS (
        SELECT j.id, j.worker_id, j.prefetched, j.attempts, j.lease_expiries + 1 AS expiries,
               j.lease_expiries + 1 >= j.max_attempts + ${LEASE_EXPIRIES_BEYOND_ATTEMPTS} AS looping,
               NOT j.prefetched AND j.attempts >= j.max_attempts AS spent
        FROM ${jobs} j JOIN expired USING (id)
      ), reaped AS (
        SELECT id, worker_id, prefetched, spent OR looping AS dies,
               CASE WHEN looping AND NOT spent
                 THEN 'worker lost: the job lost its worker ' || expiries || ' times, its start recorded or not (it may be ' ||
                      'killing its worker as it starts); last ' || COALESCE(worker_id, 'unknown worker')
                 ELSE 'worker lost: ' || COALESCE(worker_id, 'unknown worker') || ' stopped renewing its lease on attempt ' ||
                      attempts || ' (crashed, killed or stalled while running the job)'
               END AS reason
        FROM judged
      )
      UPDATE ${jobs} j
      SET status = CASE WHEN reaped.dies THEN 'dead' WHEN j.prefetched THEN 'pending' ELSE 'failed' END,
          dead_at = CASE WHEN reaped.dies THEN now() END,
          retry_after = CASE WHEN reaped.dies OR j.prefetched THEN NULL ELSE now() END,
          run_at = CASE WHEN j.prefetched AND NOT reaped.dies THEN j.run_at ELSE now() END,
          last_error = CASE WHEN j.prefetched AND NOT reaped.dies THEN j.last_error ELSE reaped.reason END,
          errors = CASE WHEN j.prefetched AND NOT reaped.dies THEN j.errors
                        ELSE j.errors || ${attemptError('j.attempts', 'j.worker_id', 'reaped.reason')} END,
          worker_id = CASE WHEN j.prefetched AND NOT reaped.dies THEN NULL ELSE j.worker_id END,
          claimed_at = CASE WHEN j.prefetched AND NOT reaped.dies THEN NULL ELSE j.claimed_at END,
          lease_expiries = j.lease_expiries + 1, prefetched = false,
          lease_token = NULL, lease_expires_at = NULL
      FROM reaped WHERE j.id = reaped.id AND j.status = 'processing'
      RETURNING j.id::text AS id, j.type, j.status, reaped.worker_id, j.notify_on_finish`,

    /** Wakes enqueueAndWait callers of jobs the reaper dead-lettered; it writes nothing. */
    notifyFinished: `SELECT pg_notify('${channel}', 'finished:' || id) FROM unnest($1::bigint[]) AS id`,

    /**
     * The start log only matters within the longest rate window. Run by the maintenance leader only;
     * a claim inserting meanwhile adds rows far too recent to match.
     */
    pruneStarts: `DELETE FROM ${starts} WHERE started_at < now() - $1 * interval '1 millisecond'`,

    /**
     * Retention of completed and cancelled jobs, without an index of them (each completion would
     * pay for its entry): one chunk of the table in id order, the $2 rows after id $1, deleting
     * those completed, or cancelled, more than $3 ms ago (cancelled by creation time); a completed
     * job whose enqueueAndWait caller has not read it yet (notify_on_finish still set) only once
     * it completed more than $4 ms ago as well. The pruner walks the table chunk by chunk and
     * starts over once a chunk ends in rows created within the retention window: ids grow with
     * creation time, so nothing beyond can have expired yet. Candidates are locked FOR UPDATE SKIP
     * LOCKED, which rechecks status and age on the row's latest version: a row changed or held
     * meanwhile (a concurrent retryDead) is left alone. A job that unfinished jobs depend on is
     * kept for them; the edges of a deleted job that depended on others go with it.
     */
    /**
     * Run before the walk's chunks, in the pass's transaction: the walk must read the primary key
     * in order whatever the statistics say. Statistics taken while the table was sparse (a vacuum
     * after a purge) make a chunk look like half the table, and the planner would sort all of it.
     * Sorting is only priced out, so the one plan with no other way still sorts.
     */
    planWalkInIdOrder: `SELECT set_config('enable_sort', 'off', true)`,

    pruneFinishedChunk: `
      WITH scanned AS MATERIALIZED (
        SELECT id, status, created_at, completed_at, notify_on_finish FROM ${jobs} WHERE id > $1::bigint ORDER BY id LIMIT $2
      ), doomed AS (
        SELECT j.id FROM ${jobs} j
        WHERE j.id = ANY (ARRAY(
                SELECT id FROM scanned
                WHERE (status = 'completed' AND completed_at < now() - $3 * interval '1 millisecond'
                       AND (NOT notify_on_finish OR completed_at < now() - $4 * interval '1 millisecond'))
                   OR (status = 'cancelled' AND created_at < now() - $3 * interval '1 millisecond')))
          AND ((j.status = 'completed' AND j.completed_at < now() - $3 * interval '1 millisecond'
                AND (NOT j.notify_on_finish OR j.completed_at < now() - $4 * interval '1 millisecond'))
               OR (j.status = 'cancelled' AND j.created_at < now() - $3 * interval '1 millisecond'))
          AND NOT ${neededByDependants('j')}
        FOR UPDATE SKIP LOCKED
      ), deleted AS (
        DELETE FROM ${jobs} j USING doomed WHERE j.id = doomed.id
        RETURNING j.id, j.status, j.dependencies_left IS NOT NULL AS had_dependencies
      ), ${edgesOfDeleted(dependencies)}, last AS (
        SELECT id, created_at FROM scanned ORDER BY id DESC LIMIT 1
      )
      SELECT (SELECT count(*) FROM scanned)::int AS scanned,
             (SELECT id::text FROM last) AS last_id,
             COALESCE((SELECT created_at >= now() - $3 * interval '1 millisecond' FROM last), false) AS reached_recent,
             (SELECT count(*) FROM deleted WHERE status = 'completed')::int AS completed,
             (SELECT count(*) FROM deleted WHERE status = 'cancelled')::int AS cancelled`,

    /**
     * Where the retention walk is, and whether its rest is over (by the database clock, which
     * every process shares). Only the maintenance leader reads and writes it, under its
     * transaction-scoped advisory lock, so the walk is one for all processes.
     */
    retentionWalk: `SELECT walked_to::text AS walked_to, rest_until <= now() AS due FROM ${walk}`,

    /** Saves the walk's position and its rest (leader only, as above); recreates the row if someone deleted it. */
    saveRetentionWalk: `
      INSERT INTO ${walk} (only_row, walked_to, rest_until)
      VALUES (true, $1::bigint, now() + $2 * interval '1 millisecond')
      ON CONFLICT (only_row) DO UPDATE SET walked_to = EXCLUDED.walked_to, rest_until = EXCLUDED.rest_until`,

    /**
     * An enqueueAndWait caller has read its job's result (with `retention.completedMs` 0, the one
     * completed row a completion keeps): from now on it is an ordinary finished job, which the
     * retention walk deletes. Only a completed row changes, and no worker writes those; a pruner
     * deleting it meanwhile leaves nothing to update.
     */
    markResultRead: `UPDATE ${jobs} SET notify_on_finish = false WHERE id = $1 AND status = 'completed' AND notify_on_finish`,

    /**
     * Dead letters past their age, oldest first, on the dead-letter index; SKIP LOCKED as above.
     * A dead job whose dependants still run is kept for them, as in the walk.
     */
    pruneDead: `
      WITH doomed AS (
        SELECT id FROM ${jobs} j WHERE status = 'dead' AND dead_at < now() - $1 * interval '1 millisecond'
          AND NOT ${neededByDependants('j')}
        ORDER BY dead_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ), deleted AS (
        DELETE FROM ${jobs} j USING doomed WHERE j.id = doomed.id
        RETURNING j.id, j.dependencies_left IS NOT NULL AS had_dependencies
      ), ${edgesOfDeleted(dependencies)}
      SELECT count(*)::int AS deleted FROM deleted`,
  };
}

export type MaintenanceSql = ReturnType<typeof maintenanceSql>;
