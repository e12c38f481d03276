import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FLOW_CIRCUIT_TYPE, FLOW_DDL, FLOW_GLOBAL_TYPE, FLOW_ORDERED_TYPE, FLOW_RATED_TYPE, FLOW_TICK_TYPE } from './fixtures/flow-handlers.js';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { Cleanup } from './support/cleanup.js';
import { type PgBouncerServer, pgbouncerBinary, startPgBouncer } from './support/pgbouncer-server.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { skipWithout } from './support/service-process.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';
import { keepRatedStarts } from './support/rated-starts.js';

/** This file sets `listen: false` itself, so the no-LISTEN pass would only run it again. */
const secondPass = process.env.AJQ_TEST_LISTEN === 'false';

/**
 * The whole queue through a real PgBouncer in transaction mode, where each transaction may run on
 * a different server connection: producer, admin, two worker processes, cron, flow control and
 * transactional handlers, all with `listen: false` (the contract's setting for such poolers).
 * The assertions read the database directly, not through PgBouncer.
 */
describe.skipIf(skipWithout('PgBouncer', pgbouncerBinary()) || secondPass)('through PgBouncer in transaction mode (listen: false)', () => {
  const cleanup = new Cleanup();
  let db: TestDatabase;
  let queue: QueueApp;
  let bouncer: PgBouncerServer;
  const workers: ChildWorker[] = [];

  const countByStatus = async (type: string): Promise<Record<string, number>> =>
    Object.fromEntries(
      (await db.query(`SELECT status, count(*)::int AS n FROM job_queue.jobs WHERE type = $1 GROUP BY status`, [type])).map((r) => [r.status, r.n]),
    );
  const allCompleted = (ids: string[]) => async () =>
    (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'`, [ids]))[0].n ===
    ids.length;
  /** Runs per job of `table` (fixture_invocations, fixture_business, flow_invocations) for `ids`, as [runs, jobs]. */
  const runsOf = async (table: string, ids: string[]) => {
    const [row] = await db.query(`SELECT count(*)::int AS runs, count(DISTINCT job_id)::int AS jobs FROM ${table} WHERE job_id = ANY($1::bigint[])`, [
      ids,
    ]);
    return [row.runs, row.jobs];
  };
  const setDownstream = (healthy: boolean) =>
    db.query(`INSERT INTO flow_flags (name, healthy) VALUES ('downstream', $1) ON CONFLICT (name) DO UPDATE SET healthy = $1`, [healthy]);

  beforeAll(async () => {
    db = cleanup.add('the test database', await createTestDatabase(inject('adminUrl')), (d) => d.drop());
    bouncer = cleanup.add('PgBouncer', await startPgBouncer(inject('adminUrl')), (b) => b.stop());
    const url = bouncer.urlFor(db.url);
    // Producer and admin in this process; it migrates the schema through PgBouncer too.
    queue = cleanup.add('the producer app', await startQueueApp(url, { runWorker: false, listen: false }), (app) => app.close());
    await db.query(FLOW_DDL);
    const started = await Promise.all(
      ['a', 'b'].map((name) =>
        spawnWorker(
          { url, workerId: `bouncer-${name}`, listen: false, flow: true, flowCron: true, concurrency: 6, pollIntervalMs: 100 },
          { AJQ_FIXTURE_EXACTLY_ONCE: '1' },
        ),
      ),
    );
    for (const worker of started) workers.push(cleanup.add('a worker', worker, (w) => w.stop()));
  }, 60_000);

  afterAll(() => cleanup.run());

  it('plain, transactional and once-step jobs run exactly once; enqueueAndWait, deduplication and the admin reads work', async () => {
    const { producer, admin } = queue;
    const plain = (await producer.enqueueMany(Array.from({ length: 200 }, (_, n) => ({ type: 'fixture.work', payload: { n } })))).map((r) => r.id);
    const transactional = (await producer.enqueueMany(Array.from({ length: 100 }, () => ({ type: 'fixture.tx-row', payload: { ms: 5 } })))).map(
      (r) => r.id,
    );
    const steps = (await producer.enqueueMany(Array.from({ length: 30 }, () => ({ type: 'fixture.once-steps', payload: {} })))).map((r) => r.id);
    const first = await producer.enqueue('fixture.work', {}, { idempotencyKey: 'once' });
    expect(await producer.enqueue('fixture.work', {}, { idempotencyKey: 'once' })).toEqual({ id: first.id, deduplicated: true });
    await expect(producer.enqueueAndWait('fixture.work', { ms: 5 }, { timeoutMs: 20_000 })).resolves.toMatchObject({ attempt: 1 });

    const ids = [...plain, ...transactional, ...steps, first.id];
    await waitFor(allCompleted(ids), { timeoutMs: 40_000, intervalMs: 200, message: 'every job completed' });
    expect(await runsOf('fixture_invocations', [...plain, first.id])).toEqual([201, 201]);
    // Transactional effects: one row per job, written in the transaction that completed it.
    expect(await runsOf('fixture_business', transactional)).toEqual([100, 100]);
    // Two job.once steps per job, each recorded once.
    const [effects] = await db.query(
      `SELECT count(*)::int AS n, count(DISTINCT (job_id, key))::int AS distinct_steps FROM fixture_effects WHERE job_id = ANY($1::bigint[])`,
      [steps],
    );
    expect(effects).toEqual({ n: 60, distinct_steps: 60 });
    const [attempts] = await db.query(`SELECT max(attempts)::int AS most FROM job_queue.jobs WHERE id = ANY($1::bigint[])`, [ids]);
    expect(attempts.most).toBe(1);
    // Both workers took part.
    const byWorker = await db.query(`SELECT DISTINCT worker_id FROM job_queue.jobs WHERE id = ANY($1::bigint[]) ORDER BY worker_id`, [ids]);
    expect(byWorker.map((r) => r.worker_id)).toEqual(['bouncer-a', 'bouncer-b']);

    // And it all went through PgBouncer.
    expect(await bouncer.transactions(db.name)).toBeGreaterThan(ids.length);
    expect(await admin.getJob(transactional[0])).toMatchObject({ status: 'completed', attempts: 1 });
    expect((await admin.stats()).byType['fixture.work']).toMatchObject({ completed: 202 });
  }, 60_000);

  it('circuit breaker: failures open it in both workers, the backlog waits, a probe closes it, every job runs once', async () => {
    const { producer, admin } = queue;
    await setDownstream(false);
    await producer.enqueueMany(Array.from({ length: 5 }, () => ({ type: FLOW_CIRCUIT_TYPE, payload: {}, options: { maxAttempts: 1 } })));
    await waitFor(async () => (await admin.circuits()).length === 1, { timeoutMs: 15_000, message: 'the circuit to open' });
    const backlog = (await producer.enqueueMany(Array.from({ length: 10 }, () => ({ type: FLOW_CIRCUIT_TYPE, payload: {} })))).map((r) => r.id);
    await setDownstream(true);
    await waitFor(async () => (await admin.circuits()).length === 0, { timeoutMs: 20_000, message: 'the probe to close the circuit' });
    await waitFor(allCompleted(backlog), { message: 'the backlog' });
    expect(await runsOf('flow_invocations', backlog)).toEqual([10, 10]);
    expect(await countByStatus(FLOW_CIRCUIT_TYPE)).toEqual({ completed: 10, dead: 5 });
    // The dead letters, listed and retried through the admin API, run once more each.
    const dead = await admin.listDead({ type: FLOW_CIRCUIT_TYPE });
    expect(dead).toHaveLength(5);
    await admin.retryDead(dead[0].id);
    await waitFor(allCompleted([dead[0].id]), { message: 'the retried dead letter' });
    expect(await runsOf('flow_invocations', [dead[0].id])).toEqual([2, 1]);
  }, 45_000);

  it('ordering keys: one at a time per key, in enqueue order, retries included', async () => {
    const items = Array.from({ length: 60 }, (_, seq) => {
      const key = `k${seq % 3}`;
      return { type: FLOW_ORDERED_TYPE, payload: { key, seq, ms: 5, failFirst: seq % 7 === 0 }, options: { orderingKey: key } };
    });
    const ids = (await queue.producer.enqueueMany(items)).map((r) => r.id);
    await waitFor(allCompleted(ids), { timeoutMs: 30_000, message: 'the ordered jobs' });
    const runs = await db.query(
      `SELECT job_id::text AS job_id, ordering_key, started_at, finished_at FROM flow_invocations WHERE type = $1 ORDER BY started_at, id`,
      [FLOW_ORDERED_TYPE],
    );
    expect(runs).toHaveLength(60 + items.filter((item) => item.payload.failFirst).length);
    for (const key of ['k0', 'k1', 'k2']) {
      const keyRuns = runs.filter((run) => run.ordering_key === key);
      const order = keyRuns.map((run) => run.job_id).filter((id, i, all) => i === 0 || all[i - 1] !== id);
      expect(order, `start order of ${key}`).toEqual(ids.filter((_, i) => items[i].options.orderingKey === key));
      for (let i = 1; i < keyRuns.length; i++) {
        expect(keyRuns[i].started_at >= keyRuns[i - 1].finished_at, `${key}: run ${i} after run ${i - 1}`).toBe(true);
      }
    }
  }, 45_000);

  it('rate limit and global concurrency hold across both workers', async () => {
    const starts = await keepRatedStarts(db, FLOW_RATED_TYPE);
    const rated = (await queue.producer.enqueueMany(Array.from({ length: 50 }, (_, n) => ({ type: FLOW_RATED_TYPE, payload: { n } })))).map(
      (r) => r.id,
    );
    const global = (await queue.producer.enqueueMany(Array.from({ length: 20 }, () => ({ type: FLOW_GLOBAL_TYPE, payload: { ms: 100 } })))).map(
      (r) => r.id,
    );
    await waitFor(allCompleted([...rated, ...global]), { timeoutMs: 30_000, intervalMs: 200, message: 'the limited jobs' });
    expect(await runsOf('flow_invocations', rated)).toEqual([50, 50]);
    expect(await runsOf('flow_invocations', global)).toEqual([20, 20]);
    expect(await starts.busiestWindow(), 'starts in the busiest 1 s window (limit 20)').toBeLessThanOrEqual(20);
    const [overlap] = await db.query(
      `SELECT max((SELECT count(*) FROM flow_invocations b
                   WHERE b.type = a.type AND b.started_at <= a.started_at AND b.finished_at > a.started_at))::int AS most
       FROM flow_invocations a WHERE a.type = $1`,
      [FLOW_GLOBAL_TYPE],
    );
    expect(overlap.most, 'running at once (globalConcurrency 2)').toBeLessThanOrEqual(2);
  }, 45_000);

  it('cron: one job per slot across both workers, each run once', async () => {
    await waitFor(
      async () =>
        (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = $1 AND status = 'completed'`, [FLOW_TICK_TYPE]))[0].n >= 5,
      { timeoutMs: 20_000, message: 'five completed cron slots' },
    );
    const [slots] = await db.query(
      `SELECT count(*)::int AS n, count(DISTINCT payload->>'scheduledFor')::int AS distinct_slots FROM job_queue.jobs WHERE type = $1`,
      [FLOW_TICK_TYPE],
    );
    expect(slots.n).toBe(slots.distinct_slots);
    const twice = await db.query(`SELECT job_id FROM flow_invocations WHERE type = $1 GROUP BY job_id HAVING count(*) > 1`, [FLOW_TICK_TYPE]);
    expect(twice).toEqual([]);
  });
});
