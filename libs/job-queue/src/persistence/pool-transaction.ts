import type { Pool, PoolClient } from 'pg';
import { toStoreError } from './driver-errors.js';
import { poolExecutor, type SqlExecutor } from './sql-executor.js';

/**
 * Runs `work` on one pooled connection inside BEGIN … COMMIT, rolled back if it throws. Failures
 * of the connection, BEGIN and COMMIT reject with the store's typed errors, and so do the
 * statements `work` runs on the executor; what `work` itself throws passes unchanged.
 */
export async function inTransaction<T>(pool: Pool, prepare: boolean, work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw toStoreError(error);
  }
  // pg-pool listens for a client's errors only while the client is idle in the pool. Checked
  // out, a connection lost (the server restarted, the backend terminated) would emit 'error'
  // to no one, and Node would end the process for it.
  let lost: Error | undefined;
  const onError = (error: Error) => (lost ??= error);
  client.on('error', onError);
  let failed = true;
  try {
    await run(client, 'BEGIN');
    const result = await work(poolExecutor(client, prepare));
    await run(client, 'COMMIT');
    failed = false;
    return result;
  } finally {
    if (failed && !lost) await client.query('ROLLBACK').catch(() => undefined);
    client.off('error', onError);
    // A lost connection is destroyed, not handed out again.
    client.release(lost);
  }
}

async function run(client: PoolClient, statement: 'BEGIN' | 'COMMIT'): Promise<void> {
  try {
    await client.query(statement);
  } catch (error) {
    throw toStoreError(error);
  }
}
