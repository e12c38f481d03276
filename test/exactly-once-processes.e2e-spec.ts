import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXACTLY_ONCE_DDL } from './fixtures/exactly-once-handlers.js';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/** Child workers with the exactly-once handlers (fixture.once-steps, fixture.tx-row). */
const EXACTLY_ONCE_ENV = { AJQ_FIXTURE_EXACTLY_ONCE: '1' };
const FAST_RECLAIM = { leaseMs: 2_000, maintenanceIntervalMs: 200, pollIntervalMs: 200 };

describe('exactly-once effects across killed worker processes', () => {
  let db: TestDatabase;
  let producer: QueueApp;
  const workers: ChildWorker[] = [];

  async function spawn(workerId: string, extra: Record<string, unknown> = {}): Promise<ChildWorker> {
    const worker = await spawnWorker({ url: db.url, workerId, ...FAST_RECLAIM, ...extra }, EXACTLY_ONCE_ENV);
    workers.push(worker);
    return worker;
  }

  async function sigkill(worker: ChildWorker): Promise<void> {
    worker.kill('SIGKILL');
    const exit = await worker.exited;
    expect(exit.signal).toBe('SIGKILL');
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    // Producer-only, in this process: it migrates the schema and enqueues.
    producer = await startQueueApp(db.url, { runWorker: false });
    await db.query(EXACTLY_ONCE_DDL);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await producer?.close();
    await db?.drop();
  });

  it('once(): an effect recorded before a SIGKILL is not repeated by the next worker', async () => {
    const first = await spawn('once-1');
    const { id } = await producer.producer.enqueue('fixture.once-steps', { pauseOnAttempts: [1], pauseMs: 30_000 });

    // Effect A happened and the ledger recorded it; the handler now pauses before B.
    await waitFor(
      async () => (await db.query(`SELECT 1 FROM job_queue.job_effects WHERE job_id = $1 AND key = 'a'`, [id])).length === 1,
      { timeoutMs: 20_000, message: "effect 'a' to be recorded in the ledger" },
    );
    await sigkill(first);
    expect(await db.query(`SELECT key FROM fixture_effects WHERE job_id = $1`, [id])).toEqual([{ key: 'a' }]);

    await spawn('once-2');
    const job = await waitFor(
      async () => {
        const record = await producer.admin.getJob(id);
        return record?.status === 'completed' ? record : null;
      },
      { timeoutMs: 30_000, message: 'the second worker to complete the job' },
    );
    expect(job).toMatchObject({ workerId: 'once-2', attempts: 2 });
    expect(job.errors).toHaveLength(1);
    expect(job.errors[0].error).toContain('once-1');

    const effects = await db.query(`SELECT key, worker_id, attempt FROM fixture_effects WHERE job_id = $1 ORDER BY key`, [id]);
    expect(effects).toEqual([
      { key: 'a', worker_id: 'once-1', attempt: 1 },
      { key: 'b', worker_id: 'once-2', attempt: 2 },
    ]);
    // Attempt 2 got effect A's stored result, not a new one.
    const result = job.result as { a: { worker: string; attempt: number }; b: { worker: string; attempt: number } };
    expect(result.a).toMatchObject({ worker: 'once-1', attempt: 1 });
    expect(result.b).toMatchObject({ worker: 'once-2', attempt: 2 });
    const ledger = await db.query(`SELECT key, attempt FROM job_queue.job_effects WHERE job_id = $1 ORDER BY key`, [id]);
    expect(ledger).toEqual([
      { key: 'a', attempt: 1 },
      { key: 'b', attempt: 2 },
    ]);
  });

  it('1,000 transactional jobs over three workers with random SIGKILLs: one business row per job', async () => {
    const total = 1_000;
    // Deterministic "random" run times, so a failure can be replayed.
    let seed = 20251130;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const jobs = Array.from({ length: total }, () => ({ type: 'fixture.tx-row', payload: { ms: 60 + Math.floor(random() * 120) } }));
    // Enqueued in four quarters, the next one before each kill: on a slow machine a replacement
    // worker takes seconds to boot, and a queue filled up front could be drained by then, leaving
    // the next victim nothing in flight to lose.
    const results: Array<{ id: string }> = [];
    const enqueueQuarter = async () => {
      const from = results.length;
      results.push(...(await producer.producer.enqueueMany(jobs.slice(from, from + total / 4))));
    };
    await enqueueQuarter();

    const slots: ChildWorker[] = [];
    const ids: string[] = [];
    let generation = 0;
    const start = async (slot: number) => {
      const workerId = `tx-${slot}-gen${generation++}`;
      ids[slot] = workerId;
      slots[slot] = await spawn(workerId, { concurrency: 10 });
    };
    await Promise.all([0, 1, 2].map((slot) => start(slot)));

    const completed = async () =>
      (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'fixture.tx-row' AND status = 'completed'`))[0].n;
    const killed: string[] = [];
    for (const threshold of [100, 350, 600]) {
      await waitFor(async () => (await completed()) >= threshold, { timeoutMs: 40_000, message: `${threshold} jobs completed` });
      await enqueueQuarter();
      const slot = Math.floor(random() * 3);
      // Kill it while it has transactions in flight (business rows inserted, not committed).
      const victim = ids[slot];
      await waitFor(
        async () =>
          (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE status = 'processing' AND worker_id = $1`, [victim]))[0]
            .n > 0,
        { timeoutMs: 20_000, message: `${victim} to be running jobs` },
      );
      await sigkill(slots[slot]);
      killed.push(victim);
      await start(slot);
    }
    expect(killed).toHaveLength(3);
    expect(new Set(results.map((r) => r.id)).size).toBe(total);

    await waitFor(async () => (await completed()) === total, { timeoutMs: 60_000, message: 'all jobs completed' });
    const [statuses] = await db.query(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE status = 'completed')::int AS completed,
              count(*) FILTER (WHERE attempts > 1)::int AS retried
       FROM job_queue.jobs WHERE type = 'fixture.tx-row'`,
    );
    expect(statuses.total).toBe(total);
    expect(statuses.completed).toBe(total);
    // The kills did hit jobs in flight: those ran again.
    expect(statuses.retried).toBeGreaterThan(0);
    // …and only those: every failed attempt on record is a killed worker's lost run.
    const otherErrors = await db.query(
      `SELECT j.id::text, e->>'workerId' AS worker, e->>'error' AS error
       FROM job_queue.jobs j CROSS JOIN LATERAL jsonb_array_elements(j.errors) e
       WHERE j.type = 'fixture.tx-row' AND NOT (e->>'workerId' = ANY($1::text[]) AND e->>'error' LIKE 'worker lost:%')
       LIMIT 10`,
      [killed],
    );
    expect(otherErrors).toEqual([]);

    const [rows] = await db.query(`SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS jobs FROM fixture_business`);
    expect(rows).toEqual({ n: total, jobs: total });
    // Every job's one row is the one its completing attempt wrote, in the same transaction.
    const mismatched = await db.query(
      `SELECT j.id::text, j.worker_id, j.attempts, b.worker_id AS row_worker, b.attempt AS row_attempt
       FROM job_queue.jobs j LEFT JOIN fixture_business b ON b.job_id = j.id
       WHERE j.type = 'fixture.tx-row' AND (b.id IS NULL OR b.worker_id <> j.worker_id OR b.attempt <> j.attempts)
       LIMIT 10`,
    );
    expect(mismatched).toEqual([]);
  });
});
