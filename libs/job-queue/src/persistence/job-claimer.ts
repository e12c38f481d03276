import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { ClaimSql } from './claim.sql.js';
import { ClaimQuery, turnedAway } from './claim-query.js';
import type { ClaimRequest, ClaimedJob, SentClaim, TypeClaim } from './job.store.js';
import { OneTypeClaimPlans, type JobsTableSize, type OneTypeClaimPlan } from './one-type-claim-plans.js';
import { inTransaction } from './pool-transaction.js';
import type { SqlExecutor } from './sql-executor.js';
import type { StatementNamer } from './statement-names.js';

/**
 * Claims jobs: the claim statement that fits the request (ClaimQuery), with a fresh lease token
 * for the jobs it takes.
 */
export class JobClaimer {
  private readonly claims: ClaimQuery;
  /** Only for named statements: an unnamed one is planned for each claim anyway. */
  private readonly oneTypePlans: OneTypeClaimPlans | null;
  private readonly prepare: boolean;
  /** Which part of a claim with grouped types goes first this time (claimWithGroups). */
  private groupsFirst = false;

  constructor(
    private readonly pool: Pool,
    private readonly executor: SqlExecutor,
    private readonly sql: ClaimSql,
    private readonly named: StatementNamer,
    schema: string,
    settings: { readonly prepare: boolean; readonly synchronousClaims: boolean },
  ) {
    this.claims = new ClaimQuery(schema, settings.synchronousClaims);
    this.prepare = settings.prepare;
    this.oneTypePlans = settings.prepare
      ? new OneTypeClaimPlans(async () => (await this.executor.query<JobsTableSize>(this.sql.jobsTableSize)).rows[0])
      : null;
  }

  async claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    if (request.perType.length === 0) return [];
    const leaseToken = randomUUID();
    const limited = request.perType.filter((t) => t.rateMax != null || t.globalMax != null).map((t) => t.type);
    let rows: unknown[][];
    if (request.perType.some((t) => t.groupMax != null)) {
      rows = await this.claimWithGroups(request, leaseToken);
    } else if (limited.length > 0) {
      rows = await this.claimLimited(limited, this.claims.flowParams(request, leaseToken));
    } else if (request.flowControl) {
      rows = await this.executor.queryArrays(this.claims.flowText, this.claims.flowParams(request, leaseToken), this.named('claimFlow'));
    } else {
      rows = await this.claimUnlimited(request, leaseToken);
    }
    return claimedJobs(rows, leaseToken, request);
  }

  async sendClaim(request: ClaimRequest): Promise<SentClaim> {
    const claimed = this.claim(request);
    // Until awaited, a failure must not count as unhandled.
    claimed.catch(() => undefined);
    // node-postgres hands out a pooled connection a tick later: let the statement reach the socket
    // before the caller goes on with synchronous work (a batch of short jobs).
    await new Promise<void>((resolve) => setImmediate(resolve));
    return { claimed };
  }

  /** A claim without flow control: for one type, in a form whose plan PostgreSQL keeps. */
  private async claimUnlimited(request: ClaimRequest, leaseToken: string): Promise<unknown[][]> {
    const plans = request.perType.length === 1 ? this.oneTypePlans : null;
    const limit = Math.min(request.perType[0].limit, request.limit);
    let plan = await plans?.planFor(limit);
    if (plan?.smallTable) {
      const rows = await this.claimOneType(plan, request, leaseToken);
      if (!turnedAway(rows)) return rows;
      // The table has grown large: claim at once in the large form, rather than leave the jobs
      // waiting for the next size read. Nothing was claimed, so the token is still unused.
      plans!.sawLargeTable();
      plan = await plans!.planFor(limit);
    }
    return plan
      ? this.claimOneType(plan, request, leaseToken)
      : this.executor.queryArrays(this.claims.plainText, this.claims.plainParams(request, leaseToken), this.named('claimPlain'));
  }

  private claimOneType(plan: OneTypeClaimPlan, request: ClaimRequest, leaseToken: string): Promise<unknown[][]> {
    const name = plan.smallTable ? `${this.named('claimOneTypeSmall')}_${plan.cap}` : `${this.named('claimOneType')}_${plan.cap}_${plan.generation}`;
    return this.executor.queryArrays(this.claims.oneType(plan.cap, plan.smallTable), this.claims.oneTypeParams(request, leaseToken), name);
  }

  /**
   * A claim that includes types claimed in turn across groups: in one transaction that holds the
   * row locks of those types and of the limited ones (claimGroupedLock), the other types by the
   * flow-control claim, then each grouped type by its own grouped claim, the request's limits
   * and its jobs that start at once shared out in that order. Which comes first alternates, so
   * neither kind can take a busy worker's free slots every time.
   */
  private claimWithGroups(request: ClaimRequest, leaseToken: string): Promise<unknown[][]> {
    const grouped = request.perType.filter((t) => t.groupMax != null);
    const others = request.perType.filter((t) => t.groupMax == null);
    const locked = request.perType.filter((t) => t.groupMax != null || t.rateMax != null || t.globalMax != null).map((t) => t.type);
    const parts: TypeClaim[][] = [others, ...grouped.map((t) => [t])].filter((part) => part.length > 0);
    if (this.groupsFirst) parts.reverse();
    this.groupsFirst = !this.groupsFirst;
    const startNow = request.startNow ?? request.limit;
    // Named, unlike the other limited claims: the grouped claim is long to plan, and its plan
    // depends on no count it reads (each group's running count is an index probe).
    return inTransaction(this.pool, this.prepare, async (transaction) => {
      await transaction.query(this.sql.claimGroupedLock, [locked], this.named('claimGroupedLock'));
      const rows: unknown[][] = [];
      for (const perType of parts) {
        const limit = request.limit - rows.length;
        if (limit <= 0) break;
        const part: ClaimRequest = { ...request, perType, limit, startNow: Math.max(0, startNow - rows.length) };
        const isGrouped = perType[0].groupMax != null;
        const text = isGrouped ? this.claims.groupedText : this.claims.flowText;
        const params = isGrouped ? this.claims.groupedParams(part, leaseToken) : this.claims.flowParams(part, leaseToken);
        rows.push(...(await transaction.queryArrays(text, params, isGrouped ? this.named('claimGrouped') : undefined)));
      }
      return rows;
    });
  }

  /** Claims holding the limited types' row locks, so their counts cannot be raced. */
  private claimLimited(types: string[], params: unknown[]): Promise<unknown[][]> {
    // Unnamed statements: this claim is planned each time, with the counts it reads.
    return inTransaction(this.pool, false, async (transaction) => {
      await transaction.query(this.sql.claimLimitedLock, [types]);
      return transaction.queryArrays(this.claims.flowText, params);
    });
  }
}

/**
 * The claim's rows (columns in ClaimQuery's order) as jobs holding the claim's lease token. A
 * one-type claim leaves each row's type NULL: it is the request's only type. Every job is built by
 * this one literal, so all of them share one shape wherever the engine reads them.
 */
function claimedJobs(rows: unknown[][], leaseToken: string, request: ClaimRequest): ClaimedJob[] {
  const onlyType = request.perType.length === 1 ? request.perType[0].type : null;
  const jobs = new Array<ClaimedJob>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const type = (row[1] as string | null) ?? onlyType;
    if (type === null) throw new Error(`claim returned job ${String(row[0])} without its type (a multi-type claim must return it)`);
    jobs[i] = {
      id: row[0] as string,
      type,
      payload: row[2],
      attempt: row[3] as number,
      maxAttempts: row[4] as number,
      idempotencyKey: row[5] as string | null,
      leaseToken,
      prefetched: row[6] as boolean,
      leaseExpiries: row[7] as number,
      dueAt: row[8] as number,
      traceContext: row[9] as string | null,
    };
  }
  return jobs;
}
