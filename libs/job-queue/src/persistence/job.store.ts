import type { EntityManager } from 'typeorm';
import type { JobLogLine, JobRecord } from './job-record.js';

export type { JobLogLine } from './job-record.js';
import type { JobStatus } from '../base/job-status.js';
import type { JobDependency } from '../base/job-context.js';

/** A validated job ready to insert. */
export interface NewJob {
  type: string;
  /** The payload already serialised to JSON text. */
  payloadJson: string;
  priority: number;
  maxAttempts: number;
  /** true when the job itself set maxAttempts; otherwise the claiming handler's setting wins. */
  maxAttemptsFromJob: boolean;
  /** An enqueueAndWait caller waits: the finishing statement notifies it. */
  notifyOnFinish: boolean;
  runAt: Date | null;
  delayMs: number;
  idempotencyKey: string | null;
  /** Jobs sharing a key run one at a time, in enqueue order. */
  orderingKey: string | null;
  /** The tenant (customer, account) it belongs to: types with `groupConcurrency` share turns across groups. */
  groupKey?: string | null;
  /** The enqueuing span's trace context (JSON of the propagation carrier), when traced. */
  traceContext?: string | null;
  /** The idempotency key dedupes only this long after its first job was enqueued. */
  uniqueForMs?: number | null;
  /** At most one waiting job per (type, debounce key): a later enqueue updates it. */
  debounceKey?: string | null;
  /** Ids (canonical decimal text) of the jobs this one waits for; it starts `blocked`. */
  dependsOn?: string[];
  /** What a failed dependency does to it: cancel it (the default) or let it run anyway. */
  onDependencyFailure?: 'cancel' | 'run';
  /** The input field the ids came from, for the error that names one that does not exist. */
  dependsOnField?: string;
}

export interface EnqueuedJob {
  id: string;
  deduplicated: boolean;
  debounced?: boolean;
}

/** How many jobs of each type this worker can take now. */
export interface ClaimRequest {
  workerId: string;
  leaseMs: number;
  /** Upper bound over all types together. */
  limit: number;
  perType: ReadonlyArray<TypeClaim>;
  /** Some handled type has a circuit breaker, rate limit or global concurrency: the full claim. */
  flowControl?: boolean;
  /**
   * How many of the claimed jobs (the first in claim order) start at once: their attempt is
   * charged by the claim; the others' when they start. Absent: all of them start at once.
   */
  startNow?: number;
}

export interface TypeClaim {
  type: string;
  limit: number;
  maxAttempts: number;
  /** Rate limit: at most `rateMax` starts within `rateWindowMs`, across all workers. */
  rateMax?: number | null;
  rateWindowMs?: number | null;
  /** At most this many running at once across all workers. */
  globalMax?: number | null;
  /** Set: the type is claimed in turn across groups, at most this many of one group running across all workers. */
  groupMax?: number | null;
}

export interface CircuitRecord {
  type: string;
  state: 'open' | 'half-open';
  consecutiveFailures: number;
  openedAt: Date | null;
  reopenAt: Date | null;
}

/** A job this worker now owns until its lease expires. */
export interface ClaimedJob {
  id: string;
  type: string;
  payload: unknown;
  attempt: number;
  maxAttempts: number;
  idempotencyKey: string | null;
  leaseToken: string;
  /**
   * Claimed into the buffer, its attempt not charged yet: the worker charges it when it starts
   * (ConfirmedStarts). `attempt` is this run's number all the same: the stored attempts + 1.
   */
  prefetched?: boolean;
  /** How often the job's lease expired before (its worker lost): a prefetched one is charged before it runs. */
  leaseExpiries?: number;
  /** When it came due (run_at, ms since the epoch by the database's clock): metrics time its wait. */
  dueAt?: number;
  /** The trace context stored at enqueue, which its attempts continue. */
  traceContext?: string | null;
}

/** The proof of ownership every post-claim write must present. */
export interface Lease {
  id: string;
  leaseToken: string;
}

export interface RenewalResult {
  id: string;
  held: boolean;
  /** Current status when the lease is no longer held (`cancelled`, or another owner's). */
  status: JobStatus | null;
}

/** A transactional handler's transaction; `complete` marks the job done inside it, fenced. */
export interface JobTransaction {
  readonly manager: EntityManager;
  complete(lease: Lease, resultJson: string): Promise<boolean>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  /**
   * Ends the transaction by closing its connection, for a handler that may still be running (it
   * timed out, or was interrupted). A ROLLBACK would leave the connection to its next statement,
   * which would then run, and commit, on its own; after this, its statements fail. A statement
   * still running on the server is cancelled.
   */
  abandon(): void;
}

export interface ReapedJob {
  id: string;
  type: string;
  status: JobStatus;
  workerId: string | null;
}

export interface JobCounts {
  pending: number;
  processing: number;
  completed: number;
  failed: number;
  dead: number;
  cancelled: number;
  /** Waiting for the jobs they depend on. */
  blocked: number;
}

export interface JobStats extends JobCounts {
  byType: Record<string, JobCounts>;
}

export interface CancelResult {
  record: JobRecord;
  previousStatus: JobStatus;
}

/** What one retention chunk looked at and deleted. */
export interface PrunedChunk {
  /** Jobs looked at: fewer than the chunk means the walk reached the end of the table. */
  scanned: number;
  /** The highest id looked at; the next chunk starts after it. */
  lastId: string | null;
  /** The chunk ended in a job created within the retention window: nothing later has expired. */
  reachedRecent: boolean;
  completed: number;
  cancelled: number;
}

/** Where the retention walk is, and whether it may go on now (its rest is over). */
export interface RetentionWalk {
  walkedTo: string;
  due: boolean;
}

/** A claim on its way (a promise inside an object, so awaiting the send does not await the claim). */
export interface SentClaim {
  readonly claimed: Promise<ClaimedJob[]>;
}

/**
 * Every read and write of the jobs table. Each write after a claim is fenced by the lease token
 * and reports whether it applied.
 */
/** A worker process as its heartbeat reports it. */
export interface WorkerBeat {
  id: string;
  host: string;
  pid: number;
  startedAt: Date;
  /** The row counts as live this long after the beat (a few heartbeat intervals). */
  expiresInMs: number;
  types: string[];
  concurrency: number;
  inFlight: number;
  draining: boolean;
}

/** A live worker process, as `JobQueueAdmin.workers()` lists it. */
export interface WorkerRecord {
  id: string;
  host: string;
  pid: number;
  startedAt: Date;
  heartbeatAt: Date;
  types: string[];
  concurrency: number;
  inFlight: number;
  draining: boolean;
}

/** Outcomes of one type in one minute (minutes since the epoch), added to the throughput rollup. */
export interface OutcomeTallyRow {
  minute: number;
  type: string;
  completed: number;
  failed: number;
  dead: number;
}

/** One minute of throughput, all processes together. */
export interface ThroughputMinute {
  minute: Date;
  completed: number;
  /** Failed attempts that will be retried. */
  failed: number;
  dead: number;
}

/** A page of jobs, newest first: `before` is the last page's cursor (an id), or null for the first. */
export interface JobPageQuery {
  status: JobStatus | null;
  type: string | null;
  limit: number;
  before: string | null;
}

export interface JobPage {
  jobs: JobRecord[];
  /** Pass as `cursor` for the next page; null when there is none. */
  nextCursor: string | null;
}

export interface PurgeQuery {
  status: 'completed' | 'dead' | 'cancelled';
  type: string | null;
  /** Only jobs that finished (cancelled: were created) more than this long ago. */
  olderThanMs: number;
}

/** What a runtime schedule's jobs are enqueued with, besides their payload. */
export interface ScheduleJobOptions {
  priority?: number;
  maxAttempts?: number;
  orderingKey?: string;
  /** Each job's group (tenant fairness, where the handler sets `groupConcurrency`). */
  group?: string;
}

/** A cron schedule added at run time (JobQueueAdmin.upsertSchedule). */
export interface StoredSchedule {
  name: string;
  cron: string;
  timezone: string;
  type: string;
  payload: Record<string, unknown>;
  options: ScheduleJobOptions;
  /** The latest slot enqueued, or null. */
  lastSlot: Date | null;
  updatedAt: Date;
}

/** A slot a runtime schedule enqueued, with the timetable it came from. */
export interface ScheduleSlot {
  name: string;
  slot: Date;
  cron: string;
  timezone: string;
}

export interface JobStore {
  enqueue(jobs: readonly NewJob[], manager?: EntityManager): Promise<EnqueuedJob[]>;
  /** For each (type, idempotency key) pair, in order: the id of the job that holds it, or null. */
  findIdempotent(keys: ReadonlyArray<{ type: string; key: string }>, manager?: EntityManager): Promise<Array<string | null>>;
  claim(request: ClaimRequest): Promise<ClaimedJob[]>;
  /**
   * Sends a claim and resolves once its statement is on its way to the server, so work the caller
   * then does synchronously overlaps the claim; `claimed` settles as `claim` would.
   */
  sendClaim(request: ClaimRequest): Promise<SentClaim>;
  complete(lease: Lease, resultJson: string): Promise<boolean>;
  /**
   * Completes many jobs in one statement; returns the ids whose lease was gone (nothing written
   * for them), usually none. `confirms`: prefetched attempts started and still running, charged
   * their attempt in the same statement (fenced; none of them among the completions).
   */
  completeMany(completions: ReadonlyArray<{ lease: Lease; resultJson: string }>, confirms?: readonly Lease[]): Promise<ReadonlySet<string>>;
  /** Charges started prefetched attempts their attempt (fenced); returns how many were charged. */
  confirmStarts(leases: readonly Lease[]): Promise<number>;
  /** A transaction whose writes commit only together with the job's fenced completion. */
  beginJobTransaction(): Promise<JobTransaction>;
  findEffect(jobId: string, key: string): Promise<{ found: boolean; result: unknown }>;
  recordEffect(jobId: string, key: string, resultJson: string, attempt: number): Promise<void>;
  scheduleRetry(lease: Lease, error: string, attempt: number, workerId: string, delayMs: number): Promise<boolean>;
  deadLetter(lease: Lease, error: string, attempt: number, workerId: string): Promise<boolean>;
  /**
   * Hands claimed jobs back unstarted, their claim's attempt undone and their place in line kept;
   * returns the ids released (the others' leases were gone).
   */
  release(leases: readonly Lease[]): Promise<string[]>;
  renewLeases(leases: readonly Lease[], leaseMs: number): Promise<RenewalResult[]>;
  /** Runs `work` only in the one process that wins the maintenance lock for this pass. */
  asMaintenanceLeader<T>(work: (store: JobStore) => Promise<T>): Promise<T | null>;
  reapExpiredLeases(limit: number): Promise<ReapedJob[]>;
  getJob(id: string): Promise<JobRecord | null>;
  stats(): Promise<JobStats>;
  listDead(type: string | null, limit: number): Promise<JobRecord[]>;
  retryDead(id: string): Promise<JobRecord | null>;
  cancel(id: string): Promise<CancelResult | null>;
  ping(): Promise<void>;
  /** Makes sure each type has its job_types row (circuit state, claim lock). */
  registerTypes(types: readonly string[]): Promise<void>;
  /** Returns whether this failure opened the circuit. */
  recordCircuitFailure(type: string, failureThreshold: number, cooldownMs: number): Promise<{ opened: boolean }>;
  /** Returns whether this success closed an open or half-open circuit. */
  recordCircuitSuccess(type: string): Promise<{ closed: boolean }>;
  openCircuits(): Promise<CircuitRecord[]>;
  pruneStarts(olderThanMs: number): Promise<number>;
  /** A rate-limited job's handler starts now (its start record moves from claim time to now). */
  markStarted(jobId: string): Promise<void>;
  /**
   * Retention, one chunk of the table in id order: looks at up to `chunk` jobs after id `afterId`
   * and deletes those completed, or cancelled, more than `olderThanMs` ago; a completed job whose
   * enqueueAndWait caller has not read it yet, only once it completed more than `awaitedMs` ago too.
   * Run it in a transaction (the maintenance leader's): the plan that keeps it to the primary key
   * is set for the rest of that transaction.
   */
  pruneFinishedChunk(afterId: string, chunk: number, olderThanMs: number, awaitedMs: number): Promise<PrunedChunk>;
  /** An enqueueAndWait caller has read its completed job: retention may delete it from now on. */
  markResultRead(jobId: string): Promise<void>;
  /** The shared position of the retention walk (maintenance leader only). */
  retentionWalk(): Promise<RetentionWalk>;
  /** Saves the walk's position; it may go on again `restMs` from now (database clock). */
  saveRetentionWalk(walkedTo: string, restMs: number): Promise<void>;
  /** Deletes up to `limit` dead letters older than `olderThanMs`, oldest first; returns the count. */
  pruneDead(olderThanMs: number, limit: number): Promise<number>;
  queueSnapshot(countUpTo: number): Promise<{ depth: number; deadLastHour: number }>;
  depthByType(types: readonly string[], countUpTo: number): Promise<Map<string, number>>;
  /** One heartbeat of this process (null: none, a producer-only process) and its outcome tally, in one statement. */
  heartbeat(worker: WorkerBeat | null, tally: readonly OutcomeTallyRow[]): Promise<void>;
  removeWorker(id: string): Promise<void>;
  workers(): Promise<WorkerRecord[]>;
  /** Whether this call paused it (false: it already was). Every process hears of it. */
  pauseType(type: string): Promise<boolean>;
  /** Whether this call resumed it (false: it was not paused). */
  resumeType(type: string): Promise<boolean>;
  pausedTypes(): Promise<string[]>;
  throughput(minutes: number, type: string | null): Promise<ThroughputMinute[]>;
  /** Maintenance: forgets workers gone for an hour and throughput older than `throughputKeepMs`. */
  pruneOperatorHistory(throughputKeepMs: number): Promise<void>;
  /** Appends an attempt's log lines, keeping the job's last `keep`; see the statement for who may write. */
  appendJobLogs(lease: Lease, workerId: string, lines: readonly JobLogLine[], keep: number): Promise<boolean>;
  /** Stores a running attempt's progress; false once that attempt no longer holds the job. */
  reportProgress(lease: Lease, progressJson: string): Promise<boolean>;
  /** The jobs one job depends on, in id order, with their results. */
  listDependencies(jobId: string): Promise<JobDependency[]>;
  listJobs(query: JobPageQuery): Promise<JobPage>;
  /** Adds or replaces a runtime schedule by name; a changed timetable forgets its last slot. */
  upsertSchedule(schedule: Omit<StoredSchedule, 'lastSlot' | 'updatedAt'>): Promise<StoredSchedule>;
  /** Whether it existed. */
  removeSchedule(name: string): Promise<boolean>;
  listSchedules(): Promise<StoredSchedule[]>;
  /** Records the latest slot each schedule enqueued (never moves one back; not if its timetable has changed since). */
  markScheduleSlots(slots: ReadonlyArray<ScheduleSlot>): Promise<void>;
  /** The latest slot each decorator schedule's type enqueued, while its job's row exists. */
  lastCronSlots(types: readonly string[]): Promise<Map<string, Date>>;
  /** Per type, the age in seconds of the oldest due waiting job (metrics). */
  oldestWaiting(): Promise<Map<string, number>>;
  /** Waiting jobs of the types that are due now. */
  countDue(types: readonly string[]): Promise<number>;
  /** Every dead job (of the type) back to pending, in batches; resolves to how many. */
  retryDeadMany(type: string | null, onProgress?: (done: number) => void): Promise<number>;
  /** Deletes finished jobs in batches; resolves to how many. */
  purge(query: PurgeQuery, onProgress?: (done: number) => void): Promise<number>;
}
