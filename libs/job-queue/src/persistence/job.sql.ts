/**
 * Every statement the engine runs, one per operation, for one schema. Each comment says why the
 * statement is safe when several workers run it at the same moment.
 */
export function jobSql(schema: string) {
  const jobs = `"${schema}".jobs`;
  const types = `"${schema}".job_types`;
  const starts = `"${schema}".job_starts`;
  const walk = `"${schema}".retention_walk`;
  const RECORD_COLUMNS = `id::text AS id, type, payload, status, priority, attempts, max_attempts, last_error, errors,
    result, idempotency_key, ordering_key, worker_id, run_at, created_at, claimed_at, completed_at, retry_after, dead_at, lease_expires_at`;
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
    `j.id = ANY (ARRAY(SELECT unnest(${ids}::bigint[]))) AND j.lease_token = COALESCE((${others}::jsonb ->> j.id::text)::uuid, ${usual}::uuid)`;
  /** Wraps a fenced UPDATE … RETURNING id, notify_on_finish: reports `applied` and notifies waiters. */
  const finishing = (update: string) => `
      WITH done AS (${update})
      SELECT (SELECT count(*) FROM done)::int AS applied,
             (SELECT count(*) FROM (SELECT pg_notify('auto_job_queue:${schema}', 'finished:' || id) FROM done
                                    WHERE notify_on_finish) n)::int AS notified`;
  const attemptError = (attempt: string, worker: string, error: string) =>
    `jsonb_build_array(jsonb_build_object('attempt', ${attempt}, 'at', now(), 'workerId', ${worker}, 'error', ${error}))`;

  return {
    /**
     * Inserts a batch in one round trip; ids come from the sequence first so each input maps to
     * its row. Concurrent enqueues of one idempotency key meet in the unique index: ON CONFLICT
     * waits for the other transaction and then skips, so exactly one row is written.
     */
    enqueue: `
      WITH input AS MATERIALIZED (
        SELECT nextval('"${schema}".jobs_id_seq') AS id, i.*
        FROM unnest($1::text[], $2::jsonb[], $3::int[], $4::int[], $5::timestamptz[], $6::float8[], $7::text[], $8::bool[], $9::bool[], $10::text[])
             WITH ORDINALITY AS i(type, payload, priority, max_attempts, run_at, delay_ms, idempotency_key, max_attempts_from_job,
                                  notify_on_finish, ordering_key, ord)
      ), inserted AS (
        INSERT INTO ${jobs} (id, type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key,
                             run_at, idempotency_key)
        SELECT id, type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key,
               COALESCE(run_at, now() + delay_ms * interval '1 millisecond'), idempotency_key
        FROM input ORDER BY ord
        ON CONFLICT (type, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id
      )
      SELECT input.ord::int AS ord, input.id::text AS id, (inserted.id IS NOT NULL) AS inserted
      FROM input LEFT JOIN inserted USING (id) ORDER BY input.ord`,

    /**
     * Inserts a batch without idempotency keys in one round trip: nothing can conflict, so it is a
     * plain INSERT. The batch is one JSON array ($1: t type, p payload, m max attempts, and only
     * when not the default: pr priority, mj max attempts from the job, n notify on finish,
     * o ordering key, r run at, d delay ms), so payloads travel as they are, with no array-literal
     * escaping. Rows go in in input order and take their ids from the sequence as they do, so
     * the ids, sorted, map back to the inputs in order; they come back as one comma-separated
     * string, not a row each.
     */
    enqueuePlain: `
      WITH inserted AS (
        INSERT INTO ${jobs} (type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key, run_at)
        SELECT e->>'t', e->'p', COALESCE((e->>'pr')::int, 0), (e->>'m')::int, COALESCE((e->>'mj')::bool, false),
               COALESCE((e->>'n')::bool, false), e->>'o',
               COALESCE((e->>'r')::timestamptz, now() + COALESCE((e->>'d')::float8, 0) * interval '1 millisecond')
        FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS i(e, ord)
        ORDER BY ord
        RETURNING id
      )
      SELECT string_agg(id::text, ',' ORDER BY id) AS ids FROM inserted`,

    /**
     * One job without an idempotency key (the common single enqueue): a plain one-row INSERT, which
     * nothing can conflict with. The run time is the given one, else now plus the delay.
     */
    enqueueOne: `
      INSERT INTO ${jobs} (type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key, run_at)
      VALUES ($1::text, $2::jsonb, $3::int, $4::int, $5::bool, $6::bool, $7::text,
              COALESCE($8::timestamptz, now() + $9::float8 * interval '1 millisecond'))
      RETURNING id::text AS id`,

    /**
     * A batch without idempotency keys whose jobs differ only in their payloads (the usual bulk
     * enqueue): the payloads travel as one JSON array ($1), every other column once, so the server
     * unpacks no per-row fields. Plain INSERT, nothing can conflict; ids map back to inputs as in
     * enqueuePlain (input order, sequence order).
     */
    enqueueUniform: `
      WITH inserted AS (
        INSERT INTO ${jobs} (type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key, run_at)
        SELECT $2::text, e, $3::int, $4::int, $5::bool, $6::bool, $7::text,
               COALESCE($8::timestamptz, now() + $9::float8 * interval '1 millisecond')
        FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS i(e, ord)
        ORDER BY ord
        RETURNING id
      )
      SELECT string_agg(id::text, ',' ORDER BY id) AS ids FROM inserted`,

    /** Read-only lookup of the rows that won an idempotency conflict (committed, so visible). */
    findByIdempotencyKeys: `
      SELECT j.id::text AS id, j.type, j.idempotency_key
      FROM ${jobs} j JOIN unnest($1::text[], $2::text[]) AS k(type, key)
        ON j.type = k.type AND j.idempotency_key = k.key`,

    /**
     * Taken in the claim's transaction before it, for types with a rate limit or global
     * concurrency: claims of one such type are serialised across workers, so the counts the claim
     * reads are not raced. Ordered by type, so two workers never deadlock.
     */
    claimLimitedLock: `SELECT type FROM ${types} WHERE type = ANY($1::text[]) ORDER BY type FOR UPDATE`,

    /**
     * The jobs table's size in pages, which decides the form of one-type claims, and the memory
     * PostgreSQL gives a hash (OneTypeClaimPlans). It reads the file's length under a brief share
     * lock: no scan, and nothing it could race with.
     */
    jobsTableSize: `
      SELECT (pg_relation_size('${jobs}') / current_setting('block_size')::bigint)::int AS pages,
             pg_size_bytes(current_setting('work_mem')) * COALESCE(current_setting('hash_mem_multiplier', true), '1')::float8 / 1024 AS "hashMemKb"`,

    /** Idempotent: one row per job type, made by any worker that handles the type. */
    registerTypes: `INSERT INTO ${types} (type) SELECT unnest($1::text[]) ON CONFLICT (type) DO NOTHING`,

    /**
     * A failed attempt of a type with a circuit breaker. The row lock serialises concurrent
     * failures, so the count is exact and only one of them opens the circuit.
     */
    recordCircuitFailure: `
      WITH previous AS (SELECT circuit_state FROM ${types} WHERE type = $1 FOR UPDATE)
      UPDATE ${types} t
      SET consecutive_failures = t.consecutive_failures + 1, cooldown_ms = $3::int,
          circuit_state = CASE WHEN t.circuit_state = 'half-open' OR t.consecutive_failures + 1 >= $2::int THEN 'open' ELSE t.circuit_state END,
          opened_at = CASE WHEN t.circuit_state <> 'open' AND (t.circuit_state = 'half-open' OR t.consecutive_failures + 1 >= $2::int)
                           THEN now() ELSE t.opened_at END,
          reopen_at = CASE WHEN t.circuit_state <> 'open' AND (t.circuit_state = 'half-open' OR t.consecutive_failures + 1 >= $2::int)
                           THEN now() + $3::int * interval '1 millisecond' ELSE t.reopen_at END
      FROM previous WHERE t.type = $1
      RETURNING previous.circuit_state AS previous_state, t.circuit_state AS state`,

    /**
     * A success resets the failure count, and closes a half-open circuit (the probe's success, or
     * that of a job claimed before the circuit opened: the downstream works either way). An open
     * circuit stays open through its cool-down, whatever succeeds meanwhile; a failure opening it
     * concurrently holds the row lock, and the recheck of the locked row then finds it open. Only a row that is not already
     * closed-and-clean is updated (and locked), so successes on a healthy type write nothing and
     * never queue on the row.
     */
    recordCircuitSuccess: `
      UPDATE ${types} t
      SET consecutive_failures = 0, circuit_state = 'closed', opened_at = NULL, reopen_at = NULL
      WHERE t.type = $1 AND t.circuit_state <> 'open' AND (t.consecutive_failures > 0 OR t.circuit_state <> 'closed')
      RETURNING (SELECT circuit_state FROM ${types} WHERE type = $1) AS previous_state`,

    openCircuits: `
      SELECT type, circuit_state, consecutive_failures, opened_at, reopen_at FROM ${types}
      WHERE circuit_state <> 'closed' ORDER BY type`,

    /**
     * Retention of completed and cancelled jobs, without an index of them (each completion would
     * pay for its entry): one chunk of the table in id order, the $2 rows after id $1, deleting
     * those completed, or cancelled, more than $3 ms ago (cancelled by creation time). The pruner
     * walks the table chunk by chunk and starts over once a chunk ends in rows created within the
     * retention window: ids grow with creation time, so nothing beyond can have expired yet.
     * Candidates are locked FOR UPDATE SKIP LOCKED, which rechecks status and age on the row's
     * latest version: a row changed or held meanwhile (a concurrent retryDead) is left alone.
     */
    pruneFinishedChunk: `
      WITH scanned AS MATERIALIZED (
        SELECT id, status, created_at, completed_at FROM ${jobs} WHERE id > $1::bigint ORDER BY id LIMIT $2
      ), doomed AS (
        SELECT j.id FROM ${jobs} j
        WHERE j.id = ANY (ARRAY(
                SELECT id FROM scanned
                WHERE (status = 'completed' AND completed_at < now() - $3 * interval '1 millisecond')
                   OR (status = 'cancelled' AND created_at < now() - $3 * interval '1 millisecond')))
          AND ((j.status = 'completed' AND j.completed_at < now() - $3 * interval '1 millisecond')
               OR (j.status = 'cancelled' AND j.created_at < now() - $3 * interval '1 millisecond'))
        FOR UPDATE SKIP LOCKED
      ), deleted AS (
        DELETE FROM ${jobs} j USING doomed WHERE j.id = doomed.id RETURNING j.status
      ), last AS (
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
    /** Saves the walk's position and its rest; recreates the row if someone deleted it. */
    saveRetentionWalk: `
      INSERT INTO ${walk} (only_row, walked_to, rest_until)
      VALUES (true, $1::bigint, now() + $2 * interval '1 millisecond')
      ON CONFLICT (only_row) DO UPDATE SET walked_to = EXCLUDED.walked_to, rest_until = EXCLUDED.rest_until`,
    /** Dead letters past their age, oldest first, on the dead-letter index; SKIP LOCKED as above. */
    pruneDead: `
      WITH doomed AS (
        SELECT id FROM ${jobs} WHERE status = 'dead' AND dead_at < now() - $1 * interval '1 millisecond'
        ORDER BY dead_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ) DELETE FROM ${jobs} j USING doomed WHERE j.id = doomed.id`,

    /**
     * A rate-limited handler is about to start: its start moves from the provisional stamp the
     * claim gave it (one window ahead, so it counted in every window meanwhile) to now, so a
     * handler delayed on a busy machine counts where it really starts. Only claims read it (under
     * the type's row lock). A start never made (the worker died first) stops counting two
     * windows after its claim.
     */
    markStarted: `UPDATE ${starts} SET started_at = clock_timestamp() WHERE job_id = $1`,

    /** Maintenance: the start log only matters within the longest rate window. */
    pruneStarts: `DELETE FROM ${starts} WHERE started_at < now() - $1 * interval '1 millisecond'`,

    /**
     * Fenced: applies only while this worker still holds the lease token. Notifies an
     * enqueueAndWait caller, if the job has one, when the transaction commits. A job that returned
     * nothing keeps a NULL result, as in completeMany.
     */
    complete: finishing(`
      UPDATE ${jobs}
      SET status = 'completed', completed_at = now(), result = NULLIF($3::jsonb, 'null'::jsonb),
          lease_token = NULL, lease_expires_at = NULL
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
    completeMany: `
      WITH done AS (
        UPDATE ${jobs} j
        SET status = 'completed', completed_at = now(), result = $3::jsonb -> (j.id::text),
            lease_token = NULL, lease_expires_at = NULL
        WHERE ${heldBy('$1', '$2', '$4')}
        RETURNING j.id, j.notify_on_finish
      ), notified AS (
        SELECT pg_notify('auto_job_queue:${schema}', 'finished:' || id) FROM done WHERE notify_on_finish
      )
      SELECT CASE WHEN (SELECT count(*) FROM done) < cardinality($1::bigint[])
                  THEN (SELECT string_agg(i::text, ',') FROM unnest($1::bigint[]) AS i WHERE i NOT IN (SELECT id FROM done))
             END AS missed,
             (SELECT count(*) FROM notified)::int AS notified`,

    /** Fenced like complete; the retry time is computed by the database clock. */
    scheduleRetry: `
      UPDATE ${jobs}
      SET status = 'failed', last_error = $3, errors = errors || ${attemptError('$4::int', '$5::text', '$3::text')},
          run_at = now() + $6 * interval '1 millisecond', retry_after = now() + $6 * interval '1 millisecond',
          lease_token = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_token = $2 AND status = 'processing'`,

    /** Fenced like complete. */
    deadLetter: finishing(`
      UPDATE ${jobs}
      SET status = 'dead', dead_at = now(), last_error = $3,
          errors = errors || ${attemptError('$4::int', '$5::text', '$3::text')},
          retry_after = NULL, lease_token = NULL, lease_expires_at = NULL
      WHERE id = $1 AND lease_token = $2 AND status = 'processing'
      RETURNING id, notify_on_finish`),

    /** Wakes enqueueAndWait callers of jobs the reaper dead-lettered. */
    notifyFinished: `SELECT pg_notify('auto_job_queue:${schema}', 'finished:' || id) FROM unnest($1::bigint[]) AS id`,

    /**
     * Hands jobs back unstarted (a drain, or prefetched jobs that waited too long), undoing the
     * claim's attempt. Fenced per row, so a job already reclaimed by another worker is left alone.
     * run_at is kept: the job goes back to its place in line, not behind what came since. Idle
     * workers are woken in the same statement, so the wake-up is sent if and only if the release
     * commits (the uncorrelated subquery in WHERE runs once, even when nothing was released).
     */
    release: `
      WITH released AS (
        UPDATE ${jobs} j
        SET status = 'pending', attempts = GREATEST(j.attempts - 1, 0), worker_id = NULL, claimed_at = NULL,
            lease_token = NULL, lease_expires_at = NULL
        WHERE ${heldBy('$1', '$2', '$3')}
        RETURNING j.id
      ), notified AS (
        SELECT pg_notify('auto_job_queue:${schema}', 'new') FROM (SELECT 1 FROM released LIMIT 1) AS any_released
      )
      SELECT id::text AS id FROM released WHERE (SELECT count(*) FROM notified) >= 0`,

    /** Wakes idle workers after a dead-letter retry (inserts notify by trigger). */
    notifyNew: `SELECT pg_notify('auto_job_queue:${schema}', 'new')`,

    /**
     * Tells workers in how many ms the earliest of some delayed jobs comes due ($1 the earliest
     * run-at time, $2 the shortest delay, either may be NULL), so they wake then rather than at
     * their next poll. Relative to this statement, so no two clocks are compared: it can only come
     * late (by the wait for the commit that delivers it), never early. In the inserting
     * transaction, it is delivered only if the jobs are committed.
     */
    notifyDue: `
      SELECT pg_notify('auto_job_queue:${schema}', 'due:' || GREATEST(0, ceil(1000 * extract(epoch FROM
               LEAST($1::timestamptz, now() + $2::float8 * interval '1 millisecond') - clock_timestamp())))::bigint)`,

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

    /** Transaction-scoped: released at commit, so a dead leader never blocks the next one. */
    tryMaintenanceLock: `SELECT pg_try_advisory_xact_lock(19025, hashtext('${schema}')) AS acquired`,

    /**
     * Takes back jobs whose worker stopped renewing. SKIP LOCKED plus the status recheck on the
     * locked row make a concurrent renewal or completion win cleanly: such a row is skipped.
     * The lost run counts as an attempt; a job out of attempts is dead-lettered.
     */
    reapExpiredLeases: `
      WITH expired AS MATERIALIZED (
        SELECT id FROM ${jobs}
        WHERE status = 'processing' AND lease_expires_at < now()
        ORDER BY lease_expires_at LIMIT $1
        FOR UPDATE SKIP LOCKED
      ), reaped AS (
        SELECT j.id, 'worker lost: ' || COALESCE(j.worker_id, 'unknown worker') ||
               ' stopped renewing its lease on attempt ' || j.attempts ||
               ' (crashed, killed or stalled, running the job or holding it claimed before it started)' AS reason
        FROM ${jobs} j JOIN expired USING (id)
      )
      UPDATE ${jobs} j
      SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'failed' END,
          dead_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
          retry_after = CASE WHEN j.attempts >= j.max_attempts THEN NULL ELSE now() END,
          run_at = now(), last_error = reaped.reason,
          errors = j.errors || ${attemptError('j.attempts', 'j.worker_id', 'reaped.reason')},
          lease_token = NULL, lease_expires_at = NULL
      FROM reaped WHERE j.id = reaped.id AND j.status = 'processing'
      RETURNING j.id::text AS id, j.type, j.status, j.worker_id, j.notify_on_finish`,

    /** Read of the effect ledger: a committed row means an earlier attempt finished that effect. */
    findEffect: `SELECT result, true AS found FROM "${schema}".job_effects WHERE job_id = $1 AND key = $2`,

    /**
     * Records an effect as done. Not fenced by the lease on purpose: the effect happened, and the
     * next attempt must know it, whoever owns the job now. The first record of a key wins.
     */
    recordEffect: `
      INSERT INTO "${schema}".job_effects (job_id, key, result, attempt) VALUES ($1, $2, $3::jsonb, $4)
      ON CONFLICT (job_id, key) DO NOTHING`,

    getJob: `SELECT ${RECORD_COLUMNS} FROM ${jobs} WHERE id = $1`,

    stats: `SELECT type, status, count(*)::int AS count FROM ${jobs} GROUP BY type, status`,

    listDead: `
      SELECT ${RECORD_COLUMNS} FROM ${jobs}
      WHERE status = 'dead' AND ($1::text IS NULL OR type = $1)
      ORDER BY dead_at DESC, id DESC LIMIT $2`,

    /** Only a row still `dead` moves; two concurrent retries update it once. */
    retryDead: `
      UPDATE ${jobs}
      SET status = 'pending', attempts = 0, run_at = now(), dead_at = NULL, retry_after = NULL,
          worker_id = NULL, claimed_at = NULL, completed_at = NULL
      WHERE id = $1 AND status = 'dead'
      RETURNING ${RECORD_COLUMNS}`,

    /**
     * Locks the row, then cancels it if it has not finished. A running job loses its lease token,
     * so its worker can no longer complete it; the notification lets that worker abort at once.
     */
    cancel: `
      WITH target AS MATERIALIZED (
        SELECT id, status AS previous_status FROM ${jobs} WHERE id = $1 FOR UPDATE
      ), cancelled AS (
        UPDATE ${jobs} j
        SET status = 'cancelled', retry_after = NULL, lease_token = NULL, lease_expires_at = NULL
        FROM target
        WHERE j.id = target.id AND j.status IN ('pending', 'failed', 'processing')
        RETURNING j.id
      ), notified AS (
        SELECT pg_notify('auto_job_queue:${schema}', 'cancel:' || id) FROM cancelled
      )
      SELECT target.previous_status, (SELECT count(*) FROM notified)::int AS notified FROM target`,

    ping: `SELECT 1`,

    /**
     * Read-only health numbers: waiting jobs (counted up to $1, so a huge backlog stays cheap) and
     * dead letters of the last hour, both on partial indexes.
     */
    queueSnapshot: `
      SELECT (SELECT count(*) FROM (SELECT 1 FROM ${jobs} WHERE status IN ('pending', 'failed') LIMIT $1) w)::int AS depth,
             (SELECT count(*) FROM ${jobs} WHERE status = 'dead' AND dead_at > now() - interval '1 hour')::int AS dead_last_hour`,

    /** Waiting jobs of the given types, each counted up to $2. */
    depthByType: `
      SELECT t.type, (SELECT count(*) FROM (SELECT 1 FROM ${jobs} j
                      WHERE j.type = t.type AND j.status IN ('pending', 'failed') LIMIT $2) w)::int AS depth
      FROM unnest($1::text[]) AS t(type)`,
  };
}

export type JobSql = ReturnType<typeof jobSql>;
