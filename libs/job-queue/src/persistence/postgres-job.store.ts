import type { Pool } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import { AdminQueries } from './admin-queries.js';
import { adminSql } from './admin.sql.js';
import { circuitSql } from './circuit.sql.js';
import { claimSql } from './claim.sql.js';
import { type DependencySql, dependencySql } from './dependency.sql.js';
import { DependentEnqueuer } from './dependent-enqueuer.js';
import { enqueueSql } from './enqueue.sql.js';
import { JobClaimer } from './job-claimer.js';
import { JobEnqueuer } from './job-enqueuer.js';
import type { JobLogLine, JobRecord } from './job-record.js';
import type { JobDependency } from '../base/job-context.js';
import { jobTables } from './job-tables.js';
import { inTransaction } from './pool-transaction.js';
import { beginJobTransaction } from './job-transaction.js';
import type {
  CancelResult,
  CircuitRecord,
  ClaimRequest,
  ClaimedJob,
  EnqueuedJob,
  JobPage,
  JobPageQuery,
  JobStats,
  JobStore,
  JobTransaction,
  Lease,
  NewJob,
  OutcomeTallyRow,
  PrunedChunk,
  PurgeQuery,
  ReapedJob,
  RenewalResult,
  RetentionWalk,
  ScheduleSlot,
  SentClaim,
  StoredSchedule,
  ThroughputMinute,
  WorkerBeat,
  WorkerRecord,
} from './job.store.js';
import { MaintenanceQueries } from './maintenance-queries.js';
import { maintenanceSql } from './maintenance.sql.js';
import { OperatorQueries } from './operator-queries.js';
import { operatorSql } from './operator.sql.js';
import { OutcomeWriter } from './outcome-writer.js';
import { ScheduleQueries } from './schedule-queries.js';
import { scheduleSql } from './schedule.sql.js';
import { outcomeSql } from './outcome.sql.js';
import { poolOf } from './pool-of.js';
import { poolExecutor, type SqlExecutor } from './sql-executor.js';
import { statementNamer } from './statement-names.js';

export interface PostgresJobStoreSettings {
  /** Named prepared statements on the hot path; off behind transaction-mode poolers. */
  readonly prepare: boolean;
  /** Claims wait for their WAL flush like every other write (see ClaimQuery). */
  readonly synchronousClaims: boolean;
  /** `retention.completedMs: 0`: completing a job deletes it (unless a waiter needs its result). */
  readonly deleteOnComplete?: boolean;
}

/** The store's settings from the module's resolved options: statements are prepared while `listen` is on. */
export function storeSettings(
  options: Pick<ResolvedJobQueueOptions, 'listen' | 'synchronousClaims' | 'retention'>,
): PostgresJobStoreSettings {
  return { prepare: options.listen, synchronousClaims: options.synchronousClaims, deleteOnComplete: options.retention.completedMs === 0 };
}

/**
 * The JobStore on PostgreSQL, over the DataSource's pg pool: each concern has its part (enqueue,
 * claims, outcome writes, admin, maintenance) and its statements. Every method rejects with
 * StoreUnavailableError when the connection fails and StoreRefusedDataError when the database
 * refuses the data (driver-errors.ts); the parts translate at each pg or TypeORM call.
 */
export class PostgresJobStore implements JobStore {
  private readonly enqueuer: JobEnqueuer;
  private readonly claimer: JobClaimer;
  private readonly outcomes: OutcomeWriter;
  private readonly admin: AdminQueries;
  private readonly maintenance: MaintenanceQueries;
  private readonly operator: OperatorQueries;
  private readonly scheduleQueries: ScheduleQueries;
  private readonly completeSql: string;
  private readonly executor: SqlExecutor;
  private readonly dependencySql: DependencySql;

  constructor(
    private readonly dataSource: DataSource,
    private readonly schema: string,
    private readonly settings: PostgresJobStoreSettings,
    private readonly pool: Pool = poolOf(dataSource),
    executor: SqlExecutor = poolExecutor(pool, settings.prepare),
  ) {
    const tables = jobTables(schema);
    const named = statementNamer(schema, settings.synchronousClaims);
    const outcomes = outcomeSql(tables);
    const enqueue = enqueueSql(tables);
    this.executor = executor;
    this.dependencySql = dependencySql(tables);
    this.enqueuer = new JobEnqueuer(executor, enqueue, named, new DependentEnqueuer(this.dependencySql, enqueue), (work) =>
      inTransaction(pool, settings.prepare, work),
    );
    this.claimer = new JobClaimer(pool, executor, claimSql(tables), named, schema, settings);
    this.outcomes = new OutcomeWriter(executor, outcomes, named, settings.deleteOnComplete);
    const admin = adminSql(tables);
    const maintenance = maintenanceSql(tables);
    this.admin = new AdminQueries(executor, admin);
    this.maintenance = new MaintenanceQueries(executor, maintenance, circuitSql(tables));
    this.scheduleQueries = new ScheduleQueries(executor, scheduleSql(tables));
    this.operator = new OperatorQueries(executor, operatorSql(tables), { ...maintenance, ...admin }, pool, settings.prepare);
    this.completeSql = settings.deleteOnComplete ? outcomes.completeDeleting : outcomes.complete;
  }

  // Each method hands the call on as it is (no await of its own), so the hot path gains no step.

  enqueue(jobs: readonly NewJob[], manager?: EntityManager): Promise<EnqueuedJob[]> {
    return this.enqueuer.enqueue(jobs, manager);
  }

  findIdempotent(keys: ReadonlyArray<{ type: string; key: string }>, manager?: EntityManager): Promise<Array<string | null>> {
    return this.enqueuer.findIdempotent(keys, manager);
  }

  claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    return this.claimer.claim(request);
  }

  sendClaim(request: ClaimRequest): Promise<SentClaim> {
    return this.claimer.sendClaim(request);
  }

  complete(lease: Lease, resultJson: string): Promise<boolean> {
    return this.outcomes.complete(lease, resultJson);
  }

  completeMany(completions: ReadonlyArray<{ lease: Lease; resultJson: string }>, confirms?: readonly Lease[]): Promise<ReadonlySet<string>> {
    return this.outcomes.completeMany(completions, confirms);
  }

  confirmStarts(leases: readonly Lease[]): Promise<number> {
    return this.outcomes.confirmStarts(leases);
  }

  beginJobTransaction(): Promise<JobTransaction> {
    return beginJobTransaction(this.dataSource, this.completeSql);
  }

  findEffect(jobId: string, key: string): Promise<{ found: boolean; result: unknown }> {
    return this.outcomes.findEffect(jobId, key);
  }

  recordEffect(jobId: string, key: string, resultJson: string, attempt: number): Promise<void> {
    return this.outcomes.recordEffect(jobId, key, resultJson, attempt);
  }

  scheduleRetry(lease: Lease, error: string, attempt: number, workerId: string, delayMs: number): Promise<boolean> {
    return this.outcomes.scheduleRetry(lease, error, attempt, workerId, delayMs);
  }

  deadLetter(lease: Lease, error: string, attempt: number, workerId: string): Promise<boolean> {
    return this.outcomes.deadLetter(lease, error, attempt, workerId);
  }

  release(leases: readonly Lease[]): Promise<string[]> {
    return this.outcomes.release(leases);
  }

  renewLeases(leases: readonly Lease[], leaseMs: number): Promise<RenewalResult[]> {
    return this.outcomes.renewLeases(leases, leaseMs);
  }

  markStarted(jobId: string): Promise<void> {
    return this.outcomes.markStarted(jobId);
  }

  /** `work` gets this store on the leader's own connection, inside the transaction holding the lock. */
  asMaintenanceLeader<T>(work: (store: JobStore) => Promise<T>): Promise<T | null> {
    return this.maintenance.asLeader(this.pool, this.settings.prepare, (executor) =>
      work(new PostgresJobStore(this.dataSource, this.schema, this.settings, this.pool, executor)),
    );
  }

  reapExpiredLeases(limit: number): Promise<ReapedJob[]> {
    return this.maintenance.reapExpiredLeases(limit);
  }

  pruneStarts(olderThanMs: number): Promise<number> {
    return this.maintenance.pruneStarts(olderThanMs);
  }

  pruneFinishedChunk(afterId: string, chunk: number, olderThanMs: number, awaitedMs: number): Promise<PrunedChunk> {
    return this.maintenance.pruneFinishedChunk(afterId, chunk, olderThanMs, awaitedMs);
  }

  markResultRead(jobId: string): Promise<void> {
    return this.maintenance.markResultRead(jobId);
  }

  retentionWalk(): Promise<RetentionWalk> {
    return this.maintenance.retentionWalk();
  }

  saveRetentionWalk(walkedTo: string, restMs: number): Promise<void> {
    return this.maintenance.saveRetentionWalk(walkedTo, restMs);
  }

  pruneDead(olderThanMs: number, limit: number): Promise<number> {
    return this.maintenance.pruneDead(olderThanMs, limit);
  }

  registerTypes(types: readonly string[]): Promise<void> {
    return this.maintenance.registerTypes(types);
  }

  recordCircuitFailure(type: string, failureThreshold: number, cooldownMs: number): Promise<{ opened: boolean }> {
    return this.maintenance.recordCircuitFailure(type, failureThreshold, cooldownMs);
  }

  recordCircuitSuccess(type: string): Promise<{ closed: boolean }> {
    return this.maintenance.recordCircuitSuccess(type);
  }

  openCircuits(): Promise<CircuitRecord[]> {
    return this.maintenance.openCircuits();
  }

  getJob(id: string): Promise<JobRecord | null> {
    return this.admin.getJob(id);
  }

  stats(): Promise<JobStats> {
    return this.admin.stats();
  }

  listDead(type: string | null, limit: number): Promise<JobRecord[]> {
    return this.admin.listDead(type, limit);
  }

  retryDead(id: string): Promise<JobRecord | null> {
    return this.admin.retryDead(id);
  }

  cancel(id: string): Promise<CancelResult | null> {
    return this.admin.cancel(id);
  }

  ping(): Promise<void> {
    return this.admin.ping();
  }

  queueSnapshot(countUpTo: number): Promise<{ depth: number; deadLastHour: number }> {
    return this.admin.queueSnapshot(countUpTo);
  }

  oldestWaiting(): Promise<Map<string, number>> {
    return this.admin.oldestWaiting();
  }

  countDue(types: readonly string[]): Promise<number> {
    return this.admin.countDue(types);
  }

  depthByType(types: readonly string[], countUpTo: number): Promise<Map<string, number>> {
    return this.admin.depthByType(types, countUpTo);
  }

  heartbeat(worker: WorkerBeat | null, tally: readonly OutcomeTallyRow[]): Promise<void> {
    return this.operator.heartbeat(worker, tally);
  }

  removeWorker(id: string): Promise<void> {
    return this.operator.removeWorker(id);
  }

  workers(): Promise<WorkerRecord[]> {
    return this.operator.workers();
  }

  pauseType(type: string): Promise<boolean> {
    return this.operator.pause(type);
  }

  resumeType(type: string): Promise<boolean> {
    return this.operator.resume(type);
  }

  pausedTypes(): Promise<string[]> {
    return this.operator.pausedTypes();
  }

  throughput(minutes: number, type: string | null): Promise<ThroughputMinute[]> {
    return this.operator.throughput(minutes, type);
  }

  pruneOperatorHistory(throughputKeepMs: number): Promise<void> {
    return this.operator.pruneOperatorHistory(throughputKeepMs);
  }

  appendJobLogs(lease: Lease, workerId: string, lines: readonly JobLogLine[], keep: number): Promise<boolean> {
    return this.operator.appendJobLogs(lease, workerId, lines, keep);
  }

  async listDependencies(jobId: string): Promise<JobDependency[]> {
    return (await this.executor.query<JobDependency>(this.dependencySql.listDependencies, [jobId])).rows;
  }

  reportProgress(lease: Lease, progressJson: string): Promise<boolean> {
    return this.operator.reportProgress(lease.id, lease.leaseToken, progressJson);
  }

  listJobs(query: JobPageQuery): Promise<JobPage> {
    return this.operator.listJobs(query);
  }

  retryDeadMany(type: string | null, onProgress?: (done: number) => void): Promise<number> {
    return this.operator.retryDeadMany(type, onProgress);
  }

  purge(query: PurgeQuery, onProgress?: (done: number) => void): Promise<number> {
    return this.operator.purge(query, onProgress);
  }

  upsertSchedule(schedule: Omit<StoredSchedule, 'lastSlot' | 'updatedAt'>): Promise<StoredSchedule> {
    return this.scheduleQueries.upsert(schedule);
  }

  removeSchedule(name: string): Promise<boolean> {
    return this.scheduleQueries.remove(name);
  }

  listSchedules(): Promise<StoredSchedule[]> {
    return this.scheduleQueries.list();
  }

  markScheduleSlots(slots: ReadonlyArray<ScheduleSlot>): Promise<void> {
    return this.scheduleQueries.markSlots(slots);
  }

  lastCronSlots(types: readonly string[]): Promise<Map<string, Date>> {
    return this.scheduleQueries.lastCronSlots(types);
  }
}
