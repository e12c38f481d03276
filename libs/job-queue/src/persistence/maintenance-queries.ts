import type { Pool } from 'pg';
import type { CircuitSql } from './circuit.sql.js';
import type { JobStatus } from '../base/job-status.js';
import type { CircuitRecord, PrunedChunk, ReapedJob, RetentionWalk } from './job.store.js';
import type { MaintenanceSql } from './maintenance.sql.js';
import { inTransaction } from './pool-transaction.js';
import type { SqlExecutor } from './sql-executor.js';

/** The maintenance leader's lock, reaping and retention, and the job types' circuit breakers. */
export class MaintenanceQueries {
  constructor(
    private readonly executor: SqlExecutor,
    private readonly sql: MaintenanceSql,
    private readonly circuits: CircuitSql,
  ) {}

  /**
   * Runs `work` in a transaction of its own if it wins the maintenance lock, which the commit
   * releases; null when another process holds it for this pass.
   */
  asLeader<T>(pool: Pool, prepare: boolean, work: (executor: SqlExecutor) => Promise<T>): Promise<T | null> {
    return inTransaction(pool, prepare, async (executor) => {
      const { rows } = await executor.query<{ acquired: boolean }>(this.sql.tryMaintenanceLock);
      if (!rows[0]?.acquired) return null;
      return work(executor);
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

  async pruneStarts(olderThanMs: number): Promise<number> {
    return (await this.executor.query(this.sql.pruneStarts, [olderThanMs])).rowCount;
  }

  async pruneFinishedChunk(afterId: string, chunk: number, olderThanMs: number, awaitedMs: number): Promise<PrunedChunk> {
    await this.executor.query(this.sql.planWalkInIdOrder);
    const { rows } = await this.executor.query<{
      scanned: number;
      last_id: string | null;
      reached_recent: boolean;
      completed: number;
      cancelled: number;
    }>(this.sql.pruneFinishedChunk, [afterId, chunk, olderThanMs, awaitedMs]);
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

  async markResultRead(jobId: string): Promise<void> {
    await this.executor.query(this.sql.markResultRead, [jobId]);
  }

  async pruneDead(olderThanMs: number, limit: number): Promise<number> {
    return (await this.executor.query<{ deleted: number }>(this.sql.pruneDead, [olderThanMs, limit])).rows[0].deleted;
  }

  async registerTypes(types: readonly string[]): Promise<void> {
    if (types.length > 0) await this.executor.query(this.circuits.registerTypes, [types]);
  }

  async recordCircuitFailure(type: string, failureThreshold: number, cooldownMs: number): Promise<{ opened: boolean }> {
    const { rows } = await this.executor.query<{ previous_state: string; state: string }>(this.circuits.recordCircuitFailure, [
      type,
      failureThreshold,
      cooldownMs,
    ]);
    return { opened: rows[0]?.state === 'open' && rows[0]?.previous_state !== 'open' };
  }

  async recordCircuitSuccess(type: string): Promise<{ closed: boolean }> {
    const { rows } = await this.executor.query<{ previous_state: string }>(this.circuits.recordCircuitSuccess, [type]);
    return { closed: rows.length > 0 && rows[0].previous_state !== 'closed' };
  }

  async openCircuits(): Promise<CircuitRecord[]> {
    const { rows } = await this.executor.query<Record<string, any>>(this.circuits.openCircuits);
    return rows.map((row) => ({
      type: row.type,
      state: row.circuit_state,
      consecutiveFailures: row.consecutive_failures,
      openedAt: row.opened_at,
      reopenAt: row.reopen_at,
    }));
  }
}
