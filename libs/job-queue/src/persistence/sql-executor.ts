import type { Pool, PoolClient } from 'pg';
import type { EntityManager } from 'typeorm';
import { toStoreError } from './driver-errors.js';

export interface SqlResult<Row> {
  rows: Row[];
  rowCount: number;
}

/**
 * Runs one statement on a pool, a held client, or the caller's TypeORM transaction. A failure of
 * the connection or data the database refuses rejects with the store's typed errors (toStoreError).
 */
export interface SqlExecutor {
  /** `name`: run as a named prepared statement (parsed and planned once per connection). */
  query<Row = Record<string, unknown>>(sql: string, params?: unknown[], name?: string): Promise<SqlResult<Row>>;
  /**
   * The rows as arrays of column values, in the statement's column order: for a statement that
   * returns many rows, so each row is not first built as an object keyed by column name.
   */
  queryArrays(sql: string, params?: unknown[], name?: string): Promise<unknown[][]>;
}

/**
 * Statements on the pool. Hot-path statements are named prepared statements unless `prepare` is
 * off (transaction-mode poolers hand each statement to any server connection).
 */
export function poolExecutor(pool: Pool | PoolClient, prepare: boolean): SqlExecutor {
  return {
    async query<Row>(sql: string, params: unknown[] = [], name?: string) {
      try {
        const result = await pool.query(prepare && name ? { name, text: sql, values: params } : { text: sql, values: params });
        return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
      } catch (error) {
        throw toStoreError(error);
      }
    },
    async queryArrays(sql: string, params: unknown[] = [], name?: string) {
      const query = prepare && name ? { name, text: sql, values: params } : { text: sql, values: params };
      try {
        return (await pool.query<unknown[]>({ ...query, rowMode: 'array' })).rows;
      } catch (error) {
        throw toStoreError(error);
      }
    },
  };
}

/** Uses the manager's own query runner so the statement joins the caller's transaction. */
export function managerExecutor(manager: EntityManager): SqlExecutor {
  return {
    async query<Row>(sql: string, params: unknown[] = []) {
      const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
      try {
        const result = await runner.query(sql, params, true);
        return { rows: (result.records ?? []) as Row[], rowCount: result.affected ?? result.records?.length ?? 0 };
      } catch (error) {
        throw toStoreError(error);
      } finally {
        if (!manager.queryRunner) await runner.release();
      }
    },
    async queryArrays(sql: string, params: unknown[] = []) {
      return (await this.query(sql, params)).rows.map((row) => Object.values(row as Record<string, unknown>));
    },
  };
}
