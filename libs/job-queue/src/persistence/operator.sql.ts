import { RECORD_COLUMNS } from './admin.sql.js';
import { edgesOfDeleted } from './dependency.sql.js';
import type { JobTables } from './job-tables.js';

/** Statuses a page lists through an index of that status alone (partial indexes of the jobs table). */
export const INDEXED_LIST_STATUSES = ['pending', 'failed', 'processing', 'dead'] as const;
export type IndexedListStatus = (typeof INDEXED_LIST_STATUSES)[number];

/** Statuses `purge` deletes, and the column that dates each (the one retention reads). */
export const PURGE_AGE_COLUMNS = { completed: 'completed_at', dead: 'dead_at', cancelled: 'created_at' } as const;
export type PurgeStatus = keyof typeof PURGE_AGE_COLUMNS;

/** The operator's view: worker heartbeats, pauses, throughput, progress, job lists and bulk actions. */
export function operatorSql({ jobs, workers, paused, throughput, channel, dependencies }: JobTables) {
  // The status is written into the text, not bound: the planner can then prove the partial index.
  // `j.id`: RECORD_COLUMNS names its text form `id`, which would sort as text.
  const listByStatus = (status: IndexedListStatus) => `
    SELECT ${RECORD_COLUMNS} FROM ${jobs} j
    WHERE status = '${status}' AND ($1::text IS NULL OR type = $1) AND ($2::bigint IS NULL OR j.id < $2)
    ORDER BY j.id DESC LIMIT $3`;
  const purge = (status: PurgeStatus) => `
    WITH doomed AS (
      SELECT id FROM ${jobs}
      WHERE status = '${status}' AND ($1::text IS NULL OR type = $1) AND ${PURGE_AGE_COLUMNS[status]} < now() - $2 * interval '1 millisecond'
      LIMIT $3 FOR UPDATE SKIP LOCKED
    ), deleted AS (
      DELETE FROM ${jobs} j USING doomed WHERE j.id = doomed.id AND j.status = '${status}'
      RETURNING j.id, j.dependencies_left IS NOT NULL AS had_dependencies
    ), ${edgesOfDeleted(dependencies)}
    SELECT count(*)::int AS deleted FROM deleted`;
  return {
    /**
     * One process's heartbeat and its outcome tally, in one round trip. Only the process itself
     * writes its worker row. Tally rows are added to, never set, so processes beating at once each
     * count once; every process sends its rows in (minute, type) order, so two beats that touch the
     * same rows lock them in the same order and cannot deadlock. `$1` null: a tally with no worker.
     */
    heartbeat: `
      WITH beat AS (
        INSERT INTO ${workers} (id, host, pid, started_at, heartbeat_at, expires_at, types, concurrency, in_flight, draining)
        SELECT $1, $2, $3, $4, now(), now() + $5 * interval '1 millisecond', $6::text[], $7, $8, $9 WHERE $1::text IS NOT NULL
        ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), expires_at = EXCLUDED.expires_at, types = EXCLUDED.types,
          concurrency = EXCLUDED.concurrency, in_flight = EXCLUDED.in_flight, draining = EXCLUDED.draining
        RETURNING 1
      ), tallied AS (
        INSERT INTO ${throughput} AS t (minute, type, completed, failed, dead)
        SELECT to_timestamp(m.minute * 60), m.type, m.completed, m.failed, m.dead
        FROM unnest($10::bigint[], $11::text[], $12::int[], $13::int[], $14::int[]) WITH ORDINALITY AS m(minute, type, completed, failed, dead, n)
        ORDER BY m.n
        ON CONFLICT (minute, type) DO UPDATE
        SET completed = t.completed + EXCLUDED.completed, failed = t.failed + EXCLUDED.failed, dead = t.dead + EXCLUDED.dead
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM beat)::int AS beat, (SELECT count(*) FROM tallied)::int AS tallied`,

    /** A worker that drained leaves the list at once; only it deletes its row. */
    removeWorker: `DELETE FROM ${workers} WHERE id = $1`,

    /** Read-only: the processes whose last heartbeat has not expired. */
    listWorkers: `
      SELECT id, host, pid, started_at, heartbeat_at, types, concurrency, in_flight, draining
      FROM ${workers} WHERE expires_at > now() ORDER BY started_at, id`,

    /**
     * The primary key makes two concurrent pauses one row; only the one that added it notifies,
     * and workers re-read the whole list on any notification, so an order of notifications is moot.
     */
    pauseType: `
      WITH added AS (INSERT INTO ${paused} (type) VALUES ($1) ON CONFLICT (type) DO NOTHING RETURNING type)
      SELECT pg_notify('${channel}', 'paused') FROM added`,

    /** As pauseType: one delete wins, and it notifies. */
    resumeType: `
      WITH removed AS (DELETE FROM ${paused} WHERE type = $1 RETURNING type)
      SELECT pg_notify('${channel}', 'paused') FROM removed`,

    /** Read-only. */
    pausedTypes: `SELECT type FROM ${paused} ORDER BY type`,

    /** Read-only: every minute of the window, oldest first, zeros where nothing was tallied. */
    throughput: `
      SELECT m.minute, COALESCE(sum(t.completed), 0)::int AS completed, COALESCE(sum(t.failed), 0)::int AS failed,
             COALESCE(sum(t.dead), 0)::int AS dead
      FROM generate_series(date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute', date_trunc('minute', now()), interval '1 minute') AS m(minute)
      LEFT JOIN ${throughput} t ON t.minute = m.minute AND ($2::text IS NULL OR t.type = $2)
      GROUP BY m.minute ORDER BY m.minute`,

    /** Maintenance leader only: workers gone for an hour, and tallies older than $1 ms. */
    pruneOperatorHistory: `
      WITH gone AS (DELETE FROM ${workers} WHERE expires_at < now() - interval '1 hour' RETURNING 1),
           old AS (DELETE FROM ${throughput} WHERE minute < now() - $1 * interval '1 millisecond' RETURNING 1)
      SELECT (SELECT count(*) FROM gone)::int AS workers, (SELECT count(*) FROM old)::int AS minutes`,

    /**
     * Fenced like an outcome: only the attempt holding the lease writes, so a worker that lost the
     * job cannot overwrite the progress of the one that has it now.
     */
    reportProgress: `UPDATE ${jobs} SET progress = $3::jsonb WHERE id = $1 AND lease_token = $2 AND status = 'processing'`,

    /**
     * Appends $4 (a jsonb array of lines) to the job's log, keeping the last $5. While the job runs
     * only the attempt holding the lease writes; once it has finished, the worker that ran it last
     * may still add the lines its handler logged just before returning. The row lock orders two
     * appends; each keeps the lines of both.
     */
    appendJobLogs: `
      UPDATE ${jobs} SET logs = (
        SELECT jsonb_agg(kept.line ORDER BY kept.n) FROM (
          SELECT l.line, l.n FROM jsonb_array_elements(COALESCE(logs, '[]'::jsonb) || $4::jsonb) WITH ORDINALITY AS l(line, n)
          ORDER BY l.n DESC LIMIT $5
        ) kept
      )
      WHERE id = $1 AND (lease_token = $2 OR (status <> 'processing' AND worker_id = $3))`,

    /** Read-only, newest first, through the status's partial index; keyset on id. */
    listPending: listByStatus('pending'),
    listFailed: listByStatus('failed'),
    listProcessing: listByStatus('processing'),
    listDeadPage: listByStatus('dead'),

    /**
     * Read-only, newest first, for statuses with no index of their own (most rows are completed):
     * walks at most $5 rows of the primary key down from $3 and keeps those matching; the walk's
     * end is the next page's start, so a page costs $5 rows at most however sparse the matches.
     * Run after planWalkInIdOrder in one transaction, so the walk is the index's whatever the
     * statistics say.
     */
    listJobsWalk: `
      WITH scanned AS MATERIALIZED (
        SELECT id, type, status FROM ${jobs} WHERE ($3::bigint IS NULL OR id < $3) ORDER BY id DESC LIMIT $5
      ), page AS (
        SELECT id FROM scanned WHERE ($1::text IS NULL OR type = $1) AND ($2::text IS NULL OR status = $2) ORDER BY id DESC LIMIT $4
      )
      SELECT info.scanned, info.scanned_to, r.*
      FROM (SELECT count(*)::int AS scanned, min(id)::text AS scanned_to FROM scanned) info
      LEFT JOIN LATERAL (SELECT ${RECORD_COLUMNS} FROM ${jobs} j WHERE j.id IN (SELECT id FROM page)) r ON true
      ORDER BY r.id::bigint DESC`,

    /**
     * Up to $2 dead jobs (of type $1) back to pending, as retryDead does one: rows another retry
     * or a purge holds are skipped, and the status is checked again on the locked row.
     */
    retryDeadBatch: `
      WITH picked AS (
        SELECT id FROM ${jobs} WHERE status = 'dead' AND ($1::text IS NULL OR type = $1)
        ORDER BY dead_at DESC, id DESC LIMIT $2 FOR UPDATE SKIP LOCKED
      ), retried AS (
        UPDATE ${jobs} j
        SET status = 'pending', attempts = 0, lease_expiries = 0, run_at = now(), dead_at = NULL, retry_after = NULL,
            worker_id = NULL, claimed_at = NULL, completed_at = NULL
        FROM picked WHERE j.id = picked.id AND j.status = 'dead'
        RETURNING 1
      )
      SELECT count(*)::int AS retried FROM retried`,

    /**
     * Up to $3 jobs of the status, of type $1, older than $2 ms; rows held elsewhere are skipped and
     * rechecked. A deleted job's own edges go with it; jobs that depended on it no longer list it.
     */
    purgeCompleted: purge('completed'),
    purgeDead: purge('dead'),
    purgeCancelled: purge('cancelled'),
  };
}

export type OperatorSql = ReturnType<typeof operatorSql>;
