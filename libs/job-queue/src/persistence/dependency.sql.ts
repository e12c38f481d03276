import type { JobTables } from './job-tables.js';

/**
 * A CTE that deletes the edges of the jobs a sibling CTE `deleted` (id, had_dependencies) deleted:
 * only those that depended on others have any. The job_id index finds them.
 */
export const edgesOfDeleted = (dependencies: string) => `edges_gone AS (
        DELETE FROM ${dependencies} d USING deleted WHERE deleted.had_dependencies AND d.job_id = deleted.id
      )`;

/** Jobs that wait for others (`dependsOn`): the enqueue that builds the edges, and their reads. */
export function dependencySql({ schema, jobs, dependencies }: JobTables) {
  return {
    /**
     * Marks the jobs depended on ($1 ids) as having dependants and returns each one's status then,
     * or a NULL status for an id that names no job (nothing is marked if one is missing). Their
     * rows are locked in id order (two enqueues depending on the same jobs wait in one order) until
     * the enqueue commits: a job that finishes meanwhile waits for that commit, and its finishing
     * trigger then sees the new edges; one that finished first is seen here as finished (a locking
     * read returns the row's latest version), so its edge is written settled.
     */
    lockDependencies: `
      WITH wanted AS (SELECT DISTINCT unnest($1::bigint[]) AS id),
      locked AS MATERIALIZED (
        SELECT j.id FROM ${jobs} j WHERE j.id IN (SELECT id FROM wanted) ORDER BY j.id FOR NO KEY UPDATE
      ), marked AS (
        UPDATE ${jobs} j SET has_dependants = true
        FROM locked
        WHERE j.id = locked.id AND (SELECT count(*) FROM locked) = (SELECT count(*) FROM wanted)
        RETURNING j.id, j.type, j.status
      )
      SELECT w.id::text AS id, (l.id IS NOT NULL) AS found, m.type, m.status
      FROM wanted w LEFT JOIN locked l ON l.id = w.id LEFT JOIN marked m ON m.id = w.id`,

    /**
     * Inserts jobs with their starting status (blocked, pending, or cancelled when a dependency
     * had already failed) and, for the rows inserted, their edges ($16 the input's ordinal, $17
     * the job depended on, $18 whether it had already finished); $19 the groups. Idempotency keys behave as in
     * enqueue: a conflict waits for the other transaction and skips the row, and its edges.
     */
    enqueueDependent: `
      WITH input AS MATERIALIZED (
        SELECT nextval('"${schema}".jobs_id_seq') AS id, i.*
        FROM unnest($1::text[], $2::jsonb[], $3::int[], $4::int[], $5::timestamptz[], $6::float8[], $7::text[], $8::bool[], $9::bool[], $10::text[],
                    $11::text[], $12::text[], $13::int[], $14::text[], $15::text[], $19::text[])
             WITH ORDINALITY AS i(type, payload, priority, max_attempts, run_at, delay_ms, idempotency_key, max_attempts_from_job,
                                  notify_on_finish, ordering_key, trace_context, status, dependencies_left, on_dependency_failure,
                                  last_error, group_key, ord)
      ), inserted AS (
        INSERT INTO ${jobs} (id, type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key,
                             run_at, idempotency_key, trace_context, status, dependencies_left, on_dependency_failure, last_error,
                             group_key)
        SELECT id, type, payload, priority, max_attempts, max_attempts_from_job, notify_on_finish, ordering_key,
               COALESCE(run_at, now() + delay_ms * interval '1 millisecond'), idempotency_key, trace_context,
               status, dependencies_left, on_dependency_failure, last_error, group_key
        FROM input ORDER BY type, idempotency_key, ord
        ON CONFLICT (type, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id
      ), edges AS (
        INSERT INTO ${dependencies} (job_id, depends_on, settled)
        SELECT input.id, e.depends_on, e.settled
        FROM unnest($16::int[], $17::bigint[], $18::bool[]) AS e(ord, depends_on, settled)
        JOIN input ON input.ord = e.ord
        WHERE input.id IN (SELECT id FROM inserted)
      )
      SELECT input.ord::int AS ord, input.id::text AS id, (inserted.id IS NOT NULL) AS inserted
      FROM input LEFT JOIN inserted USING (id) ORDER BY input.ord`,

    /**
     * Read-only: the jobs one job depends on, with their results, in id order. A job depended on
     * that retention or a purge has deleted is no longer listed.
     */
    listDependencies: `
      SELECT p.id::text AS id, p.type, p.status, p.result
      FROM ${dependencies} d JOIN ${jobs} p ON p.id = d.depends_on
      WHERE d.job_id = $1 ORDER BY p.id`,
  };
}

export type DependencySql = ReturnType<typeof dependencySql>;
