import { Inject, Injectable } from '@nestjs/common';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler, type JobContext, type JobQueueEvent } from '../src/index.js';
import { EXACTLY_ONCE_DDL } from './fixtures/exactly-once-handlers.js';
import { INVOCATIONS_DDL } from './fixtures/fixture-handlers.js';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { Cleanup } from './support/cleanup.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { sampleWhile, waitFor } from './support/wait-for.js';

const CUT_OFF = 'cut-off';
const LEASE_MS = 2_000;

/** What the cut-off worker's handler shares with the test: which jobs it has started, and the gates that hold them. */
class Holds {
  readonly started = new Set<string>();
  /** What each held job's handler saw of its write after the gate: 'written', or the error. */
  readonly lateWrites = new Map<string, string>();
  private readonly gates = new Map<string, { open: Promise<void>; release: () => void }>();

  gate(name: string) {
    let gate = this.gates.get(name);
    if (!gate) {
      let release!: () => void;
      const open = new Promise<void>((resolve) => (release = resolve));
      gate = { open, release };
      this.gates.set(name, gate);
    }
    return gate;
  }

  openAll() {
    for (const gate of this.gates.values()) gate.release();
  }
}
const HOLDS = Symbol('HOLDS');

const HELD = 'partition.held';

/** The cut-off leader's handler: not transactional; it runs until the test opens its gate. */
@Injectable()
class LeaderHandlers {
  constructor(@Inject(HOLDS) private readonly holds: Holds) {}

  @JobHandler(HELD, { maxAttempts: 5 })
  async run(_payload: unknown, job: JobContext) {
    this.holds.started.add(job.id);
    await this.holds.gate(HELD).open;
    return { attempt: job.attempt };
  }
}

/**
 * The maintenance leader's lock on this database, as pg_try_advisory_xact_lock(19025,
 * hashtext('job_queue')) takes it (two int4 keys: classid, objid, objsubid 2), with its holder's
 * session.
 */
const MAINTENANCE_LOCK_HOLDER = `
  SELECT a.pid, a.state, a.wait_event_type, pg_blocking_pids(a.pid) AS blocked_by, a.query
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = 19025 AND l.objid = hashtext('job_queue')::oid`;

/** Holds the `hold` gate, ignoring job.signal (a handler that keeps going), then writes once more. */
interface CutOffPayload {
  hold?: string;
  /** After the gate: a second write in the job's transaction. */
  writeLate?: boolean;
}

/**
 * The cut-off host's handler for `fixture.tx-row` (the fixture workers run the same type): one
 * business row per run in the job's transaction, as the fixture's does, under its own worker id.
 */
@Injectable()
class CutOffHandlers {
  constructor(@Inject(HOLDS) private readonly holds: Holds) {}

  @JobHandler('fixture.tx-row', { transactional: true, maxAttempts: 20, baseDelayMs: 50, maxDelayMs: 200 })
  async run(payload: CutOffPayload, job: JobContext) {
    const insert = () =>
      job.manager!.query(`INSERT INTO fixture_business (job_id, worker_id, attempt) VALUES ($1, $2, $3)`, [job.id, CUT_OFF, job.attempt]);
    await insert();
    if (payload.hold) {
      this.holds.started.add(job.id);
      await this.holds.gate(payload.hold).open;
      if (payload.writeLate) {
        await insert().then(
          () => this.holds.lateWrites.set(job.id, 'written'),
          (error: unknown) => this.holds.lateWrites.set(job.id, String(error)),
        );
      }
    }
    return { worker: CUT_OFF, attempt: job.attempt };
  }
}

/**
 * A worker host whose traffic to the database stops, both ways, without a reset (a network
 * partition), while it runs transactional jobs. The proxy between it and the server stands for
 * the network: it holds every byte until the link heals.
 */
describe('a worker host cut off from the database mid-job', () => {
  const cleanup = new Cleanup();
  let db: TestDatabase;
  let api: QueueApp;
  let proxy: TcpProxy;

  beforeAll(async () => {
    db = cleanup.add('the test database', await createTestDatabase(inject('adminUrl')), (d) => d.drop());
    api = cleanup.add('the producer app', await startQueueApp(db.url, { runWorker: false }), (app) => app.close());
    await db.query(INVOCATIONS_DDL);
    await db.query(EXACTLY_ONCE_DDL);
    const server = new URL(db.url);
    // The proxy sends traffic to loopback only.
    expect(['127.0.0.1', 'localhost'], 'the test server is on this machine').toContain(server.hostname);
    proxy = cleanup.add('the proxy', await startTcpProxy(Number(server.port || 5432)), (p) => p.close());
  });

  afterAll(() => cleanup.run());

  it('the others finish its jobs after the lease; when the link heals its late writes change nothing, and it rejoins', async () => {
    const holds = new Holds();
    const cutOff = cleanup.add(
      'the cut-off worker',
      await startQueueApp(
        proxy.urlFor(db.url),
        {
          workerId: CUT_OFF,
          leaseMs: LEASE_MS,
          concurrency: 4,
          pollIntervalMs: 100,
          drainTimeoutMs: 2_000,
          // Kept out of maintenance, so the cut cannot fall inside its maintenance transaction:
          // the leader's lock would then be held until the server ends that idle transaction
          // (10 s), delaying the reaping this test waits for. The next test covers that case.
          maintenanceIntervalMs: 3_600_000,
        },
        [CutOffHandlers, { provide: HOLDS, useValue: holds }],
      ),
      (app) => app.close(),
    );
    // Runs before the worker's close if the test fails mid-cut: a close would wait on the held bytes.
    cleanup.add('the partition', proxy, (p) => {
      p.heal();
      holds.openAll();
    });
    const events: JobQueueEvent[] = [];
    const subscription = cleanup.add('the event subscription', cutOff.events.events$.subscribe((event) => events.push(event)), (s) =>
      s.unsubscribe(),
    );

    // Two handlers will return during the cut (their completion then waits in the partition); two
    // run on until after the others finished their jobs, then try a second write.
    const jobs = await api.producer.enqueueMany([
      { type: 'fixture.tx-row', payload: { hold: 'returns' } },
      { type: 'fixture.tx-row', payload: { hold: 'returns' } },
      { type: 'fixture.tx-row', payload: { hold: 'runs-on', writeLate: true } },
      { type: 'fixture.tx-row', payload: { hold: 'runs-on', writeLate: true } },
    ]);
    const ids = jobs.map((job) => job.id);
    await waitFor(() => ids.every((id) => holds.started.has(id)), { message: 'the cut-off worker to run all four' });

    proxy.cut();
    const liveness = sampleWhile(async () => (await cutOff.health.isAlive())['job-queue'].status, { intervalMs: 100 });
    holds.gate('returns').release();

    // The other worker, on a link of its own.
    const other: ChildWorker = cleanup.add(
      'the other worker',
      await spawnWorker({ url: db.url, workerId: 'other', leaseMs: LEASE_MS, concurrency: 4, pollIntervalMs: 100 }, { AJQ_FIXTURE_EXACTLY_ONCE: '1' }),
      (w) => w.stop(),
    );
    const jobRows = () =>
      db.query<{ id: string; status: string; worker_id: string }>(
        `SELECT id::text AS id, status, worker_id FROM job_queue.jobs WHERE id = ANY($1::bigint[]) ORDER BY id`,
        [ids],
      );
    await waitFor(async () => (await jobRows()).every((row) => row.status === 'completed'), {
      timeoutMs: 20_000,
      message: 'the other worker to finish the cut-off worker’s jobs after their leases',
    });
    expect((await jobRows()).map((row) => row.worker_id)).toEqual(['other', 'other', 'other', 'other']);

    // The held handlers go on, still cut off, and write again: nothing of it may land.
    holds.gate('runs-on').release();
    await waitFor(() => holds.lateWrites.size === 2, { message: 'the late writes to be tried' });
    const alive = await liveness.stop();
    expect(new Set(alive), 'the cut-off worker’s liveness during the cut').toEqual(new Set(['up']));

    // The attempts that ran on are over for the cut-off worker; those whose handlers returned
    // during the cut are still waiting for their completions' answer, held in the partition.
    const leaseLost = () => events.filter((event) => event.kind === 'lease-lost').map((event) => event.jobId!);
    await waitFor(() => leaseLost().length === 2, { message: 'lease-lost for the jobs that ran on' });
    expect(leaseLost().sort()).toEqual([ids[2], ids[3]].sort());

    proxy.heal();
    // Its held bytes reach the server now: the fenced completions find the jobs completed by the
    // other worker, and the abandoned transactions end with their connections.
    await waitFor(async () => (await cutOff.health.isReady())['job-queue'].inFlight === 0, {
      timeoutMs: 20_000,
      message: 'the cut-off worker to settle its attempts',
    });
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
          )
        )[0].n === 0,
      { message: 'no transaction of the cut-off worker left open on the server' },
    );
    // Now the held completions have been answered: fenced out, as the jobs were completed by the other worker.
    await waitFor(() => leaseLost().length === 4, { message: 'lease-lost for the completions held in the partition' });
    expect(leaseLost().sort()).toEqual([...ids].sort());
    expect(events.filter((event) => event.kind === 'completed' && ids.includes(event.jobId!))).toEqual([]);

    // Each job's transactional effect exactly once: the other worker's.
    const effects = await db.query<{ job_id: string; worker_id: string }>(
      `SELECT job_id::text AS job_id, worker_id FROM fixture_business WHERE job_id = ANY($1::bigint[]) ORDER BY job_id`,
      [ids],
    );
    expect(effects).toEqual(ids.map((id) => ({ job_id: id, worker_id: 'other' })));
    expect((await jobRows()).map((row) => row.status)).toEqual(['completed', 'completed', 'completed', 'completed']);

    // It rejoins: with the other worker gone, it runs what comes, through the healed link.
    await other.stop();
    const after = (await api.producer.enqueueMany(Array.from({ length: 5 }, () => ({ type: 'fixture.tx-row', payload: {} })))).map((r) => r.id);
    await waitFor(
      async () =>
        (
          await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'completed' AND worker_id = $2`, [
            after,
            CUT_OFF,
          ])
        )[0].n === 5,
      { timeoutMs: 20_000, message: 'the rejoined worker to complete new jobs' },
    );
    const [rejoined] = await db.query(`SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS jobs FROM fixture_business WHERE job_id = ANY($1::bigint[])`, [
      after,
    ]);
    expect(rejoined).toEqual({ n: 5, jobs: 5 });
    subscription.unsubscribe();
  }, 60_000);

  it('a maintenance leader cut off mid-pass loses its lock after 10 s idle: another process reaps its expired lease', async () => {
    const holds = new Holds();
    // The barrier: the test holds the retention walk's row, which the leader's pass writes last
    // (saveRetentionWalk), so the leader is inside its pruning transaction, maintenance lock held,
    // for as long as the test wants. The walk is made due first, so the pass goes as far as that write.
    await db.query(`UPDATE job_queue.retention_walk SET rest_until = '-infinity'`);
    const barrier = new pg.Client({ connectionString: db.url });
    await barrier.connect();
    let barrierHeld = true;
    // Ended before the leader's close too: a close waits for the pass, which waits on the barrier.
    const endBarrier = async () => {
      if (barrierHeld) {
        barrierHeld = false;
        await barrier.end();
      }
    };
    cleanup.add('the barrier', barrier, endBarrier);
    await barrier.query('BEGIN');
    await barrier.query('SELECT 1 FROM job_queue.retention_walk FOR UPDATE');
    const [{ pid: barrierPid }] = (await barrier.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;

    // A: maintenance every 200 ms, through the proxy; the only process here that runs maintenance.
    cleanup.add(
      'the cut-off leader',
      await startQueueApp(
        proxy.urlFor(db.url),
        { workerId: 'cut-off-leader', leaseMs: LEASE_MS, maintenanceIntervalMs: 200, pollIntervalMs: 100, drainTimeoutMs: 2_000 },
        [LeaderHandlers, { provide: HOLDS, useValue: holds }],
      ),
      (app) => app.close(),
    );
    // Runs before the leader's close if the test fails mid-cut: a close would wait on the held bytes.
    cleanup.add('the leader’s partition', proxy, (p) => {
      p.heal();
      holds.openAll();
      return endBarrier();
    });
    // A job of the leader's, whose lease can only expire once the leader is cut off.
    const job = await api.producer.enqueue(HELD, {});
    await waitFor(() => holds.started.has(job.id), { message: 'the leader to run its job' });

    // The leader's pass waits on the barrier's row, the maintenance lock held in its transaction.
    const holder = () =>
      db.query<{ pid: number; state: string; wait_event_type: string | null; blocked_by: number[]; query: string }>(MAINTENANCE_LOCK_HOLDER);
    const [inPass] = await waitFor(
      async () => {
        const rows = await holder();
        return rows.length === 1 && rows[0].wait_event_type === 'Lock' && rows[0].blocked_by.includes(barrierPid) ? rows : null;
      },
      { message: 'the leader’s maintenance pass to wait on the retention walk’s row, holding the maintenance lock' },
    );
    expect(inPass.query).toContain('retention_walk');

    proxy.cut();
    // Its statement finishes on the server; the answer waits in the partition, and so does the
    // session, idle in its transaction with the lock.
    await barrier.query('COMMIT');
    await waitFor(
      async () => {
        const rows = await holder();
        return rows.length === 1 && rows[0].pid === inPass.pid && rows[0].state === 'idle in transaction';
      },
      { message: 'the leader’s session to sit idle in its transaction, the maintenance lock held' },
    );

    // B: on a link of its own, no handlers; it can only reap once the leader's lock is gone. Booted
    // without migrating: the migration lock is the maintenance lock's key (0x4a51 = 19025), so a
    // migrating boot would wait for the leader's session as well.
    const successor = cleanup.add(
      'the successor',
      await startQueueApp(db.url, { workerId: 'successor', autoMigrate: false, maintenanceIntervalMs: 200, drainTimeoutMs: 1_000 }),
      (app) => app.close(),
    );
    const events: JobQueueEvent[] = [];
    cleanup.add('the successor’s events', successor.events.events$.subscribe((event) => events.push(event)), (s) => s.unsubscribe());
    await waitFor(() => events.some((event) => event.kind === 'lease-expired' && event.jobId === job.id), {
      timeoutMs: 25_000,
      message: 'the successor to reap the cut-off leader’s expired lease',
    });
    const [row] = await db.query(`SELECT status, worker_id, last_error FROM job_queue.jobs WHERE id = $1`, [job.id]);
    expect(row.status).toBe('failed');
    expect(row.last_error).toMatch(/^worker lost: cut-off-leader /);
    // The server ended the leader's abandoned pass, and its session with it.
    await waitFor(
      async () => (await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1`, [inPass.pid]))[0].n === 0,
      { message: 'the cut-off leader’s idle-in-transaction session to be gone' },
    );
  }, 45_000);
});
