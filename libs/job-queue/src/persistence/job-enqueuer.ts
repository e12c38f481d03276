import type { EntityManager } from 'typeorm';
import type { DependentEnqueuer } from './dependent-enqueuer.js';
import type { EnqueueSql } from './enqueue.sql.js';
import type { EnqueuedJob, NewJob } from './job.store.js';
import { isTransactionConflict } from './driver-errors.js';
import { managerExecutor, type SqlExecutor } from './sql-executor.js';
import type { StatementNamer } from './statement-names.js';

/** Tries of an enqueue transaction that a deadlock or serialization failure rolled back. */
const MAX_CONFLICT_RETRIES = 5;

/** Enqueue retries when a conflicting idempotent row vanished between insert and lookup. */
const MAX_ENQUEUE_ROUNDS = 3;

/**
 * Adds jobs, on the pool or in the caller's transaction (`manager`): the leanest insert that fits
 * the batch, and for idempotency keys the row that won each conflict.
 */
export class JobEnqueuer {
  constructor(
    private readonly executor: SqlExecutor,
    private readonly sql: EnqueueSql,
    private readonly named: StatementNamer,
    private readonly dependents: DependentEnqueuer,
    /** Runs `work` in a transaction of its own on the pool. */
    private readonly inTransaction: <T>(work: (executor: SqlExecutor) => Promise<T>) => Promise<T>,
  ) {}

  async enqueue(jobs: readonly NewJob[], manager?: EntityManager): Promise<EnqueuedJob[]> {
    const executor = manager ? managerExecutor(manager) : this.executor;
    if (!jobs.some(isDelayed)) return this.insertAny(jobs, executor, manager);
    const results = await this.insertAny(jobs, executor, manager);
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

  /**
   * A batch that takes more than one statement goes in whole in one transaction (the caller's, or
   * one of its own): one where some job depends on others (the jobs it depends on stay locked
   * until then), or one with debounced jobs beside others. Any other batch is one statement.
   */
  private insertAny(jobs: readonly NewJob[], executor: SqlExecutor, manager: EntityManager | undefined): Promise<EnqueuedJob[]> {
    const severalStatements = jobs.some((job) => job.dependsOn?.length) || (jobs.length > 1 && jobs.some((job) => job.debounceKey));
    if (manager || !severalStatements) return this.insert(jobs, executor, manager === undefined);
    return this.inTransactionRetried((inTransaction) => this.insert(jobs, inTransaction, false));
  }

  /**
   * A transaction of this enqueue's own, run again when a conflict rolled it back. Locking the jobs
   * a batch depends on can deadlock with a worker's completion of them (its rows are locked in
   * the order its plan meets them); the server then rolls one of the two back. Nothing of a
   * rolled-back try remains, so trying again is safe. In the caller's transaction the conflict
   * reaches the caller, whose transaction PostgreSQL has rolled back.
   */
  private async inTransactionRetried<T>(work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.inTransaction(work);
      } catch (error) {
        if (attempt >= MAX_CONFLICT_RETRIES || !isTransactionConflict(error)) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
      }
    }
  }

  private async insert(jobs: readonly NewJob[], executor: SqlExecutor, named: boolean): Promise<EnqueuedJob[]> {
    if (jobs.some((job) => job.debounceKey)) return this.insertWithDebounced(jobs, executor, named);
    await this.expireWindows(jobs, executor);
    if (jobs.some((job) => job.dependsOn?.length)) return this.dependents.insert(jobs, executor);
    if (jobs.every((job) => job.idempotencyKey === null)) return this.insertPlain(jobs, executor, named);
    const results: EnqueuedJob[] = new Array(jobs.length);
    let remaining = jobs.map((job, index) => ({ job, index }));
    for (let round = 0; round < MAX_ENQUEUE_ROUNDS && remaining.length > 0; round++) {
      const batch = remaining.map((entry) => entry.job);
      const { rows } = await executor.query<{ ord: number; id: string; inserted: boolean }>(
        this.sql.enqueue,
        [...enqueueColumns(batch), groupColumn(batch)],
        named ? this.named('enqueue') : undefined,
      );
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

  /** Frees the idempotency keys whose `uniqueForMs` window is over, so this batch can reuse them. */
  private async expireWindows(jobs: readonly NewJob[], executor: SqlExecutor): Promise<void> {
    const windowed = jobs.filter((job) => job.uniqueForMs && job.idempotencyKey !== null);
    if (windowed.length === 0) return;
    await executor.query(this.sql.expireIdempotencyKeys, [
      windowed.map((job) => job.type),
      windowed.map((job) => job.idempotencyKey),
      windowed.map((job) => job.uniqueForMs),
    ]);
  }

  /**
   * A batch with debounced jobs: each of those by its own statement, in input order, the others
   * together, in one transaction (the caller's, or one of insertAny's), so all of it commits or none.
   */
  private async insertWithDebounced(jobs: readonly NewJob[], executor: SqlExecutor, named: boolean): Promise<EnqueuedJob[]> {
    const results: EnqueuedJob[] = new Array(jobs.length);
    const others: number[] = [];
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i];
      if (!job.debounceKey) {
        others.push(i);
        continue;
      }
      const { rows } = await executor.query<{ id: string; debounced: boolean }>(this.sql.enqueueDebounced, [
        job.type,
        job.payloadJson,
        job.priority,
        job.maxAttempts,
        job.maxAttemptsFromJob,
        job.notifyOnFinish,
        job.orderingKey,
        job.delayMs,
        job.traceContext ?? null,
        job.debounceKey,
        job.groupKey ?? null,
      ]);
      results[i] = { id: rows[0].id, deduplicated: false, debounced: rows[0].debounced };
    }
    if (others.length > 0) {
      const inserted = await this.insert(others.map((i) => jobs[i]), executor, named);
      others.forEach((index, n) => (results[index] = inserted[n]));
    }
    return results;
  }

  /** Jobs without idempotency keys: the leanest statement that fits the batch's shape. */
  private async insertPlain(jobs: readonly NewJob[], executor: SqlExecutor, named: boolean): Promise<EnqueuedJob[]> {
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
}

/**
 * The columns of the keyed enqueue statements (enqueue, enqueueDependent: $1–$11), one array
 * each, in their parameter order.
 */
export function enqueueColumns(jobs: readonly NewJob[]): unknown[][] {
  return [
    jobs.map((j) => j.type),
    jobs.map((j) => j.payloadJson),
    jobs.map((j) => j.priority),
    jobs.map((j) => j.maxAttempts),
    jobs.map((j) => j.runAt),
    jobs.map((j) => j.delayMs),
    jobs.map((j) => j.idempotencyKey),
    jobs.map((j) => j.maxAttemptsFromJob),
    jobs.map((j) => j.notifyOnFinish),
    jobs.map((j) => j.orderingKey),
    jobs.map((j) => j.traceContext ?? null),
  ];
}

/** Each job's group (NULL: none): enqueue's $12, enqueueDependent's $19. */
export function groupColumn(jobs: readonly NewJob[]): Array<string | null> {
  return jobs.map((j) => j.groupKey ?? null);
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

function keyOf(type: string, key: string): string {
  return `${type}\u0000${key}`;
}

/** Columns after type and payload, in enqueueOne's and enqueueUniform's parameter order ($3–$11). */
function sharedColumns(job: NewJob): unknown[] {
  return [
    job.priority,
    job.maxAttempts,
    job.maxAttemptsFromJob,
    job.notifyOnFinish,
    job.orderingKey,
    job.runAt,
    job.runAt ? 0 : job.delayMs,
    job.traceContext ?? null,
    job.groupKey ?? null,
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
    (a.runAt ? 0 : a.delayMs) === (b.runAt ? 0 : b.delayMs) &&
    (a.traceContext ?? null) === (b.traceContext ?? null) &&
    (a.groupKey ?? null) === (b.groupKey ?? null)
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
  if (job.traceContext) json += `,"tc":${JSON.stringify(job.traceContext)}`;
  if (job.groupKey) json += `,"g":${JSON.stringify(job.groupKey)}`;
  return `${json}}`;
}
