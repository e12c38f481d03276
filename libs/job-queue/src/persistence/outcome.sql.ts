import type { JobTables } from './job-tables.js';

/** A one-element jsonb array holding one attempt's error, to append to a job's `errors`. */
export const attemptError = (attempt: string, worker: string, error: string) =>
  `jsonb_build_array(jsonb_build_object('attempt', ${attempt}, 'at', now(), 'workerId', ${worker}, 'error', ${error}))`;

/**
 * Ends an attempt that may not be charged yet (claimed prefetched, started, its start not yet
 * confirmed): the outcome charges it. `table`: the row's alias, if any.
 */
const charged = (table = '') => `attempts = ${table}attempts + ${table}prefetched::int, prefetched = false`;

/**
 * Rows a completion may delete when `retention.completedMs` is 0: not one an enqueueAndWait
 * caller will read, one whose dependants read its result, or one that depends on others (its
 * edges go with it at retention). Everything else fenced alike: a row an enqueue marks as
 * depended on meanwhile (under its lock) fails this on the latest version and is completed instead.
 */
const DELETABLE_ON_COMPLETION = 'NOT j.notify_on_finish AND NOT j.has_dependants AND j.dependencies_left IS NULL';

/** The token check of heldBy, alone: the token this worker holds for row j. */
const holdsToken = (others: string, usual: string) => `j.lease_token = COALESCE((${others}::jsonb ->> j.id::text)::uuid, ${usual}::uuid)`;

/**
 * The rows of a batch this worker still holds: found on the primary key (`= ANY (ARRAY(…))`
 * hides the array's size from the planner, so it never prefers a table scan or a status index
 * full of dead entries), each still carrying the token this worker holds for it: the batch's
 * usual token ($usual), or the one `$others` maps the id to (a claim gives all its jobs one
 * token, so most of a batch shares one and the map stays small). The claim sets a token and
 * everything that ends an attempt clears it; a CHECK ties it to 'processing'. So a matching
 * token means: still this worker's, still running.
 */
const heldBy = (ids: string, others: string, usual: string) =>
  `j.id = ANY (ARRAY(SELECT unnest(${ids}::bigint[]))) AND ${holdsToken(others, usual)}`;

/**
 * `confirmed`: prefetched attempts that have started get their attempt charged (the claim did
 * not), each fenced by its token like the rest of the batch; a row charged meanwhile (its outcome
 * written first) no longer holds the token or is no longer prefetched, and is left alone.
 */
const confirming = (jobs: string, ids: string, others: string, usual: string) => `confirmed AS (
        UPDATE ${jobs} j SET attempts = j.attempts + 1, prefetched = false
        WHERE ${heldBy(ids, others, usual)} AND j.prefetched
        RETURNING j.id
      )`;

/**
 * The writes of a running attempt, each fenced by its lease token (or, for the effect ledger,
 * deliberately not), and the start record of a rate-limited one.
 */
export function outcomeSql({ jobs, starts, effects, channel }: JobTables) {
  /** Wraps a fenced UPDATE … RETURNING id, notify_on_finish: reports `applied` and notifies waiters. */
  const finishing = (update: string) => `
      WITH done AS (${update})
      SELECT (SELECT count(*) FROM done)::int AS applied,
             (SELECT count(*) FROM (SELECT pg_notify('${channel}', 'finished:' || id) FROM done
                                    WHERE notify_on_finish) n)::int AS notified`;

  /**
   * The batched completion statements, with or without starts to confirm ($5): a worker with none
   * pending (short jobs) runs the statement without that update at all.
   */
  const completeMany = (confirms: boolean) => `
      WITH done AS (
        UPDATE ${jobs} j
        SET status = 'completed', completed_at = now(), result = $3::jsonb -> (j.id::text),
            ${charged('j.')}, lease_token = NULL, lease_expires_at = NULL
        WHERE ${heldBy('$1', '$2', '$4')}
        RETURNING j.id, j.notify_on_finish
      )${confirms ? `, ${confirming(jobs, '$5', '$2', '$4')}` : ''}, notified AS (
        SELECT pg_notify('${channel}', 'finished:' || id) FROM done WHERE notify_on_finish
      )
      SELECT CASE WHEN (SELECT count(*) FROM done) < cardinality($1::bigint[])
                  THEN (SELECT string_agg(i::text, ',') FROM unnest($1::bigint[]) AS i WHERE i NOT IN (SELECT id FROM done))
             END AS missed,
             (SELECT count(*) FROM notified)::int AS notified`;
  const completeManyDeleting = (confirms: boolean) => `
      WITH deleted AS (
        DELETE FROM ${jobs} j
        WHERE ${heldBy('$1', '$2', '$4')} AND ${DELETABLE_ON_COMPLETION}
        RETURNING j.id
      )${confirms ? `, ${confirming(jobs, '$5', '$2', '$4')}` : ''}, kept AS (
        UPDATE ${jobs} j
        SET status = 'completed', completed_at = now(), result = $3::jsonb -> (j.id::text),
            ${charged('j.')}, lease_token = NULL, lease_expires_at = NULL
        WHERE j.id = ANY (ARRAY(SELECT unnest($1::bigint[]) EXCEPT ALL SELECT id FROM deleted))
          AND ${holdsToken('$2', '$4')}
        RETURNING j.id, j.notify_on_finish
      ), notified AS (
        SELECT pg_notify('${channel}', 'finished:' || id) FROM kept WHERE notify_on_finish
      )
      SELECT CASE WHEN (SELECT count(*) FROM deleted) + (SELECT count(*) FROM kept) < cardinality($1::bigint[])
                  THEN (SELECT string_agg(i::text, ',') FROM unnest($1::bigint[]) AS i
                        WHERE i NOT IN (SELECT id FROM deleted UNION ALL SELECT id FROM kept))
             END AS missed,
             (SELECT count(*) FROM notified)::int AS notified`;

  return {
    /**
     * Fenced: applies only while this worker still holds the lease token. Notifies an
     * enqueueAndWait caller, if the job has one, when the transaction commits. A job that returned
     * nothing keeps a NULL result, as in completeMany.
     */
    complete: finishing(`
      UPDATE ${jobs}
      SET status = 'completed', completed_at = now(), result = NULLIF($3::jsonb, 'null'::jsonb),
          ${charged()}, lease_token = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_token = $2 AND status = 'processing'
      RETURNING id, notify_on_finish`),

    /**
     * Many completions in one statement (the worker batches them under load), each fenced by its
     * own lease token exactly like complete (heldBy: $4 the usual token, $2 the others by id; $3
     * maps id → result, without the jobs that returned nothing). Returns the ids that did not
     * apply (their lease was gone), as one comma-separated string, or NULL when all applied: the
     * usual reply is one NULL, not every id, and the ids are only sorted out when some failed
     * (a scalar subquery in a CASE branch runs only if that branch is taken).
     */
    completeMany: completeMany(false),

    /**
     * completeMany that also charges started prefetched attempts still running here ($5, see
     * confirmStarts). The caller never lists a job in both $1 and $5: no row is updated twice.
     */
    completeManyConfirming: completeMany(true),

    /**
     * complete when `retention.completedMs` is 0: the job's row is deleted instead, fenced by the
     * same token (the DELETE rechecks it on the row's latest version, as the UPDATE does). A job
     * that must stay readable (DELETABLE_ON_COMPLETION) is completed as usual instead, and its
     * waiting caller notified: the UPDATE runs only when the DELETE took nothing.
     */
    completeDeleting: `
      WITH deleted AS (
        DELETE FROM ${jobs} j WHERE id = $1 AND lease_token = $2 AND status = 'processing' AND ${DELETABLE_ON_COMPLETION}
        RETURNING id
      ), kept AS (
        UPDATE ${jobs}
        SET status = 'completed', completed_at = now(), result = NULLIF($3::jsonb, 'null'::jsonb),
            ${charged()}, lease_token = NULL, lease_expires_at = NULL
        WHERE id = $1 AND lease_token = $2 AND status = 'processing' AND NOT EXISTS (SELECT 1 FROM deleted)
        RETURNING id, notify_on_finish
      )
      SELECT ((SELECT count(*) FROM deleted) + (SELECT count(*) FROM kept))::int AS applied,
             (SELECT count(*) FROM (SELECT pg_notify('${channel}', 'finished:' || id) FROM kept WHERE notify_on_finish) n)::int AS notified`,

    /**
     * completeMany when `retention.completedMs` is 0, fenced per row exactly like it: the jobs
     * deletable on completion are deleted; the others, looked up again only among the ids the
     * DELETE did not take (usually none), are completed and notified as completeMany does. Same reply.
     */
    completeManyDeleting: completeManyDeleting(false),

    /** completeManyDeleting that also confirms starts ($5). */
    completeManyDeletingConfirming: completeManyDeleting(true),

    /** Fenced like complete; the retry time is computed by the database clock. */
    scheduleRetry: `
      UPDATE ${jobs}
      SET status = 'failed', last_error = $3, errors = errors || ${attemptError('$4::int', '$5::text', '$3::text')},
          run_at = now() + $6 * interval '1 millisecond', retry_after = now() + $6 * interval '1 millisecond',
          ${charged()}, lease_token = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_token = $2 AND status = 'processing'`,

    /** Fenced like complete. */
    deadLetter: finishing(`
      UPDATE ${jobs}
      SET status = 'dead', dead_at = now(), last_error = $3,
          errors = errors || ${attemptError('$4::int', '$5::text', '$3::text')},
          retry_after = NULL, ${charged()}, lease_token = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_token = $2 AND status = 'processing'
      RETURNING id, notify_on_finish`),

    /**
     * Hands jobs back (a drain, or prefetched jobs that waited too long), undoing the attempt if it
     * was charged (a prefetched one was not: its attempts stay as they are). Fenced per row, so a job already reclaimed by another worker is left alone.
     * run_at is kept: the job goes back to its place in line, not behind what came since. Idle
     * workers are woken in the same statement, so the wake-up is sent if and only if the release
     * commits (the uncorrelated subquery in WHERE runs once, even when nothing was released).
     */
    release: `
      WITH released AS (
        UPDATE ${jobs} j
        SET status = 'pending', attempts = GREATEST(j.attempts - (NOT j.prefetched)::int, 0), prefetched = false,
            worker_id = NULL, claimed_at = NULL,
            lease_token = NULL, lease_expires_at = NULL
        WHERE ${heldBy('$1', '$2', '$3')}
        RETURNING j.id
      ), notified AS (
        SELECT pg_notify('${channel}', 'new') FROM (SELECT 1 FROM released LIMIT 1) AS any_released
      )
      SELECT id::text AS id FROM released WHERE (SELECT count(*) FROM notified) >= 0`,

    /**
     * Extends every lease this worker holds in one statement; fenced per row by token, so a lease
     * another worker took over is not extended. Reports the status of leases no longer held.
     */
    renewLeases: `
      WITH renewed AS (
        UPDATE ${jobs} j SET lease_expires_at = now() + $3 * interval '1 millisecond'
        WHERE ${heldBy('$1', '$2', '$4')}
        RETURNING j.id
      )
      SELECT held.id::text AS id, (renewed.id IS NOT NULL) AS held,
             CASE WHEN renewed.id IS NOT NULL THEN 'processing' ELSE (SELECT s.status FROM ${jobs} s WHERE s.id = held.id) END AS status
      FROM unnest($1::bigint[]) AS held(id) LEFT JOIN renewed ON renewed.id = held.id`,

    /**
     * Confirms starts alone, when no completion is waiting to carry them: $1 the ids, $3 the usual
     * token, $2 the others (as heldBy). Fenced, like completeMany's own confirms.
     */
    confirmStarts: `WITH ${confirming(jobs, '$1', '$2', '$3')} SELECT (SELECT count(*) FROM confirmed)::int AS confirmed`,

    /**
     * A rate-limited handler is about to start: its start moves from the provisional stamp the
     * claim gave it (one window ahead, so it counted in every window meanwhile) to now, so a
     * handler delayed on a busy machine counts where it really starts. Only claims read it (under
     * the type's row lock). A start never made (the worker died first) stops counting two
     * windows after its claim.
     */
    markStarted: `UPDATE ${starts} SET started_at = clock_timestamp() WHERE job_id = $1`,

    /** Read of the effect ledger: a committed row means an earlier attempt finished that effect. */
    findEffect: `SELECT result, true AS found FROM ${effects} WHERE job_id = $1 AND key = $2`,

    /**
     * Records an effect as done. Not fenced by the lease on purpose: the effect happened, and the
     * next attempt must know it, whoever owns the job now. The first record of a key wins.
     */
    recordEffect: `
      INSERT INTO ${effects} (job_id, key, result, attempt) VALUES ($1, $2, $3::jsonb, $4)
      ON CONFLICT (job_id, key) DO NOTHING`,
  };
}

export type OutcomeSql = ReturnType<typeof outcomeSql>;
