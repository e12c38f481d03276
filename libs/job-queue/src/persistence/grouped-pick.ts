import { WAITING_SQL } from './job-status.js';

/**
 * The `picked` part of the grouped claim (ClaimQuery.groupedText): which waiting jobs of the one
 * type in `allowed` a claim takes, in turn across their groups. Parameters: $1[1] the type,
 * $12 the group cap (NULL: none), $13 the most groups one claim visits, $14 how many of the
 * type's first waiting jobs it looks through for jobs without a group.
 *
 * - **Turns.** The groups with waiting jobs are visited in key order, starting after the group
 *   that had the last turn (job_group_turns) and wrapping round, with one turn for the jobs
 *   without a group where the order wraps. Each step to the next group is one descent of
 *   jobs_group_claim_idx (a skip scan), so a group's backlog is never read past: 100,000 jobs in
 *   one group cost the claim what one does.
 * - **Shares.** The claim's allowance is shared evenly among the visited groups with room, and
 *   jobs are taken rank by rank: every visited group's first job before any group's second (up to
 *   twice its share is read from each group, so groups with fewer jobs leave the rest enough). A
 *   group's room is `groupConcurrency` less its running jobs (prefetched ones count: they will
 *   run); the jobs without a group have no cap.
 * - **Jobs without a group** (enqueued before the handler set `groupConcurrency`, or by
 *   mistake) are found among the type's first $14 waiting jobs in the usual claim order: the
 *   main claim index holds every waiting job, so looking further could mean reading a whole
 *   grouped backlog at every claim. They are the oldest there, so they come within reach as the
 *   jobs ahead of them start.
 *
 * The chosen rows are read without locks, then locked with SKIP LOCKED, their status, due time
 * and group rechecked on the locked version: a job changed meanwhile (cancelled, debounced into
 * another group, claimed by a worker that does not group the type) is simply not taken by this
 * claim. Claims of the type run one at a time under its row lock, so no two of them choose the
 * same job, and each sees the running counts its predecessors committed.
 */
export function groupedPick(jobs: string, groupTurns: string, oldestOfKey: string): string {
  const waitingGrouped = `j.type = $1[1] AND j.status IN ${WAITING_SQL} AND j.group_key IS NOT NULL`;
  /** The groups with waiting jobs, in key order, from the first above `above` (up to `upTo`, if given), at most $13. */
  const groupsAfter = (name: string, above: string, upTo?: string) => {
    const bound = upTo === undefined ? '' : ` AND j.group_key <= ${upTo}`;
    return `(WITH RECURSIVE ${name}(grp) AS (
            (SELECT j.group_key FROM ${jobs} j WHERE ${waitingGrouped} AND j.group_key > ${above}${bound}
             ORDER BY j.group_key LIMIT 1)
            UNION ALL
            SELECT (SELECT j.group_key FROM ${jobs} j WHERE ${waitingGrouped} AND j.group_key > g.grp${bound}
                    ORDER BY j.group_key LIMIT 1)
            FROM ${name} g WHERE g.grp IS NOT NULL
          ) SELECT grp FROM ${name} WHERE grp IS NOT NULL LIMIT $13)`;
  };
  // Twice its share from each group: a group with fewer jobs due than its share leaves the others
  // enough to fill the claim (a claim that comes back short makes the worker wait for its poll).
  const share = `GREATEST(LEAST(r.room, 2 * r.share), 0)`;
  return `turn AS (
        SELECT COALESCE((SELECT t.last_group FROM ${groupTurns} t WHERE t.type = $1[1]), '') AS last_group
      ), ungrouped AS MATERIALIZED (
        -- The claimable jobs without a group among the type's first $14 waiting, due jobs, read
        -- once: they decide whether the ungrouped turn is visited, and are its candidates.
        SELECT u.id, u.priority, u.run_at FROM (
          SELECT j.id, j.priority, j.run_at, j.group_key FROM ${jobs} j
          WHERE j.type = $1[1] AND j.status IN ${WAITING_SQL} AND j.run_at <= now()
            AND (j.ordering_key IS NULL OR ${oldestOfKey})
          ORDER BY j.priority DESC, j.run_at, j.id
          LIMIT $14
        ) u
        WHERE u.group_key IS NULL
      ), visited AS MATERIALIZED (
        -- Numbered in the order the branches produce them: groups after the last turn, the turn of
        -- the jobs without a group (if some are within reach), then the groups up to and including
        -- the last turn's.
        SELECT v.grp, row_number() OVER () AS p FROM (
          ${groupsAfter('later', '(SELECT last_group FROM turn)')}
          UNION ALL SELECT NULL::text WHERE EXISTS (SELECT 1 FROM ungrouped)
          UNION ALL ${groupsAfter('earlier', "''", '(SELECT last_group FROM turn)')}
        ) v
        LIMIT $13
      ), rooms AS MATERIALIZED (
        SELECT v.grp, v.p, a.n,
               CASE WHEN v.grp IS NULL OR $12::int IS NULL THEN a.n
                    ELSE LEAST(a.n, $12::int - (SELECT count(*) FROM ${jobs} r
                                                WHERE r.type = a.type AND r.group_key = v.grp AND r.status = 'processing')::int)
               END AS room
        FROM visited v CROSS JOIN allowed a
      ), shares AS MATERIALIZED (
        SELECT r.*, ceil(r.n::numeric / GREATEST(1, count(*) FILTER (WHERE r.room > 0) OVER ()))::int AS share FROM rooms r
      ), candidates AS MATERIALIZED (
        SELECT c.id, r.grp, r.p, row_number() OVER (PARTITION BY r.p ORDER BY c.priority DESC, c.run_at, c.id) AS rank
        FROM shares r CROSS JOIN LATERAL (
          (SELECT j.id, j.priority, j.run_at FROM ${jobs} j
           WHERE r.grp IS NOT NULL AND ${waitingGrouped} AND j.group_key = r.grp AND j.run_at <= now()
             AND (j.ordering_key IS NULL OR ${oldestOfKey})
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ${share})
          UNION ALL
          (SELECT u.id, u.priority, u.run_at FROM ungrouped u
           WHERE r.grp IS NULL
           ORDER BY u.priority DESC, u.run_at, u.id
           LIMIT ${share})
        ) c
      ), chosen AS MATERIALIZED (
        SELECT c.* FROM candidates c ORDER BY c.rank, c.p LIMIT (SELECT LEAST(GREATEST(n, 0), $3::int) FROM allowed)
      ), picked AS MATERIALIZED (
        SELECT l.ctid, row_number() OVER (ORDER BY l.rank, l.p) AS n, l.p FROM (
          SELECT j.ctid, ch.rank, ch.p FROM ${jobs} j JOIN chosen ch ON ch.id = j.id
          WHERE j.status IN ${WAITING_SQL} AND j.run_at <= now() AND j.group_key IS NOT DISTINCT FROM ch.grp
          FOR UPDATE OF j SKIP LOCKED
        ) l
      )`;
}

/**
 * After the grouped claim: the turn moves to the last group that got a job, or, when none did
 * though the type could take jobs (every visited group full or not due), to the last group
 * visited, so the next claim looks further on. The jobs without a group are recorded as '' (no
 * group has that key: `group` must be non-empty), which puts the next turn at the first group.
 * Written only when it changes; the type's row lock serialises it with the next claim.
 */
export function groupedTurnTaken(groupTurns: string): string {
  return `, turned AS (
        INSERT INTO ${groupTurns} (type, last_group)
        SELECT $1[1], COALESCE(v.grp, '') FROM visited v
        WHERE (SELECT n FROM allowed) > 0
          AND v.p = COALESCE((SELECT max(p) FROM picked), (SELECT max(p) FROM visited))
          AND COALESCE(v.grp, '') <> (SELECT last_group FROM turn)
        ON CONFLICT (type) DO UPDATE SET last_group = EXCLUDED.last_group
      )`;
}
