import { idArray, leaseTokens, resultsById } from './fenced-batch.js';
import type { JobStatus } from '../base/job-status.js';
import type { Lease, RenewalResult } from './job.store.js';
import type { OutcomeSql } from './outcome.sql.js';
import type { SqlExecutor, SqlResult } from './sql-executor.js';
import type { StatementNamer } from './statement-names.js';

/** completeMany's usual answer: every completion applied. */
const NONE_MISSED: ReadonlySet<string> = new Set();
const NO_LEASES: readonly Lease[] = [];

/**
 * The writes of a running attempt: its outcome, its lease, its start and its effects. Every write
 * after the claim presents the lease token and reports whether it applied.
 */
export class OutcomeWriter {
  /** The completion statements, chosen once: the deleting ones when `retention.completedMs` is 0. */
  private readonly completeSql: string;
  private readonly completeManySql: string;
  private readonly completeManyName: string;
  private readonly completeManyConfirmingSql: string;
  private readonly completeManyConfirmingName: string;

  constructor(
    private readonly executor: SqlExecutor,
    private readonly sql: OutcomeSql,
    private readonly named: StatementNamer,
    deleteOnComplete = false,
  ) {
    this.completeSql = deleteOnComplete ? sql.completeDeleting : sql.complete;
    this.completeManySql = deleteOnComplete ? sql.completeManyDeleting : sql.completeMany;
    this.completeManyName = named(deleteOnComplete ? 'completeManyDeleting' : 'completeMany');
    this.completeManyConfirmingSql = deleteOnComplete ? sql.completeManyDeletingConfirming : sql.completeManyConfirming;
    this.completeManyConfirmingName = named(deleteOnComplete ? 'completeManyDeletingConfirming' : 'completeManyConfirming');
  }

  async complete(lease: Lease, resultJson: string): Promise<boolean> {
    return applied(await this.executor.query(this.completeSql, [lease.id, lease.leaseToken, resultJson]));
  }

  /** `confirms`: none of them among the completions (a row is not updated twice in one statement). */
  async completeMany(
    completions: ReadonlyArray<{ lease: Lease; resultJson: string }>,
    confirms: readonly Lease[] = NO_LEASES,
  ): Promise<ReadonlySet<string>> {
    if (completions.length === 0) {
      if (confirms.length > 0) await this.confirmStarts(confirms);
      return NONE_MISSED;
    }
    const leases = completions.map((c) => c.lease);
    // One token map for both lists: a claim's jobs share its token, so it stays as small.
    const confirming = confirms.length > 0;
    const [others, usual] = leaseTokens(confirming ? [...leases, ...confirms] : leases);
    const params = [idArray(leases), others, resultsById(completions), usual];
    const { rows } = await this.executor.query<{ missed: string | null }>(
      confirming ? this.completeManyConfirmingSql : this.completeManySql,
      confirming ? [...params, idArray(confirms)] : params,
      confirming ? this.completeManyConfirmingName : this.completeManyName,
    );
    // Exactly one row, always: without it, nothing would tell an applied completion from a lost one.
    if (rows.length !== 1) throw new Error(`completeMany returned ${rows.length} rows, expected 1`);
    const { missed } = rows[0];
    return missed ? new Set(missed.split(',')) : NONE_MISSED;
  }

  async confirmStarts(leases: readonly Lease[]): Promise<number> {
    if (leases.length === 0) return 0;
    const [others, usual] = leaseTokens(leases);
    const { rows } = await this.executor.query<{ confirmed: number }>(
      this.sql.confirmStarts,
      [idArray(leases), others, usual],
      this.named('confirmStarts'),
    );
    return rows[0]?.confirmed ?? 0;
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

  async markStarted(jobId: string): Promise<void> {
    await this.executor.query(this.sql.markStarted, [jobId], this.named('markStarted'));
  }

  async findEffect(jobId: string, key: string): Promise<{ found: boolean; result: unknown }> {
    const { rows } = await this.executor.query<{ result: unknown }>(this.sql.findEffect, [jobId, key]);
    return rows.length > 0 ? { found: true, result: rows[0].result } : { found: false, result: undefined };
  }

  async recordEffect(jobId: string, key: string, resultJson: string, attempt: number): Promise<void> {
    await this.executor.query(this.sql.recordEffect, [jobId, key, resultJson, attempt]);
  }
}

/** Whether a `finishing` statement (outcome.sql.ts) applied: the lease was still held. */
export function applied(result: SqlResult<Record<string, unknown>>): boolean {
  return result.rows[0]?.applied === 1;
}
