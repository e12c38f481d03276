import type { ClaimRequest } from './job.store.js';

/** Parameters of each wanted type, in order, after the three shared ones. */
const PLAIN_PER_TYPE = 3;
const FLOW_PER_TYPE = 6;

/**
 * The claim statements, written out for the number of types a claim asks for. Each type gets its
 * own locking subquery whose LIMIT is a parameter ($1 total, $2 worker id, $3 lease ms, then per
 * type: type, limit, max attempts[, rate max, rate window ms, global max]).
 *
 * Why not one statement with a LATERAL join over the types: a LIMIT taken from a joined row is
 * unknown to the planner, which then assumes a tenth of the backlog will be locked. On a backlog of
 * about 100,000 jobs of a type, that estimate crosses `jit_above_cost`, and PostgreSQL spends half
 * a second compiling every claim. With a parameter, each custom plan sees the real limit, so the
 * plan stays small however long the queue gets.
 *
 * FOR UPDATE SKIP LOCKED means two workers never lock the same row, and the status is rechecked on
 * the locked row version, so a job is claimed once; the MATERIALIZED CTEs fence each LIMIT from the
 * planner. A job with an ordering key is claimable only while it is the oldest unfinished job of its
 * key. A job without its own maxAttempts takes the claiming handler's.
 */
export class ClaimQuery {
  private readonly plain = new Map<number, string>();
  private readonly flow = new Map<number, string>();
  private readonly jobs: string;
  private readonly types: string;
  private readonly starts: string;

  constructor(schema: string) {
    this.jobs = `"${schema}".jobs`;
    this.types = `"${schema}".job_types`;
    this.starts = `"${schema}".job_starts`;
  }

  /** The claim for workers without flow control: each type's free capacity, in priority order. */
  plainText(typeCount: number): string {
    return cached(this.plain, typeCount, () => this.buildPlain(typeCount));
  }

  /**
   * The claim with flow control: each type's free capacity cut by its circuit (closed: all; open:
   * none; cool-down over: one probe, taken by whichever claim flips the circuit to half-open first,
   * under the row lock), its rate limit (starts in the window) and its global concurrency (running
   * jobs); callers hold the type's job_types row lock for the last two (claimLimitedLock), so those
   * counts are exact. A type with no allowance locks nothing; one with part of its free capacity
   * allowed locks up to its free capacity and keeps the allowed first ones (the rest are unlocked
   * when the statement commits).
   */
  flowText(typeCount: number): string {
    return cached(this.flow, typeCount, () => this.buildFlow(typeCount));
  }

  plainParams(request: ClaimRequest): unknown[] {
    const params: unknown[] = [request.limit, request.workerId, request.leaseMs];
    for (const t of request.perType) params.push(t.type, t.limit, t.maxAttempts);
    return params;
  }

  flowParams(request: ClaimRequest): unknown[] {
    const params: unknown[] = [request.limit, request.workerId, request.leaseMs];
    for (const t of request.perType) {
      params.push(t.type, t.limit, t.maxAttempts, t.rateMax ?? null, t.rateWindowMs ?? null, t.globalMax ?? null);
    }
    return params;
  }

  private buildPlain(typeCount: number): string {
    const param = (type: number, column: number) => `$${4 + type * PLAIN_PER_TYPE + column}`;
    const wanted = range(typeCount)
      .map((i) => `(${param(i, 0)}::text, ${param(i, 1)}::int, ${param(i, 2)}::int)`)
      .join(', ');
    const perType = range(typeCount)
      .map((i) => `t${i} AS MATERIALIZED (${this.claimableOfType(param(i, 0), param(i, 1), '')})`)
      .join(',\n      ');
    return `
      WITH wanted (type, n, max_attempts) AS (VALUES ${wanted}),
      ${perType},
      picked AS MATERIALIZED (
        SELECT c.id FROM (${unionOf(typeCount)}) c
        ORDER BY c.priority DESC, c.run_at, c.id
        LIMIT $1
      ), claimed AS (
        ${this.markClaimed()}
      )
      ${CLAIMED_IN_ORDER}`;
  }

  private buildFlow(typeCount: number): string {
    const param = (type: number, column: number) => `$${4 + type * FLOW_PER_TYPE + column}`;
    const wanted = range(typeCount)
      .map(
        (i) =>
          `(${param(i, 0)}::text, ${param(i, 1)}::int, ${param(i, 2)}::int, ${param(i, 3)}::int, ${param(i, 4)}::int, ${param(i, 5)}::int)`,
      )
      .join(', ');
    const perType = range(typeCount)
      .map((i) => {
        // Evaluated once (an InitPlan): a type with nothing allowed scans and locks nothing.
        const allowedAtAll = `AND EXISTS (SELECT 1 FROM allowed a WHERE a.type = ${param(i, 0)}::text AND a.n > 0)`;
        return `t${i} AS MATERIALIZED (${this.claimableOfType(param(i, 0), param(i, 1), allowedAtAll)})`;
      })
      .join(',\n      ');
    return `
      WITH wanted (type, n, max_attempts, rate_max, rate_window_ms, global_max) AS (VALUES ${wanted}),
      probes AS (
        UPDATE ${this.types} t
        SET circuit_state = 'half-open', reopen_at = now() + t.cooldown_ms * interval '1 millisecond'
        WHERE t.type IN (SELECT type FROM wanted) AND t.circuit_state <> 'closed' AND t.reopen_at <= now()
        RETURNING t.type
      ), allowed AS (
        SELECT w.type, LEAST(
          w.n,
          CASE WHEN p.type IS NOT NULL THEN 1 WHEN t.circuit_state IS NULL OR t.circuit_state = 'closed' THEN w.n ELSE 0 END,
          CASE WHEN w.rate_max IS NULL THEN w.n
               ELSE w.rate_max - (SELECT count(*) FROM ${this.starts} s
                                  WHERE s.type = w.type AND s.started_at > clock_timestamp() - w.rate_window_ms * interval '1 millisecond')::int
          END,
          CASE WHEN w.global_max IS NULL THEN w.n
               ELSE w.global_max - (SELECT count(*) FROM ${this.jobs} r WHERE r.type = w.type AND r.status = 'processing')::int
          END) AS n
        FROM wanted w
        LEFT JOIN ${this.types} t ON t.type = w.type
        LEFT JOIN probes p ON p.type = w.type
      ),
      ${perType},
      picked AS MATERIALIZED (
        SELECT c.id FROM (
          SELECT u.id, u.type, u.priority, u.run_at,
                 row_number() OVER (PARTITION BY u.type ORDER BY u.priority DESC, u.run_at, u.id) AS rank
          FROM (${unionOf(typeCount)}) u
        ) c
        JOIN allowed a ON a.type = c.type
        WHERE c.rank <= a.n
        ORDER BY c.priority DESC, c.run_at, c.id
        LIMIT $1
      ), claimed AS (
        ${this.markClaimed()}
      ), started AS (
        INSERT INTO ${this.starts} (type, job_id, started_at)
        SELECT claimed.type, claimed.id, clock_timestamp() FROM claimed JOIN wanted w ON w.type = claimed.type
        WHERE w.rate_max IS NOT NULL
      )
      ${CLAIMED_IN_ORDER}`;
  }

  /**
   * Waiting, due jobs of one type in priority then run-time order, at most `limit`, locked; for an
   * ordering key only the oldest unfinished job of that key. SKIP LOCKED lets concurrent claims
   * pass each other.
   */
  private claimableOfType(type: string, limit: string, guard: string): string {
    return `
        SELECT j.id, j.type, j.priority, j.run_at FROM ${this.jobs} j
        WHERE j.type = ${type}::text AND j.status IN ('pending', 'failed') AND j.run_at <= now() ${guard}
          AND (j.ordering_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM ${this.jobs} e
                WHERE e.ordering_key = j.ordering_key AND e.id < j.id AND e.status IN ('pending', 'processing', 'failed')))
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT ${limit}::int
        FOR UPDATE SKIP LOCKED`;
  }

  /**
   * Takes the picked jobs: attempt counted, fresh lease token. The rows come from the primary key
   * through `= ANY (ARRAY(…))` (one index scan, never the whole table).
   */
  private markClaimed(): string {
    return `
        UPDATE ${this.jobs} j
        SET status = 'processing', attempts = j.attempts + 1, claimed_at = now(), worker_id = $2::text,
            max_attempts = CASE WHEN j.max_attempts_from_job THEN j.max_attempts ELSE w.max_attempts END,
            lease_token = gen_random_uuid(), lease_expires_at = now() + $3::float8 * interval '1 millisecond',
            retry_after = NULL
        FROM wanted w WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND w.type = j.type
        RETURNING j.id, j.type, j.payload, j.attempts, j.max_attempts, j.idempotency_key, j.priority, j.run_at, j.lease_token`;
  }
}

/** Claimed rows in claim order, named as ClaimedJob's fields so they need no mapping. */
const CLAIMED_IN_ORDER = `
      SELECT id::text AS id, type, payload, attempts AS attempt, max_attempts AS "maxAttempts",
             idempotency_key AS "idempotencyKey", priority, lease_token::text AS "leaseToken"
      FROM claimed ORDER BY priority DESC, run_at, claimed.id`;

/** A worker's type count never changes much: each statement text is built once per count. */
function cached(texts: Map<number, string>, typeCount: number, build: () => string): string {
  let text = texts.get(typeCount);
  if (text === undefined) {
    text = build();
    texts.set(typeCount, text);
  }
  return text;
}

function unionOf(typeCount: number): string {
  return range(typeCount)
    .map((i) => `SELECT * FROM t${i}`)
    .join(' UNION ALL ');
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
