import type { Pool } from 'pg';
import type { JobStatus } from '../base/job-status.js';
import type { JobLogLine, JobPage, JobPageQuery, Lease, OutcomeTallyRow, PurgeQuery, ThroughputMinute, WorkerBeat, WorkerRecord } from './job.store.js';
import type { AdminSql } from './admin.sql.js';
import type { MaintenanceSql } from './maintenance.sql.js';
import { INDEXED_LIST_STATUSES, type IndexedListStatus, type OperatorSql, type PurgeStatus } from './operator.sql.js';
import { inTransaction } from './pool-transaction.js';
import { toJobRecord } from './row-mapping.js';
import type { SqlExecutor } from './sql-executor.js';

/** Rows a page of a walked list looks at, at most: a page's cost, however sparse its matches. */
const LIST_WALK_ROWS = 5_000;
/** Rows per statement of a bulk retry or purge: each statement holds that many row locks at most. */
const BULK_BATCH = 1_000;

const LIST_STATEMENT: Record<IndexedListStatus, keyof OperatorSql> = {
  pending: 'listPending',
  failed: 'listFailed',
  processing: 'listProcessing',
  dead: 'listDeadPage',
};

const PURGE_STATEMENT: Record<PurgeStatus, keyof OperatorSql> = {
  completed: 'purgeCompleted',
  dead: 'purgeDead',
  cancelled: 'purgeCancelled',
};

/** What operators see and steer beyond single jobs: workers, pauses, throughput, pages, bulk actions. */
export class OperatorQueries {
  constructor(
    private readonly executor: SqlExecutor,
    private readonly sql: OperatorSql,
    /** Borrowed: the walk's planner setting, and the wake-up after a retry. */
    private readonly shared: Pick<MaintenanceSql, 'planWalkInIdOrder'> & Pick<AdminSql, 'notifyNew'>,
    private readonly pool: Pool,
    private readonly prepare: boolean,
  ) {}

  async heartbeat(worker: WorkerBeat | null, tally: readonly OutcomeTallyRow[]): Promise<void> {
    await this.executor.query(this.sql.heartbeat, [
      worker?.id ?? null,
      worker?.host ?? null,
      worker?.pid ?? null,
      worker?.startedAt ?? null,
      worker?.expiresInMs ?? null,
      worker?.types ?? null,
      worker?.concurrency ?? null,
      worker?.inFlight ?? null,
      worker?.draining ?? null,
      tally.map((row) => row.minute),
      tally.map((row) => row.type),
      tally.map((row) => row.completed),
      tally.map((row) => row.failed),
      tally.map((row) => row.dead),
    ]);
  }

  async removeWorker(id: string): Promise<void> {
    await this.executor.query(this.sql.removeWorker, [id]);
  }

  async workers(): Promise<WorkerRecord[]> {
    const { rows } = await this.executor.query<{
      id: string;
      host: string;
      pid: number;
      started_at: Date;
      heartbeat_at: Date;
      types: string[];
      concurrency: number;
      in_flight: number;
      draining: boolean;
    }>(this.sql.listWorkers);
    return rows.map((row) => ({
      id: row.id,
      host: row.host,
      pid: row.pid,
      startedAt: row.started_at,
      heartbeatAt: row.heartbeat_at,
      types: row.types,
      concurrency: row.concurrency,
      inFlight: row.in_flight,
      draining: row.draining,
    }));
  }

  async pause(type: string): Promise<boolean> {
    return (await this.executor.query(this.sql.pauseType, [type])).rowCount > 0;
  }

  async resume(type: string): Promise<boolean> {
    return (await this.executor.query(this.sql.resumeType, [type])).rowCount > 0;
  }

  async pausedTypes(): Promise<string[]> {
    return (await this.executor.query<{ type: string }>(this.sql.pausedTypes)).rows.map((row) => row.type);
  }

  async throughput(minutes: number, type: string | null): Promise<ThroughputMinute[]> {
    const { rows } = await this.executor.query<ThroughputMinute>(this.sql.throughput, [minutes, type]);
    return rows.map((row) => ({ minute: row.minute, completed: row.completed, failed: row.failed, dead: row.dead }));
  }

  async pruneOperatorHistory(throughputKeepMs: number): Promise<void> {
    await this.executor.query(this.sql.pruneOperatorHistory, [throughputKeepMs]);
  }

  /** Whether the write landed: false once this attempt no longer holds the job. */
  async reportProgress(jobId: string, leaseToken: string, progressJson: string): Promise<boolean> {
    return (await this.executor.query(this.sql.reportProgress, [jobId, leaseToken, progressJson])).rowCount === 1;
  }

  /** Whether the lines landed (false: the job is gone, or another worker holds it now). */
  async appendJobLogs(lease: Lease, workerId: string, lines: readonly JobLogLine[], keep: number): Promise<boolean> {
    const { rowCount } = await this.executor.query(this.sql.appendJobLogs, [lease.id, lease.leaseToken, workerId, JSON.stringify(lines), keep]);
    return rowCount === 1;
  }

  async listJobs(query: JobPageQuery): Promise<JobPage> {
    const status = query.status;
    if (status && isIndexed(status)) {
      const { rows } = await this.executor.query(this.sql[LIST_STATEMENT[status]], [query.type, query.before, query.limit]);
      const jobs = rows.map(toJobRecord);
      return { jobs, nextCursor: jobs.length === query.limit ? jobs[jobs.length - 1].id : null };
    }
    const rows = await inTransaction(this.pool, this.prepare, async (executor) => {
      await executor.query(this.shared.planWalkInIdOrder);
      return (
        await executor.query<Record<string, any>>(this.sql.listJobsWalk, [query.type, status ?? null, query.before, query.limit, LIST_WALK_ROWS])
      ).rows;
    });
    const jobs = rows.filter((row) => row.id !== null).map(toJobRecord);
    if (jobs.length === query.limit) return { jobs, nextCursor: jobs[jobs.length - 1].id };
    // A short page: the walk ran out of matches within its rows; go on from where it stopped.
    const { scanned, scanned_to: scannedTo } = rows[0] as { scanned: number; scanned_to: string | null };
    return { jobs, nextCursor: scanned === LIST_WALK_ROWS ? scannedTo : null };
  }

  async retryDeadMany(type: string | null, onProgress?: (done: number) => void): Promise<number> {
    let done = 0;
    for (;;) {
      const { rows } = await this.executor.query<{ retried: number }>(this.sql.retryDeadBatch, [type, BULK_BATCH]);
      done += rows[0].retried;
      if (rows[0].retried > 0) onProgress?.(done);
      if (rows[0].retried < BULK_BATCH) break;
    }
    if (done > 0) await this.executor.query(this.shared.notifyNew);
    return done;
  }

  async purge(query: PurgeQuery, onProgress?: (done: number) => void): Promise<number> {
    let done = 0;
    for (;;) {
      const { rows } = await this.executor.query<{ deleted: number }>(this.sql[PURGE_STATEMENT[query.status]], [query.type, query.olderThanMs, BULK_BATCH]);
      const rowCount = rows[0].deleted;
      done += rowCount;
      if (rowCount > 0) onProgress?.(done);
      if (rowCount < BULK_BATCH) return done;
    }
  }
}

function isIndexed(status: JobStatus): status is IndexedListStatus {
  return (INDEXED_LIST_STATUSES as readonly string[]).includes(status);
}
