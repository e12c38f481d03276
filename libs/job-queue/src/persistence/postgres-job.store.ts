import { createHash, randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type {
  CancelResult,
  CircuitRecord,
  ClaimRequest,
  ClaimedJob,
  EnqueuedJob,
  JobCounts,
  JobStats,
  JobStore,
  JobTransaction,
  Lease,
  NewJob,
  PrunedChunk,
  ReapedJob,
  RenewalResult,
  SentClaim,
  RetentionWalk,
} from './job.store.js';
import { DEFAULT_SYNCHRONOUS_CLAIMS } from '../options/defaults.js';
import { sendCancelRequest, type BackendAddress } from './backend-cancel-request.js';
import { ClaimQuery, turnedAway } from './claim-query.js';
import { OneTypeClaimPlans, type JobsTableSize, type OneTypeClaimPlan } from './one-type-claim-plans.js';
import { jobSql, type JobSql } from './job.sql.js';
import type { JobRecord } from './job-record.js';
import { JOB_STATUSES, type JobStatus } from './job-status.js';
import { poolOf } from './pool-of.js';
import { toJobRecord } from './row-mapping.js';
import { idArray, leaseTokens, resultsById } from './fenced-batch.js';
import { managerExecutor, poolExecutor, type SqlExecutor, type SqlResult } from './sql-executor.js';

const BIGINT_ID = /^[1-9][0-9]{0,18}$/;
/** Enqueue retries when a conflicting idempotent row vanished between insert and lookup. */
const MAX_ENQUEUE_ROUNDS = 3;
/** completeMany's usual answer: every completion applied. */
const NONE_MISSED: ReadonlySet<string> = new Set();

export interface PostgresJobStoreSettings {
  /** Named prepared statements on the hot path; off behind transaction-mode poolers. */
  readonly prepare: boolean;
  /** Claims wait for their WAL flush like every other write (see ClaimQuery). */
  readonly synchronousClaims: boolean;
}

/** The module's defaults (`listen` on, so statements are prepared), for stores built directly. */
const DEFAULT_STORE_SETTINGS: PostgresJobStoreSettings = Object.freeze({
  prepare: true,
  synchronousClaims: DEFAULT_SYNCHRONOUS_CLAIMS,
});

/** The JobStore on PostgreSQL: the statements of job.sql.ts over the DataSource's pg pool. */
export class PostgresJobStore implements JobStore {
  private readonly sql: JobSql;

  private readonly named: (statement: keyof JobSql | 'claimPlain' | 'claimFlow' | 'claimOneType' | 'claimOneTypeSmall') => string;
  private readonly claims: ClaimQuery;
  /** Only for named statements: an unnamed one is planned for each claim anyway. */
  private readonly oneTypePlans: OneTypeClaimPlans | null;

  constructor(
    private readonly dataSource: DataSource,
    private readonly schema: string,
    private readonly settings: PostgresJobStoreSettings = DEFAULT_STORE_SETTINGS,
    private readonly pool: Pool = poolOf(dataSource),
    private readonly executor: SqlExecutor = poolExecutor(pool, settings.prepare),
  ) {
    this.sql = jobSql(schema);
    this.claims = new ClaimQuery(schema, settings.synchronousClaims);
    // Statement names are per connection and must stay under PostgreSQL's 63-byte identifiers.
    // The tag covers what shapes the texts, so stores set up differently never share a name.
    const shape = settings.synchronousClaims ? schema : `${schema}:claims without flush`;
    const tag = createHash('sha1').update(shape).digest('hex').slice(0, 8);
    this.named = (statement) => `ajq_${tag}_${statement}`;
    this.oneTypePlans = settings.prepare
      ? new OneTypeClaimPlans(async () => (await this.executor.query<JobsTableSize>(this.sql.jobsTableSize)).rows[0])
      : null;
  }

  async enqueue(jobs: readonly NewJob[], manager?: EntityManager): Promise<EnqueuedJob[]> {
    const executor = manager ? managerExecutor(manager) : this.executor;
    if (!jobs.some(isDelayed)) return this.insert(jobs, executor, manager === undefined);
    const results = await this.insert(jobs, executor, manager === undefined);
    const due = earliestDue(jobs, results);
    if (due) {
      const notify = executor.query(this.sql.notifyDue, [due.runAt, due.delayMs], manager ? undefined : this.named('notifyDue'));
      // In the caller's transaction a failure aborts it, so it must surface. Otherwise the jobs are
      // already committed: failing the call would invite a duplicate, and the poll finds them anyway.
      if (manager?.queryRunner?.isTransactionActive) await notify;
      else await notify.catch(() => undefined);
    }
    return results;
  }

  async findIdempotent(keys: ReadonlyArray<{ type: string; key: string }>, manager?: EntityManager): Promise<Array<string | null>> {
    if (keys.length === 0) return [];
    const executor = manager ? managerExecutor(manager) : this.executor;
    const { rows } = await executor.query<{ id: string; type: string; idempotency_key: string }>(this.sql.findByIdempotencyKeys, [
      keys.map((k) => k.type),
      keys.map((k) => k.key),
    ]);
    const byKey = new Map(rows.map((row) => [keyOf(row.type, row.idempotency_key), row.id]));
    return keys.map((k) => byKey.get(keyOf(k.type, k.key)) ?? null);
  }

  private async insert(jobs: readonly NewJob[], executor: SqlExecutor, named: boolean): Promise<EnqueuedJob[]> {
    if (jobs.every((job) => job.idempotencyKey === null)) return this.enqueuePlain(jobs, executor, named);
    const results: EnqueuedJob[] = new Array(jobs.length);
    let remaining = jobs.map((job, index) => ({ job, index }));
    for (let round = 0; round < MAX_ENQUEUE_ROUNDS && remaining.length > 0; round++) {
      const batch = remaining.map((entry) => entry.job);
      const { rows } = await executor.query<{ ord: number; id: string; inserted: boolean }>(this.sql.enqueue, [
        batch.map((j) => j.type),
        batch.map((j) => j.payloadJson),
        batch.map((j) => j.priority),
        batch.map((j) => j.maxAttempts),
        batch.map((j) => j.runAt),
        batch.map((j) => j.delayMs),
        batch.map((j) => j.idempotencyKey),
        batch.map((j) => j.maxAttemptsFromJob),
        batch.map((j) => j.notifyOnFinish),
        batch.map((j) => j.orderingKey),
      ], named ? this.named('enqueue') : undefined);
      const conflicts: typeof remaining = [];
      for (const row of rows) {
        const entry = remaining[row.ord - 1];
        if (row.inserted) results[entry.index] = { id: row.id, deduplicated: false };
        else conflicts.push(entry);
      }
      if (conflicts.length === 0) return results;
      const { rows: existing } = await executor.query<{ id: string; type: string; idempotency_key: string }>(
        this.sql.findByIdempotencyKeys,
        [conflicts.map((c) => c.job.type), conflicts.map((c) => c.job.idempotencyKey)],
      );
      const byKey = new Map(existing.map((row) => [keyOf(row.type, row.idempotency_key), row.id]));
      remaining = [];
      for (const entry of conflicts) {
        const id = byKey.get(keyOf(entry.job.type, entry.job.idempotencyKey!));
        if (id) results[entry.index] = { id, deduplicated: true };
        else remaining.push(entry);
      }
    }
    if (remaining.length > 0) {
      throw new Error(`Enqueue could not settle idempotency keys after ${MAX_ENQUEUE_ROUNDS} rounds of concurrent deletes.`);
    }
    return results;
  }

  /** Jobs without idempotency keys: the leanest statement that fits the batch's shape. */
  private async enqueuePlain(jobs: readonly NewJob[], executor: SqlExecutor, named: boolean): Promise<EnqueuedJob[]> {
    const first = jobs[0];
    if (jobs.length === 1) {
      const { rows } = await executor.query<{ id: string }>(
        this.sql.enqueueOne,
        [first.type, first.payloadJson, ...sharedColumns(first)],
        named ? this.named('enqueueOne') : undefined,
      );
      return [{ id: rows[0].id, deduplicated: false }];
    }
    const uniform = jobs.every((job) => sameColumns(job, first));
    const { rows } = uniform
      ? await executor.query<{ ids: string | null }>(
          this.sql.enqueueUniform,
          [`[${jobs.map((job) => job.payloadJson).join(',')}]`, first.type, ...sharedColumns(first)],
          named ? this.named('enqueueUniform') : undefined,
        )
      : await executor.query<{ ids: string | null }>(
          this.sql.enqueuePlain,
          [`[${jobs.map(plainJobJson).join(',')}]`],
          named ? this.named('enqueuePlain') : undefined,
        );
    const ids = rows[0]?.ids?.split(',') ?? [];
    if (ids.length !== jobs.length) throw new Error(`Enqueue inserted ${ids.length} of ${jobs.length} jobs; nothing should be missing.`);
    return ids.map((id) => ({ id, deduplicated: false }));
  }

  async claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    if (request.perType.length === 0) return [];
    const leaseToken = randomUUID();
    const limited = request.perType.filter((t) => t.rateMax != null || t.globalMax != null).map((t) => t.type);
    let rows: unknown[][];
    if (limited.length > 0) {
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

  /** Claims holding the limited types' row locks, so their counts cannot be raced. */
  private claimLimited(types: string[], params: unknown[]): Promise<unknown[][]> {
    return this.inTransaction(async (client) => {
      await client.query(this.sql.claimLimitedLock, [types]);
      return (await client.query<unknown[]>({ text: this.claims.flowText, values: params, rowMode: 'array' })).rows;
    });
  }

  /** Runs `work` on one pooled connection inside BEGIN … COMMIT, rolled back if it throws. */
  private async inTransaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // pg-pool listens for a client's errors only while the client is idle in the pool. Checked
    // out, a connection lost (the server restarted, the backend terminated) would emit 'error'
    // to no one, and Node would end the process for it.
    let lost: Error | undefined;
    const onError = (error: Error) => (lost ??= error);
    client.on('error', onError);
    let failed = true;
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      failed = false;
      return result;
    } finally {
      if (failed && !lost) await client.query('ROLLBACK').catch(() => undefined);
      client.off('error', onError);
      // A lost connection is destroyed, not handed out again.
      client.release(lost);
    }
  }

  async complete(lease: Lease, resultJson: string): Promise<boolean> {
    return applied(await this.executor.query(this.sql.complete, [lease.id, lease.leaseToken, resultJson]));
  }

  async completeMany(completions: ReadonlyArray<{ lease: Lease; resultJson: string }>): Promise<ReadonlySet<string>> {
    if (completions.length === 0) return NONE_MISSED;
    const leases = completions.map((c) => c.lease);
    const [others, usual] = leaseTokens(leases);
    const { rows } = await this.executor.query<{ missed: string | null }>(
      this.sql.completeMany,
      [idArray(leases), others, resultsById(completions), usual],
      this.named('completeMany'),
    );
    // Exactly one row, always: without it, nothing would tell an applied completion from a lost one.
    if (rows.length !== 1) throw new Error(`completeMany returned ${rows.length} rows, expected 1`);
    const { missed } = rows[0];
    return missed ? new Set(missed.split(',')) : NONE_MISSED;
  }

  async beginJobTransaction(): Promise<JobTransaction> {
    const queryRunner = this.dataSource.createQueryRunner();
    const connection = (await queryRunner.connect()) as PoolClient;
    try {
      // Whatever the DataSource's isolationLevel: the lease keeper renews the job's row while the
      // handler runs, and under REPEATABLE READ or SERIALIZABLE the completion's update of that
      // row would then fail with a serialization error, attempt after attempt.
      await queryRunner.startTransaction('READ COMMITTED');
    } catch (error) {
      await queryRunner.release();
      throw error;
    }
    const executor = managerExecutor(queryRunner.manager);
    const sql = this.sql;
    let open = true;
    const finish = async (action: () => Promise<void>) => {
      if (!open) return;
      open = false;
      try {
        await action();
      } finally {
        await queryRunner.release();
      }
    };
    return {
      manager: queryRunner.manager,
      async complete(lease, resultJson) {
        return applied(await executor.query(sql.complete, [lease.id, lease.leaseToken, resultJson]));
      },
      commit: () => finish(() => queryRunner.commitTransaction()),
      rollback: () => finish(async () => {
        if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction();
      }),
      abandon() {
        if (!open) return;
        open = false;
        // The connection ends first: statements not yet run on it fail, and the server rolls the
        // transaction back. A statement still running there is cancelled, or its backend (outside
        // the pool's count by then) would hold its locks until it ended. Then the runner is
        // released, so the handler's next statement throws, and the pool drops the ended
        // connection rather than hand it out again.
        connection.end().catch(() => undefined);
        sendCancelRequest(connection as BackendAddress);
        void queryRunner.release();
      },
    };
  }

  async findEffect(jobId: string, key: string): Promise<{ found: boolean; result: unknown }> {
    const { rows } = await this.executor.query<{ result: unknown }>(this.sql.findEffect, [jobId, key]);
    return rows.length > 0 ? { found: true, result: rows[0].result } : { found: false, result: undefined };
  }

  async recordEffect(jobId: string, key: string, resultJson: string, attempt: number): Promise<void> {
    await this.executor.query(this.sql.recordEffect, [jobId, key, resultJson, attempt]);
  }

  async scheduleRetry(lease: Lease, error: string, attempt: number, workerId: string, delayMs: number): Promise<boolean> {
    const { rowCount } = await this.executor.query(
      this.sql.scheduleRetry,
      [lease.id, lease.leaseToken, error, attempt, workerId, delayMs],
      this.named('scheduleRetry'),
    );
    return rowCount === 1;
  }

  async deadLetter(lease: Lease, error: string, attempt: number, workerId: string): Promise<boolean> {
    return applied(await this.executor.query(this.sql.deadLetter, [lease.id, lease.leaseToken, error, attempt, workerId]));
  }

  async release(leases: readonly Lease[]): Promise<string[]> {
    if (leases.length === 0) return [];
    const { rows } = await this.executor.query<{ id: string }>(this.sql.release, [idArray(leases), ...leaseTokens(leases)]);
    return rows.map((row) => row.id);
  }

  async renewLeases(leases: readonly Lease[], leaseMs: number): Promise<RenewalResult[]> {
    if (leases.length === 0) return [];
    const [others, usual] = leaseTokens(leases);
    const { rows } = await this.executor.query<{ id: string; held: boolean; status: JobStatus | null }>(
      this.sql.renewLeases,
      [idArray(leases), others, leaseMs, usual],
      this.named('renewLeases'),
    );
    return rows;
  }

  asMaintenanceLeader<T>(work: (store: JobStore) => Promise<T>): Promise<T | null> {
    return this.inTransaction(async (client) => {
      const { rows } = await client.query<{ acquired: boolean }>(this.sql.tryMaintenanceLock);
      if (!rows[0]?.acquired) return null;
      return work(new PostgresJobStore(this.dataSource, this.schema, this.settings, this.pool, poolExecutor(client, this.settings.prepare)));
    });
  }

  async reapExpiredLeases(limit: number): Promise<ReapedJob[]> {
    const { rows } = await this.executor.query<{
      id: string;
      type: string;
      status: JobStatus;
      worker_id: string | null;
      notify_on_finish: boolean;
    }>(this.sql.reapExpiredLeases, [limit]);
    const awaited = rows.filter((row) => row.status === 'dead' && row.notify_on_finish).map((row) => row.id);
    if (awaited.length > 0) await this.executor.query(this.sql.notifyFinished, [awaited]);
    return rows.map((row) => ({ id: row.id, type: row.type, status: row.status, workerId: row.worker_id }));
  }

  async getJob(id: string): Promise<JobRecord | null> {
    if (!BIGINT_ID.test(String(id))) return null;
    const { rows } = await this.executor.query(this.sql.getJob, [id]);
    return rows[0] ? toJobRecord(rows[0]) : null;
  }

  async stats(): Promise<JobStats> {
    const { rows } = await this.executor.query<{ type: string; status: JobStatus; count: number }>(this.sql.stats);
    const totals = emptyCounts();
    const byType: Record<string, JobCounts> = {};
    for (const row of rows) {
      totals[row.status] += row.count;
      (byType[row.type] ??= emptyCounts())[row.status] += row.count;
    }
    return { ...totals, byType };
  }

  async listDead(type: string | null, limit: number): Promise<JobRecord[]> {
    const { rows } = await this.executor.query(this.sql.listDead, [type, limit]);
    return rows.map(toJobRecord);
  }

  async retryDead(id: string): Promise<JobRecord | null> {
    if (!BIGINT_ID.test(String(id))) return null;
    const { rows } = await this.executor.query(this.sql.retryDead, [id]);
    if (rows.length > 0) await this.executor.query(this.sql.notifyNew);
    return rows[0] ? toJobRecord(rows[0]) : null;
  }

  async cancel(id: string): Promise<CancelResult | null> {
    if (!BIGINT_ID.test(String(id))) return null;
    const { rows } = await this.executor.query<{ previous_status: JobStatus }>(this.sql.cancel, [id]);
    if (rows.length === 0) return null;
    const record = await this.getJob(id);
    return record ? { record, previousStatus: rows[0].previous_status } : null;
  }

  async ping(): Promise<void> {
    await this.executor.query(this.sql.ping);
  }

  async registerTypes(types: readonly string[]): Promise<void> {
    if (types.length > 0) await this.executor.query(this.sql.registerTypes, [types]);
  }

  async recordCircuitFailure(type: string, failureThreshold: number, cooldownMs: number): Promise<{ opened: boolean }> {
    const { rows } = await this.executor.query<{ previous_state: string; state: string }>(this.sql.recordCircuitFailure, [
      type,
      failureThreshold,
      cooldownMs,
    ]);
    return { opened: rows[0]?.state === 'open' && rows[0]?.previous_state !== 'open' };
  }

  async recordCircuitSuccess(type: string): Promise<{ closed: boolean }> {
    const { rows } = await this.executor.query<{ previous_state: string }>(this.sql.recordCircuitSuccess, [type]);
    return { closed: rows.length > 0 && rows[0].previous_state !== 'closed' };
  }

  async openCircuits(): Promise<CircuitRecord[]> {
    const { rows } = await this.executor.query<Record<string, any>>(this.sql.openCircuits);
    return rows.map((row) => ({
      type: row.type,
      state: row.circuit_state,
      consecutiveFailures: row.consecutive_failures,
      openedAt: row.opened_at,
      reopenAt: row.reopen_at,
    }));
  }

  async markStarted(jobId: string): Promise<void> {
    await this.executor.query(this.sql.markStarted, [jobId], this.named('markStarted'));
  }

  async pruneStarts(olderThanMs: number): Promise<number> {
    return (await this.executor.query(this.sql.pruneStarts, [olderThanMs])).rowCount;
  }

  async pruneFinishedChunk(afterId: string, chunk: number, olderThanMs: number): Promise<PrunedChunk> {
    const { rows } = await this.executor.query<{
      scanned: number;
      last_id: string | null;
      reached_recent: boolean;
      completed: number;
      cancelled: number;
    }>(this.sql.pruneFinishedChunk, [afterId, chunk, olderThanMs]);
    const row = rows[0];
    return { scanned: row.scanned, lastId: row.last_id, reachedRecent: row.reached_recent, completed: row.completed, cancelled: row.cancelled };
  }

  async retentionWalk(): Promise<RetentionWalk> {
    const { rows } = await this.executor.query<{ walked_to: string; due: boolean }>(this.sql.retentionWalk);
    return rows[0] ? { walkedTo: rows[0].walked_to, due: rows[0].due } : { walkedTo: '0', due: true };
  }

  async saveRetentionWalk(walkedTo: string, restMs: number): Promise<void> {
    await this.executor.query(this.sql.saveRetentionWalk, [walkedTo, restMs]);
  }

  async pruneDead(olderThanMs: number, limit: number): Promise<number> {
    return (await this.executor.query(this.sql.pruneDead, [olderThanMs, limit])).rowCount;
  }

  async queueSnapshot(countUpTo: number): Promise<{ depth: number; deadLastHour: number }> {
    const { rows } = await this.executor.query<{ depth: number; dead_last_hour: number }>(this.sql.queueSnapshot, [countUpTo]);
    return { depth: rows[0].depth, deadLastHour: rows[0].dead_last_hour };
  }

  async depthByType(types: readonly string[], countUpTo: number): Promise<Map<string, number>> {
    if (types.length === 0) return new Map();
    const { rows } = await this.executor.query<{ type: string; depth: number }>(this.sql.depthByType, [types, countUpTo]);
    return new Map(rows.map((row) => [row.type, row.depth]));
  }
}

/** A job that is not due at once: the enqueue then tells workers when it will be. */
function isDelayed(job: NewJob): boolean {
  return job.runAt !== null || job.delayMs > 0;
}

/**
 * The earliest future run-at time and the shortest delay among the jobs inserted (not
 * deduplicated), or null when none is delayed: a run-at time already past (a cron slot) is due
 * now, and the insert's own notification covers it.
 */
function earliestDue(jobs: readonly NewJob[], results: readonly EnqueuedJob[]): { runAt: Date | null; delayMs: number | null } | null {
  const now = Date.now();
  let runAt: Date | null = null;
  let delayMs: number | null = null;
  for (let i = 0; i < jobs.length; i++) {
    const job = jobs[i];
    if (results[i].deduplicated) continue;
    if (job.runAt !== null) {
      if (job.runAt.getTime() > now && (runAt === null || job.runAt < runAt)) runAt = job.runAt;
    } else if (job.delayMs > 0 && (delayMs === null || job.delayMs < delayMs)) {
      delayMs = job.delayMs;
    }
  }
  return runAt === null && delayMs === null ? null : { runAt, delayMs };
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
    };
  }
  return jobs;
}

function applied(result: SqlResult<Record<string, unknown>>): boolean {
  return result.rows[0]?.applied === 1;
}

function emptyCounts(): JobCounts {
  return Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as unknown as JobCounts;
}

function keyOf(type: string, key: string): string {
  return `${type}\u0000${key}`;
}

/** Columns after type and payload, in enqueueOne's and enqueueUniform's parameter order ($3–$9). */
function sharedColumns(job: NewJob): unknown[] {
  return [
    job.priority,
    job.maxAttempts,
    job.maxAttemptsFromJob,
    job.notifyOnFinish,
    job.orderingKey,
    job.runAt,
    job.runAt ? 0 : job.delayMs,
  ];
}

/** Whether two jobs would be written with the same columns apart from their payloads. */
function sameColumns(a: NewJob, b: NewJob): boolean {
  return (
    a.type === b.type &&
    a.priority === b.priority &&
    a.maxAttempts === b.maxAttempts &&
    a.maxAttemptsFromJob === b.maxAttemptsFromJob &&
    a.notifyOnFinish === b.notifyOnFinish &&
    a.orderingKey === b.orderingKey &&
    (a.runAt?.getTime() ?? null) === (b.runAt?.getTime() ?? null) &&
    (a.runAt ? 0 : a.delayMs) === (b.runAt ? 0 : b.delayMs)
  );
}

/** One job of enqueuePlain's JSON array; the payload is already JSON text and goes in as it is. */
function plainJobJson(job: NewJob): string {
  let json = `{"t":${JSON.stringify(job.type)},"p":${job.payloadJson},"m":${job.maxAttempts}`;
  if (job.priority !== 0) json += `,"pr":${job.priority}`;
  if (job.maxAttemptsFromJob) json += ',"mj":true';
  if (job.notifyOnFinish) json += ',"n":true';
  if (job.orderingKey !== null) json += `,"o":${JSON.stringify(job.orderingKey)}`;
  if (job.runAt) json += `,"r":"${job.runAt.toISOString()}"`;
  else if (job.delayMs) json += `,"d":${job.delayMs}`;
  return `${json}}`;
}
