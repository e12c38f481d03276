import type { Pool, PoolClient } from 'pg';
import { isReadOnlyServer, toStoreError } from './driver-errors.js';
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
  const readOnly = watchReadOnlyServer(client);
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
    readOnly.stop();
    // A lost connection is destroyed, not handed out again; so is one whose server takes no writes.
    client.release(lost ?? readOnly.seen);
  }
}

/**
 * Notes whether the server refused a write on `client` as read-only (25006), whichever statement
 * drew it: the caller's own included, whose errors may never reach us. Such a connection stays
 * with a standby or a demoted primary, so it must be closed, not pooled. `stop()` before release.
 * (Statements on the pool need no watch: pg-pool destroys the connection of a failed pool.query.)
 */
export function watchReadOnlyServer(client: PoolClient): { readonly seen: boolean; stop(): void } {
  let seen = false;
  const onServerError = (message: unknown) => {
    if (isReadOnlyServer(message)) seen = true;
  };
  client.connection.on('errorMessage', onServerError);
  return {
    get seen() {
      return seen;
    },
    stop: () => void client.connection.off('errorMessage', onServerError),
  };
}

async function run(client: PoolClient, statement: 'BEGIN' | 'COMMIT'): Promise<void> {
  try {
    await client.query(statement);
  } catch (error) {
    throw toStoreError(error);
  }
}
