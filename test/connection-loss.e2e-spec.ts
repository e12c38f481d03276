import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/** Connections the server ends under the engine (a restart, a failover, pg_terminate_backend). */
describe('when the server ends a connection the engine is using', () => {
  let db: TestDatabase;
  let api: QueueApp;
  let dataSource: DataSource;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    // Creates the schema; producer-only, so it holds no transaction of its own.
    api = await startQueueApp(db.url, { runWorker: false });
    dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 2 } });
    await dataSource.initialize();
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await api?.close();
    await db?.drop();
  });

  /** Ends every backend of the test database that is idle inside a transaction. */
  async function terminateIdleInTransaction(): Promise<number> {
    const [{ n }] = await db.query(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND state = 'idle in transaction'`,
    );
    return n;
  }

  it('a maintenance transaction fails with an error, the process goes on, and the next one works', async () => {
    const store = new PostgresJobStore(dataSource, 'job_queue');
    let terminated = 0;
    const pass = store.asMaintenanceLeader(async () => {
      terminated = await terminateIdleInTransaction();
      // Long enough for the server's notice of the ended session to reach the client.
      await new Promise((resolve) => setTimeout(resolve, 200));
      return 'done';
    });
    await expect(pass).rejects.toThrow();
    expect(terminated).toBe(1);
    // The ended connection was dropped, not handed out again.
    await expect(store.asMaintenanceLeader(async () => 'again')).resolves.toBe('again');
    await expect(store.asMaintenanceLeader(async () => 'and again')).resolves.toBe('and again');
  });
});
