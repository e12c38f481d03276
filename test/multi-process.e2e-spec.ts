import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

describe('two worker processes', () => {
  let db: TestDatabase;
  let producer: QueueApp;
  const workers: ChildWorker[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    // Producer-only, in this process: it migrates the schema and enqueues.
    producer = await startQueueApp(db.url, { runWorker: false });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await producer?.close();
    await db?.drop();
  });

  it('process 2,000 jobs exactly once between them', async () => {
    const results = await producer.producer.enqueueMany(
      Array.from({ length: 2_000 }, (_, i) => ({ type: 'fixture.work', payload: { n: i } })),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(2_000);
    for (const name of ['a', 'b']) {
      workers.push(await spawnWorker({ url: db.url, workerId: `worker-${name}`, concurrency: 20, pollIntervalMs: 200 }));
    }
    await waitFor(
      async () => (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE status = 'completed'`))[0].n === 2_000,
      { timeoutMs: 60_000, message: 'all jobs completed' },
    );
    const [runs] = await db.query(`SELECT count(*)::int AS total, count(DISTINCT job_id)::int AS distinct_jobs FROM fixture_invocations`);
    expect(runs).toEqual({ total: 2_000, distinct_jobs: 2_000 });
    const perWorker = await db.query(`SELECT worker_id, count(*)::int AS n FROM job_queue.jobs GROUP BY worker_id ORDER BY worker_id`);
    expect(perWorker.map((r) => r.worker_id)).toEqual(['worker-a', 'worker-b']);
    expect(perWorker.every((r) => r.n > 0)).toBe(true);
    const [attempts] = await db.query(`SELECT max(attempts)::int AS max FROM job_queue.jobs`);
    expect(attempts.max).toBe(1);
  });
});
