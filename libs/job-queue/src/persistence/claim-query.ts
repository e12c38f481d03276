import type { ClaimRequest } from './job.store.js';
import { groupedPick, groupedTurnTaken } from './grouped-pick.js';
import { WAITING_SQL } from './job-status.js';

/**
 * From this size (pages) on, a generic plan of the one-type claim has the shape every larger table
 * gets: claimed rows updated by tuple id (a TID scan's cost, about 40, is below a sequential scan
 * of 64 pages at any row width) and the ordering-key check on its index. Made on a smaller table,
 * the plan may use sequential scans for both, ruinous once the table has grown.
 */
export const LARGE_TABLE_PAGES = 64;

/** The small-table claim's answer when the table has grown too large for it: one row of NULLs. */
export function turnedAway(rows: readonly unknown[][]): boolean {
  return rows.length === 1 && rows[0][0] === null;
}

/**
 * The claim statements and their parameters. The multi-type claims: $1 types, $2 each type's
 * limit, $3 the total limit, $4 worker id, $5 lease ms, $6 each type's max attempts, $7 the
 * claim's lease token, $8 how many of the claimed jobs start at once, and for the flow-control
 * claim $9 rate max, $10 rate window ms, $11 global max, per type. The one-type claim: $1 type,
 * $2 limit, $3 worker id, $4 lease ms, $5 max attempts, $6 lease token, $7 how many start at once.
 *
 * Attempts are charged when a job starts (docs/decisions/0090-attempts-charged-at-start.md): the
 * first jobs in claim order, as many as start at once (the worker's free slots), are charged here;
 * the rest are marked `prefetched`, their attempt charged by the worker's next completion
 * statement once they start (outcome.sql.ts). The two parts are two updates of disjoint rows,
 * each by tuple id, so marking costs the same per row either way.
 *
 * Every job a claim takes gets the claim's own token, a fresh random UUID: a job appears at most
 * once in a claim, so (id, token) names one attempt of one job, which is all fencing needs, and
 * the server generates no UUID per row.
 *
 * Each type's jobs are taken by a LATERAL subquery whose LIMIT comes from the type's row, which
 * the planner cannot see: on its own it would assume a tenth of the backlog gets locked, and on a
 * long backlog that estimate passes `jit_above_cost`, so PostgreSQL would JIT-compile every claim.
 * So the locking query is capped by $3, a parameter each custom plan knows, and the type's own
 * LIMIT sits outside it. Execution pulls rows on demand, so only the rows the outer LIMIT takes
 * are locked. What each of these choices saves: docs/decisions/0041-claim-statement-costs.md.
 *
 * FOR UPDATE SKIP LOCKED means two workers never lock the same row, and the status is rechecked on
 * the locked row version, so a job is claimed once; the MATERIALIZED CTE fences the LIMITs from
 * the planner. A job with an ordering key is claimable only while it is the oldest unfinished job
 * of its key. A job without its own maxAttempts takes the claiming handler's.
 *
 * Without `synchronousClaims`, the claims without flow control commit without waiting for their
 * WAL flush (`synchronous_commit` off for the claim's own transaction; the connection keeps its
 * setting). Every later synchronous commit on the server flushes the WAL up to its own commit
 * record, the claim's included (the job's completion, a `once` record, a transactional handler's
 * commit), so no synchronous commit on this server rests on a claim that is not. A crash can
 * undo a claim of its last moments; its lease token then matches no row, so the worker that took
 * it can neither renew nor complete the job. The flow-control claim always waits: its start records and running count are
 * what keep a type's limits across workers, and must not be undone under a job that runs on.
 */
export class ClaimQuery {
  /** The claim for workers without flow control: each type's free capacity, in priority order. */
  readonly plainText: string;
  /**
   * The claim with flow control: each type's free capacity cut by its circuit (closed: all; open:
   * none; cool-down over: one probe, taken by whichever claim flips the circuit to half-open first,
   * under the row lock), its rate limit (starts in the window, a start not yet made counting as
   * one in every window until it is) and its global concurrency (running
   * jobs); callers hold the type's job_types row lock for the last two (claimLimitedLock), so those
   * counts are exact. It always waits for its WAL flush (see the class comment).
   */
  readonly flowText: string;

  /**
   * The claim of one type whose handler sets `groupConcurrency`: the flow-control claim (the type's
   * limits apply as there) whose jobs are taken in turn across groups (groupedPick). Callers hold
   * the type's job_types row lock (claimGroupedLock, which also turns JIT off), which makes the
   * turn and the groups' running counts exact. Its parameters: flowParams for the one type, then
   * $12 the group cap, $13 how many groups one claim visits, at most, and $14 how far it looks
   * for jobs without a group.
   */
  readonly groupedText: string;

  private readonly oneTypeText: (cap: number, smallTable: boolean) => string;
  private readonly oneTypeByCap = new Map<string, string>();

  constructor(schema: string, synchronousClaims: boolean) {
    const jobs = `"${schema}".jobs`;
    const types = `"${schema}".job_types`;
    const starts = `"${schema}".job_starts`;
    const groupTurns = `"${schema}".job_group_turns`;
    const unfinished = `('pending', 'processing', 'failed')`;
    /**
     * A keyed job is claimable only while it is the oldest unfinished job of its key and no later
     * job of its key is running. The second half matters when enqueues commit out of id order: a
     * job whose transaction commits after a later job of its key was claimed is then the oldest,
     * while that later job runs. Probed per job on the ordering index: the cost follows the jobs
     * the claim looks at, whatever the table holds; the second probe, which walks the key's later
     * unfinished jobs, runs only for a job that passed the first, at most one per key.
     */
    const oldestOfKeyByProbe = `(NOT EXISTS (
                    SELECT 1 FROM ${jobs} e
                    WHERE e.ordering_key = j.ordering_key AND e.id < j.id AND e.status IN ${unfinished})
                AND NOT EXISTS (
                    SELECT 1 FROM ${jobs} r
                    WHERE r.ordering_key = j.ordering_key AND r.id > j.id AND r.status = 'processing'))`;
    /**
     * The same rule as one set, each key's oldest unfinished job where none of the key runs, built
     * once per claim (a hashed subplan), and only if the claim meets a keyed job of its own type
     * (CASE evaluates in order, whatever order the plan checks the other conditions in). For the
     * small-table claim: its plan may be made on an empty table, where the probes above can become
     * sequential scans for every keyed job looked at; this costs one pass over a small table.
     */
    const oldestOfKeyAsSet = (type: string) => `CASE WHEN j.type = ${type} THEN j.id IN (
                    SELECT min(e.id) FROM ${jobs} e
                    WHERE e.ordering_key IS NOT NULL AND e.status IN ${unfinished}
                    GROUP BY e.ordering_key
                    HAVING bool_and(e.status <> 'processing')) END`;
    /**
     * Waiting, due jobs of the type in priority then run-time order, at most `allowance`; each as
     * the tuple id (ctid) of the row version it locked.
     */
    const lockClaimable = (type: string, cap: string, allowance: string, oldestOfKey = oldestOfKeyByProbe) => `
          SELECT capped.* FROM (
            SELECT j.ctid, j.id, j.priority, j.run_at FROM ${jobs} j
            WHERE j.type = ${type} AND j.status IN ${WAITING_SQL} AND j.run_at <= now()
              AND (j.ordering_key IS NULL OR ${oldestOfKey})
            ORDER BY j.priority DESC, j.run_at, j.id
            LIMIT ${cap}
            FOR UPDATE SKIP LOCKED
          ) capped
          LIMIT ${allowance}`;
    const pickClaimable = (source: string, allowance: string) => `
        SELECT c.ctid, row_number() OVER (ORDER BY c.priority DESC, c.run_at, c.id) AS n FROM ${source}
        CROSS JOIN LATERAL (${lockClaimable('w.type', '$3', allowance)}
        ) c
        ORDER BY c.priority DESC, c.run_at, c.id
        LIMIT $3`;
    /**
     * Takes the picked jobs: fresh lease token, and either the attempt counted (`charge`: it starts
     * at once) or the job marked prefetched, its attempt counted when it starts. The rows are fetched by the tuple
     * ids the lock returned (a TID scan: no index descent per row).
     * That is safe because a locked version cannot change or move before this statement ends. In
     * one rare case the update skips a row: someone else updated the row between this statement's
     * snapshot and the lock, and the row is still claimable. The lock then returns the newer
     * version, which this statement's snapshot cannot see. Such a job is simply not claimed: it
     * stays waiting and unlocked after commit, for the next claim.
     */
    const markClaimed = (charge: boolean, worker: string, leaseMs: string, maxAttempts: string, token: string, from: string) => `
        UPDATE ${jobs} j
        SET status = 'processing', ${charge ? 'attempts = j.attempts + 1, prefetched = false' : 'prefetched = true'},
            claimed_at = now(), worker_id = ${worker},
            max_attempts = CASE WHEN j.max_attempts_from_job THEN j.max_attempts ELSE ${maxAttempts} END,
            lease_token = ${token}::uuid, lease_expires_at = now() + ${leaseMs} * interval '1 millisecond',
            retry_after = NULL
        ${from}
        RETURNING j.id, j.type, j.payload, j.attempts, j.max_attempts, j.idempotency_key, j.priority, j.run_at, j.prefetched, j.lease_expiries,
                  j.trace_context`;
    /**
     * Both parts of a claim: the first `startNow` picked jobs charged, the others prefetched. The
     * two updates take disjoint rows (no row is updated twice in one statement).
     */
    const claimedParts = (startNow: string, mark: (charge: boolean, rows: string) => string) => `charged AS (
        ${mark(true, `ARRAY(SELECT ctid FROM picked WHERE n <= ${startNow})`)}
      ), buffered AS (
        ${mark(false, `ARRAY(SELECT ctid FROM picked WHERE n > ${startNow})`)}
      ), claimed AS (
        SELECT * FROM charged UNION ALL SELECT * FROM buffered
      )`;
    const manyClaimed = claimedParts('$8', (charge, rows) =>
      markClaimed(charge, '$4', '$5', 'w.max_attempts', '$7', `FROM wanted w WHERE j.ctid = ANY (${rows}) AND w.type = j.type`),
    );
    /**
     * An uncorrelated subquery runs once, as an InitPlan, whether the claim takes any job or not;
     * the setting lasts until the claim's transaction ends (see the class comment).
     */
    const commitMode = synchronousClaims ? '' : `WHERE (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL`;
    /**
     * Claimed rows in claim order; the store reads the columns by position, in this order. The
     * lease token is the claim's own parameter, the same for every row: the store fills it in
     * rather than have it formatted, sent and parsed once per row. So does the type, in the
     * one-type claims (`type` NULL): it is the claim's parameter too.
     */
    const claimedInOrder = (type: string, commit: string) => `
      SELECT id::text AS id, ${type} AS type, payload, attempts + prefetched::int AS attempt, max_attempts AS "maxAttempts",
             idempotency_key AS "idempotencyKey", prefetched, lease_expiries, (extract(epoch FROM run_at) * 1000)::float8 AS due_at,
             trace_context
      FROM claimed ${commit}
      ORDER BY priority DESC, run_at, claimed.id`;
    const oneTypeClaimedInOrder = claimedInOrder('NULL::text', commitMode);

    this.plainText = `
      WITH wanted AS (
        SELECT * FROM unnest($1::text[], $2::int[], $6::int[]) AS w(type, n, max_attempts)
      ), picked AS MATERIALIZED (
        ${pickClaimable('wanted w', 'w.n')}
      ), ${manyClaimed}
      ${claimedInOrder('type', commitMode)}`;

    /**
     * The small-table form claims nothing once the table has LARGE_TABLE_PAGES pages or more: its
     * kept plan may have been made on a few pages, with sequential scans, and must never run on a
     * large table. Its LIMIT becomes 0 (the locking scan then never starts), the update runs only
     * if something was locked (a one-time filter: the scan under it never starts either), and it
     * returns one row of NULLs instead (see turnedAway), so the caller knows to claim in the
     * large form.
     */
    /**
     * The one-type claim's locked rows numbered in the order they come in, which is claim order
     * (the index scan's, through limits alone). Naming the order instead would add a sort of every
     * claimed row. Were the numbering ever off, only which jobs are charged at claim rather than as
     * they start would change, not whether a started job is charged.
     */
    const numbered = (locked: string) => `
          SELECT l.ctid, row_number() OVER () AS n FROM (${locked}
          ) l`;
    this.oneTypeText = (cap, smallTable) => {
      if (!smallTable) {
        return `
      WITH picked AS MATERIALIZED (${numbered(lockClaimable('$1', String(cap), '$2'))}
      ), ${claimedParts('$7', (charge, rows) => markClaimed(charge, '$3', '$4', '$5', '$6', `WHERE j.ctid = ANY (${rows})`))}
      ${oneTypeClaimedInOrder}`;
      }
      return `
      WITH guard AS MATERIALIZED (
        SELECT pg_relation_size('${jobs}') < ${LARGE_TABLE_PAGES} * current_setting('block_size')::bigint AS small
      ), picked AS MATERIALIZED (${numbered(lockClaimable('$1', String(cap), '(SELECT CASE WHEN small THEN $2 ELSE 0 END FROM guard)', oldestOfKeyAsSet('$1')))}
      ), ${claimedParts('$7', (charge, rows) =>
        markClaimed(charge, '$3', '$4', '$5', '$6', `WHERE EXISTS (SELECT 1 FROM picked) AND j.ctid = ANY (${rows})`),
      )}
      (${oneTypeClaimedInOrder})
      UNION ALL
      SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM guard WHERE NOT small`;
    };

    const flowStatement = (picked: string, more = '') => `
      WITH wanted AS (
        SELECT * FROM unnest($1::text[], $2::int[], $6::int[], $9::int[], $10::int[], $11::int[])
                 AS w(type, n, max_attempts, rate_max, rate_window_ms, global_max)
      ), probes AS (
        UPDATE ${types} t
        SET circuit_state = 'half-open', reopen_at = now() + t.cooldown_ms * interval '1 millisecond'
        WHERE t.type IN (SELECT type FROM wanted) AND t.circuit_state <> 'closed' AND t.reopen_at <= now()
        RETURNING t.type
      ), allowed AS (
        SELECT w.type, LEAST(
          w.n,
          CASE WHEN p.type IS NOT NULL THEN 1 WHEN t.circuit_state IS NULL OR t.circuit_state = 'closed' THEN w.n ELSE 0 END,
          CASE WHEN w.rate_max IS NULL THEN w.n
               ELSE w.rate_max - (SELECT count(*) FROM ${starts} s
                                  WHERE s.type = w.type AND s.started_at > clock_timestamp() - w.rate_window_ms * interval '1 millisecond')::int
          END,
          CASE WHEN w.global_max IS NULL THEN w.n
               ELSE w.global_max - (SELECT count(*) FROM ${jobs} r WHERE r.type = w.type AND r.status = 'processing')::int
          END) AS n
        FROM wanted w
        LEFT JOIN ${types} t ON t.type = w.type
        LEFT JOIN probes p ON p.type = w.type
      ), ${picked}, ${manyClaimed}, started AS (
        -- Stamped one window ahead until the handler really starts (markStarted sets the real
        -- time): a claim that counts before that update still sees this start in its window, so
        -- a start delayed on a busy machine cannot slip past the limit.
        INSERT INTO ${starts} (type, job_id, started_at)
        SELECT claimed.type, claimed.id, clock_timestamp() + w.rate_window_ms * interval '1 millisecond'
        FROM claimed JOIN wanted w ON w.type = claimed.type
        WHERE w.rate_max IS NOT NULL
      )${more}
      ${claimedInOrder('type', '')}`;

    this.flowText = flowStatement(`picked AS MATERIALIZED (
        ${pickClaimable('allowed w', 'GREATEST(w.n, 0)')}
      )`);

    this.groupedText = flowStatement(groupedPick(jobs, groupTurns, oldestOfKeyByProbe), groupedTurnTaken(groupTurns));
  }

  /**
   * The claim for one type without flow control, its locking query capped by the literal `cap`
   * (a power of 4, at least the claim's limit) rather than a parameter. Its estimates then depend
   * on no parameter's value, so PostgreSQL keeps one generic plan for a named statement instead of
   * planning every claim anew; the cap bounds that plan's cost, so it never crosses
   * `jit_above_cost` however large the backlog. Use the `smallTable` form while the table has
   * fewer than LARGE_TABLE_PAGES pages: once the table is larger it claims nothing and returns the
   * single row `turnedAway` tests for.
   */
  oneType(cap: number, smallTable: boolean): string {
    const key = `${cap}:${smallTable}`;
    let text = this.oneTypeByCap.get(key);
    if (text === undefined) {
      text = this.oneTypeText(cap, smallTable);
      this.oneTypeByCap.set(key, text);
    }
    return text;
  }

  oneTypeParams(request: ClaimRequest, leaseToken: string): unknown[] {
    const [only] = request.perType;
    return [only.type, Math.min(only.limit, request.limit), request.workerId, request.leaseMs, only.maxAttempts, leaseToken, startNow(request)];
  }

  /** `leaseToken`: the claim's token, a fresh random UUID (see the class comment). */
  plainParams(request: ClaimRequest, leaseToken: string): unknown[] {
    return [
      request.perType.map((t) => t.type),
      request.perType.map((t) => t.limit),
      request.limit,
      request.workerId,
      request.leaseMs,
      request.perType.map((t) => t.maxAttempts),
      leaseToken,
      startNow(request),
    ];
  }

  /** The grouped claim's parameters, for `request`'s one type (see groupedText). */
  groupedParams(request: ClaimRequest, leaseToken: string): unknown[] {
    const [only] = request.perType;
    const limit = Math.min(only.limit, request.limit);
    return [
      ...this.flowParams(request, leaseToken),
      only.groupMax ?? null,
      Math.min(Math.max(limit, MIN_GROUPS_VISITED), MAX_GROUPS_VISITED),
      Math.min(Math.max(4 * limit, MIN_GROUPS_VISITED * 8), MAX_UNGROUPED_LOOKAHEAD),
    ];
  }

  flowParams(request: ClaimRequest, leaseToken: string): unknown[] {
    return [
      ...this.plainParams(request, leaseToken),
      request.perType.map((t) => t.rateMax ?? null),
      request.perType.map((t) => t.rateWindowMs ?? null),
      request.perType.map((t) => t.globalMax ?? null),
    ];
  }
}

/**
 * A grouped claim visits as many groups as it may take jobs, within these bounds: a small claim
 * still looks a few groups ahead (some may be full), and a large one reads no more than this many
 * groups' running counts.
 */
const MIN_GROUPS_VISITED = 8;
const MAX_GROUPS_VISITED = 128;
/** How many of a grouped type's first waiting jobs a claim looks through for jobs without a group. */
const MAX_UNGROUPED_LOOKAHEAD = 1_024;

/** How many of the claimed jobs start at once (charged by the claim); all of them when the request does not say. */
function startNow(request: ClaimRequest): number {
  return request.startNow ?? request.limit;
}
