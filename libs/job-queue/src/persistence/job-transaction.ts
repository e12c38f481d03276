import type { PoolClient } from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import { sendCancelRequest, type BackendAddress } from './backend-cancel-request.js';
import { toStoreError } from './driver-errors.js';
import type { JobTransaction } from './job.store.js';
import { applied } from './outcome-writer.js';
import { watchReadOnlyServer } from './pool-transaction.js';
import { managerExecutor } from './sql-executor.js';

/**
 * Opens a transactional handler's transaction on a TypeORM query runner of its own. `completeSql`:
 * the fenced completion (outcome.sql.ts), run inside it. Opening, committing and rolling back
 * reject with the store's typed errors when the connection fails.
 */
export async function beginJobTransaction(dataSource: DataSource, completeSql: string): Promise<JobTransaction> {
  const queryRunner = dataSource.createQueryRunner();
  let connection: PoolClient;
  try {
    connection = (await queryRunner.connect()) as PoolClient;
    // Whatever the DataSource's isolationLevel: the lease keeper renews the job's row while the
    // handler runs, and under REPEATABLE READ or SERIALIZABLE the completion's update of that
    // row would then fail with a serialization error, attempt after attempt.
    await queryRunner.startTransaction('READ COMMITTED');
  } catch (error) {
    await queryRunner.release();
    throw toStoreError(error);
  }
  const executor = managerExecutor(queryRunner.manager);
  const readOnly = watchReadOnlyServer(connection);
  let open = true;
  const finish = async (action: () => Promise<void>) => {
    if (!open) return;
    open = false;
    try {
      await action();
    } catch (error) {
      throw toStoreError(error);
    } finally {
      readOnly.stop();
      // Ended, the pool drops it: a connection to a server that takes no writes would fail the next job too.
      if (readOnly.seen) connection.end().catch(() => undefined);
      await queryRunner.release();
    }
  };
  return {
    manager: queryRunner.manager,
    async complete(lease, resultJson) {
      return applied(await executor.query(completeSql, [lease.id, lease.leaseToken, resultJson]));
    },
    commit: () => finish(() => queryRunner.commitTransaction()),
    rollback: () => finish(() => rollback(queryRunner)),
    abandon() {
      if (!open) return;
      open = false;
      readOnly.stop();
      // The connection ends first: statements not yet run on it fail, and the server rolls the
      // transaction back. A statement still running there is cancelled, or its backend (outside
      // the pool's count by then) would hold its locks until it ended. Then the runner is
      // released, so the handler's next statement throws, and the pool drops the ended
      // connection rather than hand it out again.
      connection.end().catch(() => undefined);
      sendCancelRequest(connection as BackendAddress);
      void queryRunner.release();
    },
  };
}

async function rollback(queryRunner: QueryRunner): Promise<void> {
  if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction();
}
