import type { JobTables } from './job-tables.js';

/** The statements that add jobs. */
export function enqueueSql({ schema, jobs, channel }: JobTables) {
  return {
    /**
     * Inserts a batch in one round trip; ids come from the sequence first, in input order, so each
     * input maps to its row. Concurrent enqueues of one idempotency key meet in the unique index:
     * ON CONFLICT waits for the other transaction and then skips, so exactly one row is written.
     * Rows go in sorted by key, so two batches holding the same keys in different orders wait for
     * each other in one order and cannot deadlock.
     */
    enqueue: `
      WITH input AS MATERIALIZED (
        SELECT nextval('"${schema}".jobs_id_seq') AS id, i.*
        FROM unnest($1::text[], $2::jsonb[], $3::int[], $4::int[], $5::timestamptz[], $6::float8[], $7::text[], $8::bool[], $9::bool[], $10::text[],
                    $11::text[], $12::text[])
             WITH ORDINALITY AS i(type, payload, priority, max_attempts, run_at, delay_ms, idempotency_key, max_attempts_from_job,
                                  notify_on_finish, ordering_key, trace_context, group_key, ord)
      ), inserted AS (
        INSERT INTO ${jobs} (id, type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key,
                             run_at, idempotency_key, trace_context, group_key)
        SELECT id, type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key,
               COALESCE(run_at, now() + delay_ms * interval '1 millisecond'), idempotency_key, trace_context, group_key
        FROM input ORDER BY type, idempotency_key, ord
        ON CONFLICT (type, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id
      )
      SELECT input.ord::int AS ord, input.id::text AS id, (inserted.id IS NOT NULL) AS inserted
      FROM input LEFT JOIN inserted USING (id) ORDER BY input.ord`,

    /**
     * Inserts a batch without idempotency keys in one round trip: nothing can conflict, so it is a
     * plain INSERT. The batch is one JSON array ($1: t type, p payload, m max attempts, and only
     * when not the default: pr priority, mj max attempts from the job, n notify on finish,
     * o ordering key, r run at, d delay ms, tc trace context, g group), so payloads travel as they are, with no array-literal
     * escaping. Rows go in in input order and take their ids from the sequence as they do, so
     * the ids, sorted, map back to the inputs in order; they come back as one comma-separated
     * string, not a row each.
     */
    enqueuePlain: `
      WITH inserted AS (
        INSERT INTO ${jobs} (type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key, run_at, trace_context,
                             group_key)
        SELECT e->>'t', e->'p', COALESCE((e->>'pr')::int, 0), (e->>'m')::int, COALESCE((e->>'mj')::bool, false),
               COALESCE((e->>'n')::bool, false), e->>'o',
               COALESCE((e->>'r')::timestamptz, now() + COALESCE((e->>'d')::float8, 0) * interval '1 millisecond'), e->>'tc', e->>'g'
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
      INSERT INTO ${jobs} (type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key, run_at, trace_context,
                           group_key)
      VALUES ($1::text, $2::jsonb, $3::int, $4::int, $5::bool, $6::bool, $7::text,
              COALESCE($8::timestamptz, now() + $9::float8 * interval '1 millisecond'), $10::text, $11::text)
      RETURNING id::text AS id`,

    /**
     * A batch without idempotency keys whose jobs differ only in their payloads (the usual bulk
     * enqueue): the payloads travel as one JSON array ($1), every other column once, so the server
     * unpacks no per-row fields. Plain INSERT, nothing can conflict; ids map back to inputs as in
     * enqueuePlain (input order, sequence order).
     */
    enqueueUniform: `
      WITH inserted AS (
        INSERT INTO ${jobs} (type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key, run_at, trace_context,
                             group_key)
        SELECT $2::text, e, $3::int, $4::int, $5::bool, $6::bool, $7::text,
               COALESCE($8::timestamptz, now() + $9::float8 * interval '1 millisecond'), $10::text, $11::text
        FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS i(e, ord)
        ORDER BY ord
        RETURNING id
      )
      SELECT string_agg(id::text, ',' ORDER BY id) AS ids FROM inserted`,

    /**
     * One debounced job: a job of the type and key still waiting to start (`pending`) takes the
     * new payload, priority, attempts and trace context, and its start moves to $8 ms from now;
     * otherwise (none, or the one there has started: it may not see the new data) a new job is
     * inserted, due then. Concurrent enqueues of one key meet in the partial unique index
     * (ON CONFLICT waits for the other transaction): at most one waiting job per key. A claim that
     * takes the row meanwhile moves it out of the index, so the conflict is gone and a new job is
     * inserted. `xmax` is set only on a row this statement updated.
     */
    enqueueDebounced: `
      INSERT INTO ${jobs} AS j (type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key, run_at,
                               trace_context, debounce_key, group_key)
      VALUES ($1::text, $2::jsonb, $3::int, $4::int, $5::bool, $6::bool, $7::text, now() + $8::float8 * interval '1 millisecond',
              $9::text, $10::text, $11::text)
      ON CONFLICT (type, debounce_key) WHERE debounce_key IS NOT NULL AND status = 'pending'
      DO UPDATE SET payload = EXCLUDED.payload, priority = EXCLUDED.priority, run_at = EXCLUDED.run_at,
                    max_attempts = EXCLUDED.max_attempts, max_attempts_from_job = EXCLUDED.max_attempts_from_job,
                    notify_on_finish = j.notify_on_finish OR EXCLUDED.notify_on_finish, trace_context = EXCLUDED.trace_context,
                    group_key = EXCLUDED.group_key
      RETURNING id::text AS id, (xmax <> 0) AS debounced`,

    /**
     * Frees idempotency keys whose `uniqueForMs` window is over ($1 types, $2 keys, $3 windows in
     * ms): the row keeps the key in expired_idempotency_key and leaves the unique index, so the
     * enqueue that follows makes a new job. Two enqueues at once: the row lock orders them; the
     * second finds the key already moved and changes nothing, and its insert meets the first's
     * new row in the unique index (one new job).
     */
    expireIdempotencyKeys: `
      UPDATE ${jobs} j SET expired_idempotency_key = j.idempotency_key, idempotency_key = NULL
      FROM unnest($1::text[], $2::text[], $3::float8[]) AS k(type, key, window_ms)
      WHERE j.type = k.type AND j.idempotency_key = k.key AND j.created_at <= now() - k.window_ms * interval '1 millisecond'`,

    /** Read-only lookup of the rows that won an idempotency conflict (committed, so visible). */
    findByIdempotencyKeys: `
      SELECT j.id::text AS id, j.type, j.idempotency_key
      FROM ${jobs} j JOIN unnest($1::text[], $2::text[]) AS k(type, key)
        ON j.type = k.type AND j.idempotency_key = k.key`,

    /**
     * Tells workers in how many ms the earliest of some delayed jobs comes due ($1 the earliest
     * run-at time, $2 the shortest delay, either may be NULL), so they wake then rather than at
     * their next poll. Relative to this statement, so no two clocks are compared: it can only come
     * late (by the wait for the commit that delivers it), never early. In the inserting
     * transaction, it is delivered only if the jobs are committed. It writes nothing.
     */
    notifyDue: `
      SELECT pg_notify('${channel}', 'due:' || GREATEST(0, ceil(1000 * extract(epoch FROM
               LEAST($1::timestamptz, now() + $2::float8 * interval '1 millisecond') - clock_timestamp())))::bigint)`,
  };
}

export type EnqueueSql = ReturnType<typeof enqueueSql>;
