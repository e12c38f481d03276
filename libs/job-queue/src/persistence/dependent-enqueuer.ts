import { InvalidJobError } from '../errors/invalid-job.error.js';
import type { DependencySql } from './dependency.sql.js';
import type { EnqueueSql } from './enqueue.sql.js';
import { enqueueColumns, groupColumn } from './job-enqueuer.js';
import type { EnqueuedJob, NewJob } from './job.store.js';
import { FINISHED_STATUSES, type JobStatus } from '../base/job-status.js';
import type { SqlExecutor } from './sql-executor.js';

/** The most jobs one job may depend on (a batch's final job: one statement, whatever the size). */
export const MAX_DEPENDENCIES = 10_000;

const FINISHED: ReadonlySet<JobStatus> = new Set(FINISHED_STATUSES);

interface Dependency {
  type: string;
  status: JobStatus;
}

/**
 * Enqueues a batch in which some jobs depend on others (`dependsOn`), in one transaction the
 * caller provides: it locks the jobs depended on, refuses an id that names no job (nothing
 * written), and inserts each job blocked, pending (all it depends on had completed) or cancelled
 * (one had failed, and it does not run anyway), with its edges. Two statements, whatever the
 * number of jobs or edges.
 */
export class DependentEnqueuer {
  constructor(
    private readonly sql: DependencySql,
    private readonly enqueue: EnqueueSql,
  ) {}

  async insert(jobs: readonly NewJob[], executor: SqlExecutor): Promise<EnqueuedJob[]> {
    const dependencies = await this.lock(jobs, executor);
    const starts = jobs.map((job) => startOf(job, dependencies));
    const edgeOrd: number[] = [];
    const edgeOn: string[] = [];
    const edgeSettled: boolean[] = [];
    jobs.forEach((job, i) => {
      for (const id of job.dependsOn ?? []) {
        edgeOrd.push(i + 1);
        edgeOn.push(id);
        edgeSettled.push(FINISHED.has(dependencies.get(id)!.status));
      }
    });
    const { rows } = await executor.query<{ ord: number; id: string; inserted: boolean }>(this.sql.enqueueDependent, [
      ...enqueueColumns(jobs),
      starts.map((s) => s.status),
      starts.map((s) => s.left),
      jobs.map((j) => (j.dependsOn?.length ? (j.onDependencyFailure ?? 'cancel') : null)),
      starts.map((s) => s.lastError),
      edgeOrd,
      edgeOn,
      edgeSettled,
      groupColumn(jobs),
    ]);
    const results: EnqueuedJob[] = new Array(jobs.length);
    const conflicts: number[] = [];
    for (const row of rows) {
      if (row.inserted) results[row.ord - 1] = { id: row.id, deduplicated: false };
      else conflicts.push(row.ord - 1);
    }
    if (conflicts.length > 0) {
      // The rows that won are committed (ON CONFLICT waited for them), so this read sees them.
      const { rows: existing } = await executor.query<{ id: string; type: string; idempotency_key: string }>(
        this.enqueue.findByIdempotencyKeys,
        [conflicts.map((i) => jobs[i].type), conflicts.map((i) => jobs[i].idempotencyKey)],
      );
      const byKey = new Map(existing.map((row) => [`${row.type}\u0000${row.idempotency_key}`, row.id]));
      for (const i of conflicts) {
        const id = byKey.get(`${jobs[i].type}\u0000${jobs[i].idempotencyKey}`);
        if (!id) throw new Error(`Enqueue could not settle the idempotency key of ${jobs[i].type}: its job was deleted meanwhile; enqueue again.`);
        results[i] = { id, deduplicated: true };
      }
    }
    return results;
  }

  /** Locks every job depended on; refuses the batch when an id names no job. */
  private async lock(jobs: readonly NewJob[], executor: SqlExecutor): Promise<Map<string, Dependency>> {
    const ids = [...new Set(jobs.flatMap((job) => job.dependsOn ?? []))];
    if (ids.length === 0) return new Map();
    const { rows } = await executor.query<{ id: string; found: boolean; type: string | null; status: JobStatus | null }>(
      this.sql.lockDependencies,
      [ids],
    );
    const missing = new Set(rows.filter((row) => !row.found).map((row) => row.id));
    if (missing.size > 0) {
      const job = jobs.find((j) => j.dependsOn?.some((id) => missing.has(id)))!;
      const named = [...missing].slice(0, 5).join(', ');
      throw new InvalidJobError(
        job.dependsOnField ?? 'options.dependsOn',
        `names no existing job: ${named}${missing.size > 5 ? ` and ${missing.size - 5} more` : ''} (enqueue the jobs it depends on first, and pass their ids)`,
      );
    }
    return new Map(rows.map((row) => [row.id, { type: row.type!, status: row.status! }]));
  }
}

/** How a job starts: what it still waits for, or the failed dependency that cancels it. */
function startOf(job: NewJob, dependencies: ReadonlyMap<string, Dependency>): { status: JobStatus; left: number | null; lastError: string | null } {
  if (!job.dependsOn?.length) return { status: 'pending', left: null, lastError: null };
  let left = 0;
  for (const id of job.dependsOn) {
    const dependency = dependencies.get(id)!;
    if (!FINISHED.has(dependency.status)) left++;
    else if (dependency.status !== 'completed' && (job.onDependencyFailure ?? 'cancel') === 'cancel') {
      const word = dependency.status === 'dead' ? 'dead-lettered' : dependency.status;
      return { status: 'cancelled', left: 0, lastError: `dependency ${id} (${dependency.type}) was ${word}` };
    }
  }
  return { status: left > 0 ? 'blocked' : 'pending', left, lastError: null };
}
