import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { JobHandler } from '../src/index.js';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { holdsThroughout, waitFor } from './support/wait-for.js';

const ran: string[] = [];

@Injectable()
class Echo {
  @JobHandler('loss.echo')
  run(_payload: unknown, job: { id: string }) {
    ran.push(job.id);
  }
}

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
    const store = new PostgresJobStore(dataSource, 'job_queue', { prepare: true, synchronousClaims: true });
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

  it('a worker whose LISTEN connection is ended listens again on exactly one connection, and runs what comes', async () => {
    /** The pids of the backends whose last statement was LISTEN (a terminated one may linger a moment). */
    const listening = async (): Promise<number[]> =>
      (
        await db.query(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`,
        )
      ).map((row: { pid: number }) => row.pid);
    // No polling to fall back on within this test: pickups come by notification.
    const worker = await startQueueApp(db.url, { listen: true, pollIntervalMs: 60_000 }, [Echo]);
    try {
      const one = async () => {
        const pids = await listening();
        return pids.length === 1 ? pids : null;
      };
      let [pid] = await waitFor(one, { message: 'the worker to LISTEN' });
      for (let round = 0; round < 3; round++) {
        await db.query(`SELECT pg_terminate_backend($1)`, [pid]);
        // Exactly one listener again, and a new one: not the ended backend still on its way out.
        const again = await waitFor(
          async () => {
            const pids = await listening();
            return pids.length === 1 && pids[0] !== pid ? pids : null;
          },
          { message: 'the worker to LISTEN again, on one new connection' },
        );
        pid = again[0];
      }
      // Settled: still that one, not one more per report of each loss, checked all through 1.5 s.
      await holdsThroughout(1_500, async () => expect(await listening()).toEqual([pid]), 'the listener to stay the one');
      const { id } = await api.producer.enqueue('loss.echo', {});
      await waitFor(() => ran.includes(id), { timeoutMs: 5_000, message: 'the job to run after the reconnects' });
    } finally {
      await worker.close();
    }
  });
});
