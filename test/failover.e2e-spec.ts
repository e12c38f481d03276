import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../src/index.js';
import { poolOf } from '../libs/job-queue/src/persistence/pool-of.js';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { Cleanup } from './support/cleanup.js';
import { postgresBinDir, startPostgresCluster, type PostgresCluster } from './support/postgres-cluster.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { skipWithout } from './support/service-process.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { holdsThroughout, waitFor } from './support/wait-for.js';

const listen = process.env.AJQ_TEST_LISTEN !== 'false';

/** The SQLSTATE a server in recovery (or one set read-only) answers a write with. */
const READ_ONLY = '25006';
const refusedAsReadOnly = (error: unknown) =>
  error instanceof StoreUnavailableError && (error.cause as { code?: string } | undefined)?.code === READ_ONLY;

/**
 * A primary with a synchronous standby, both reached through one address (the proxy, as a
 * Kubernetes Service or a virtual IP would be): the primary is killed, the standby promoted and
 * the address moved to it, while workers run and a producer enqueues.
 */
describe.skipIf(skipWithout('PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup)', postgresBinDir()))(
  'a primary failover to a synchronous standby',
  () => {
    const cleanup = new Cleanup();
    let cluster: PostgresCluster;
    let proxy: TcpProxy;
    /** The queue's database through the proxy: whichever server the address leads to. */
    let url: string;
    let api: QueueApp;

    beforeAll(async () => {
      cluster = cleanup.add('the cluster', await startPostgresCluster(), (c) => c.stop());
      proxy = cleanup.add('the proxy', await startTcpProxy(cluster.primary.port), (p) => p.close());
      url = proxy.urlFor(cluster.primary.url);
      // Producer-only, in this process: it migrates the schema (on the primary, so the standby has it too) and enqueues.
      api = cleanup.add('the producer app', await startQueueApp(url, { runWorker: false }), (app) => app.close());
      await cluster.primary.query(`CREATE TABLE failover_probe (n int)`);
    }, 60_000);

    afterAll(() => cleanup.run());

    /** Sends new connections to `port`; with `dropOpen`, ends the open ones too (their server is gone). */
    const pointAt = async (port: number, pool: { totalCount: number } | null, dropOpen: boolean) => {
      proxy.switchTarget(port);
      if (!dropOpen) return;
      proxy.dropConnections();
      if (pool) await waitFor(() => pool.totalCount === 0, { message: 'the pool to let go of its ended connections' });
    };

    it('a connection that reached a server in recovery is closed, not pooled: the next statement, once the address leads to a primary, succeeds', async () => {
      // One connection in the pool, so a connection to the standby handed out again would fail the next call.
      const dataSource = new DataSource({ type: 'postgres', url, extra: { max: 1 } });
      await dataSource.initialize();
      try {
        const store = new PostgresJobStore(dataSource, 'job_queue', { prepare: listen, synchronousClaims: true });
        const pool = poolOf(dataSource);
        /** How each path reports the refusal: the store's typed error, or the handler's own statement's error. */
        const storeRefusal = refusedAsReadOnly;
        const handlerRefusal = (error: unknown) => (error as { driverError?: { code?: string } }).driverError?.code === READ_ONLY;
        const paths: Array<[string, () => Promise<unknown>, (error: unknown) => boolean]> = [
          ['a statement on the pool', () => store.registerTypes(['failover.probe']), storeRefusal],
          ['the maintenance leader’s transaction', () => store.asMaintenanceLeader((leader) => leader.reapExpiredLeases(10)), storeRefusal],
          [
            'a transactional handler’s transaction',
            async () => {
              const tx = await store.beginJobTransaction();
              try {
                await tx.manager.query(`INSERT INTO failover_probe (n) VALUES (1)`);
              } finally {
                await tx.rollback();
              }
            },
            handlerRefusal,
          ],
        ];
        for (const [name, write, refusedAsExpected] of paths) {
          await expect(write(), `${name} on the primary`).resolves.not.toThrow();
          // The address now leads to the standby, still in recovery (the old connections went with the switch).
          await pointAt(cluster.standby.port, pool, true);
          const refused = await write().then(
            () => null,
            (error: unknown) => error,
          );
          expect(refusedAsExpected(refused), `${name} on the standby: ${String(refused)}`).toBe(true);
          // Back to the primary, for new connections only: a pooled connection to the standby would stay there.
          await pointAt(cluster.primary.port, pool, false);
          await expect(write(), `${name} right after`).resolves.not.toThrow();
          expect(proxy.openConnections(cluster.standby.port), `${name}: connections left open to the standby`).toBe(0);
        }
      } finally {
        proxy.switchTarget(cluster.primary.port);
        await dataSource.destroy();
      }
    });

    it('kill the primary, promote the standby, move the address: every acknowledged job completes, transactional effects once each, no process exits, readiness comes back', async () => {
      const workers: ChildWorker[] = [];
      for (const name of ['a', 'b']) {
        workers.push(
          cleanup.add(
            `worker ${name}`,
            await spawnWorker(
              { url, workerId: `failover-${name}`, concurrency: 4, pollIntervalMs: 100, leaseMs: 4_000, drainTimeoutMs: 2_000, httpPort: 0 },
              { AJQ_FIXTURE_EXACTLY_ONCE: '1' },
            ),
            (w) => w.stop(5_000),
          ),
        );
      }
      const ready = async (worker: ChildWorker) => (await fetch(`http://127.0.0.1:${worker.port}/health/ready`)).status === 200;
      const everyReady = async (want: boolean) => (await Promise.all(workers.map(ready))).every((r) => r === want);

      // A producer that records every enqueue the database acknowledged, and every refusal.
      const acknowledged: string[] = [];
      const refusals: unknown[] = [];
      let producing = true;
      const producer = (async () => {
        const deadline = performance.now() + 100_000;
        for (let n = 0; producing && n < 4_000 && performance.now() < deadline; n++) {
          try {
            acknowledged.push((await api.producer.enqueue('fixture.tx-row', { ms: 20 + (n % 4) * 30 })).id);
          } catch (error) {
            refusals.push(error);
          }
          // Pacing of the load, not a wait for a condition: about 40 jobs a second.
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      })();

      try {
        const completed = async () =>
          (await cluster.primary.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE status = 'completed'`))[0].n;
        await waitFor(async () => acknowledged.length >= 60 && (await completed()) >= 40 && (await everyReady(true)), {
          timeoutMs: 30_000,
          message: 'steady enqueue and processing',
        });

        await cluster.crash(cluster.primary);
        const apiReady = async () => (await api.health.isReady())['job-queue'].status === 'up';
        await waitFor(async () => (await everyReady(false)) && !(await apiReady()), { message: 'the workers and the producer to report not ready' });

        // The address moves to the standby before its promotion is through: writes there are refused as read-only.
        const beforeSwitch = refusals.length;
        await pointAt(cluster.standby.port, null, true);
        await waitFor(() => refusals.slice(beforeSwitch).some(refusedAsReadOnly), {
          message: 'an enqueue refused by the standby in recovery',
        });
        // The standby answers reads, but readiness must not call a server that takes no writes up.
        await holdsThroughout(
          2_500,
          async () => {
            expect(await apiReady(), 'the producer ready while the address leads to a read-only standby').toBe(false);
            expect(await everyReady(false), 'a worker ready while the address leads to a read-only standby').toBe(true);
          },
          'readiness to stay down while the address leads to the standby',
        );

        const acknowledgedBeforePromotion = acknowledged.length;
        await cluster.promote(cluster.standby);
        await waitFor(async () => acknowledged.length >= acknowledgedBeforePromotion + 40 && (await everyReady(true)) && (await apiReady()), {
          timeoutMs: 30_000,
          message: 'enqueues acknowledged again, and the workers and the producer ready',
        });
      } finally {
        producing = false;
        await producer;
      }

      const newPrimary = cluster.standby;
      await waitFor(
        async () =>
          (await newPrimary.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE status <> 'completed'`))[0].n === 0,
        { timeoutMs: 45_000, intervalMs: 200, message: 'every job on the new primary to complete' },
      );

      // Every acknowledged enqueue survived the failover (a refused one may have committed too: it is there, and ran).
      const [found] = await newPrimary.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = ANY($1::bigint[])`, [
        acknowledged,
      ]);
      expect(found.n).toBe(acknowledged.length);
      // Each completed job's transactional effect is there exactly once, and nothing else is.
      const effects = await newPrimary.query<{ id: string; n: number }>(
        `SELECT j.id::text AS id, count(b.id)::int AS n FROM job_queue.jobs j LEFT JOIN fixture_business b ON b.job_id = j.id
         GROUP BY j.id HAVING count(b.id) <> 1`,
      );
      expect(effects).toEqual([]);
      const [orphans] = await newPrimary.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM fixture_business b WHERE NOT EXISTS (SELECT 1 FROM job_queue.jobs j WHERE j.id = b.job_id)`,
      );
      expect(orphans.n).toBe(0);
      // The producer saw only the typed error while the database was away or read-only.
      expect(refusals.filter((error) => !(error instanceof StoreUnavailableError))).toEqual([]);
      expect(refusals.length).toBeGreaterThan(0);
      for (const worker of workers) {
        expect(worker.process.exitCode, worker.output()).toBeNull();
        expect(worker.process.signalCode, worker.output()).toBeNull();
      }
    }, 120_000);
  },
);
