import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';

/** The pg pool behind an initialised TypeORM postgres DataSource; the engine's SQL runs on it. */
export function poolOf(dataSource: DataSource): Pool {
  const pool = (dataSource.driver as unknown as { master?: Pool }).master;
  if (!pool || typeof pool.connect !== 'function') {
    throw new Error('auto-job-queue needs an initialised PostgreSQL DataSource (type "postgres").');
  }
  return pool;
}

/** node-postgres's own default pool size, which applies when the DataSource sets none. */
const PG_DEFAULT_POOL_SIZE = 10;

/** How many connections the DataSource's pool may open. */
export function poolSizeOf(dataSource: DataSource): number {
  return (poolOf(dataSource) as { options?: { max?: number } }).options?.max ?? PG_DEFAULT_POOL_SIZE;
}
