import { StoreUnavailableError } from '../errors/store-unavailable.error.js';
import type { AdminSql } from './admin.sql.js';
import type { JobRecord } from './job-record.js';
import { JOB_STATUSES, type JobStatus } from '../base/job-status.js';
import type { CancelResult, JobCounts, JobStats } from './job.store.js';
import { toJobRecord } from './row-mapping.js';
import type { SqlExecutor } from './sql-executor.js';

/** What the jobs table's bigint id column can hold: anything else names no job. */
const BIGINT_ID = /^[1-9][0-9]{0,18}$/;

/** The operator's reads and actions on single jobs and dead letters, and the health numbers. */
export class AdminQueries {
  constructor(
    private readonly executor: SqlExecutor,
    private readonly sql: AdminSql,
  ) {}

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

  async queueSnapshot(countUpTo: number): Promise<{ depth: number; deadLastHour: number }> {
    const { rows } = await this.executor.query<{ depth: number; dead_last_hour: number; read_only: boolean }>(this.sql.queueSnapshot, [
      countUpTo,
    ]);
    // A standby (or a primary being failed over) answers reads but refuses every write: readiness must not call it up.
    if (rows[0].read_only) throw new StoreUnavailableError(new Error('the server accepts no writes (a standby, or a failover under way)'));
    return { depth: rows[0].depth, deadLastHour: rows[0].dead_last_hour };
  }

  async oldestWaiting(): Promise<Map<string, number>> {
    const { rows } = await this.executor.query<{ type: string; age_seconds: number }>(this.sql.oldestWaiting);
    return new Map(rows.map((row) => [row.type, row.age_seconds]));
  }

  async countDue(types: readonly string[]): Promise<number> {
    return (await this.executor.query<{ due: number }>(this.sql.countDue, [types])).rows[0].due;
  }

  async depthByType(types: readonly string[], countUpTo: number): Promise<Map<string, number>> {
    if (types.length === 0) return new Map();
    const { rows } = await this.executor.query<{ type: string; depth: number }>(this.sql.depthByType, [types, countUpTo]);
    return new Map(rows.map((row) => [row.type, row.depth]));
  }
}

function emptyCounts(): JobCounts {
  return Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as unknown as JobCounts;
}
