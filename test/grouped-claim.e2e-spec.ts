import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import type { ClaimedJob, ClaimRequest } from '../libs/job-queue/src/persistence/job.store.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const TYPE = 'turns.report';

/**
 * The grouped claim, one statement at a time on real PostgreSQL (no worker): which jobs each claim
 * takes, in what turn, under a group cap, and where the next claim starts.
 */
describe('the grouped claim', () => {
  let db: TestDatabase;
  let api: QueueApp;
  let dataSource: DataSource;
  let store: PostgresJobStore;

  const claim = async (limit: number): Promise<ClaimedJob[]> => {
    const request: ClaimRequest = {
      workerId: 'turns',
      leaseMs: 30_000,
      limit,
      perType: [{ type: TYPE, limit, maxAttempts: 3, groupMax: 2 }],
      flowControl: true,
      startNow: limit,
    };
    return store.claim(request);
  };
  const labels = (jobs: ClaimedJob[]) => jobs.map((job) => (job.payload as { label: string }).label).sort();
  const lastGroup = async () => (await db.query(`SELECT last_group FROM job_queue.job_group_turns WHERE type = $1`, [TYPE]))[0]?.last_group;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    api = await startQueueApp(db.url, { runWorker: false });
    dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 2 } });
    await dataSource.initialize();
    store = new PostgresJobStore(dataSource, 'job_queue', { prepare: true, synchronousClaims: true });
    await store.registerTypes([TYPE]);
    // In id order: b's five, a's five, c's one, two without a group.
    const jobs = [
      ...[1, 2, 3, 4, 5].map((n) => ({ label: `b${n}`, group: 'b' })),
      ...[1, 2, 3, 4, 5].map((n) => ({ label: `a${n}`, group: 'a' })),
      { label: 'c1', group: 'c' },
      { label: 'u1', group: null },
      { label: 'u2', group: null },
    ];
    await api.producer.enqueueMany(
      jobs.map(({ label, group }) => ({ type: TYPE, payload: { label }, ...(group ? { options: { group } } : {}) })),
    );
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await api?.close();
    await db?.drop();
  });

  it('takes one job of each group in key order, the ungrouped turn at the wrap, at most two of a group running', async () => {
    // Groups in key order from the start: a, b (each its first job), whatever the enqueue order.
    expect(labels(await claim(2))).toEqual(['a1', 'b1']);
    expect(await lastGroup()).toBe('b');
    // After b: c, then the jobs without a group.
    expect(labels(await claim(2))).toEqual(['c1', 'u1']);
    expect(await lastGroup()).toBe('');
    // From the start again: a and b reach their cap of two running.
    expect(labels(await claim(2))).toEqual(['a2', 'b2']);
    // Both groups are full: only the last job without a group is left to take.
    expect(labels(await claim(4))).toEqual(['u2']);
    expect(await claim(4)).toEqual([]);
  });

  it('gives a group room again as its jobs finish, and a group alone takes its whole room', async () => {
    const running = await db.query<{ id: string; lease_token: string; label: string }>(
      `SELECT id::text, lease_token::text, payload->>'label' AS label FROM job_queue.jobs
       WHERE type = $1 AND status = 'processing' AND group_key = 'a'`,
      [TYPE],
    );
    expect(running.map((r) => r.label).sort()).toEqual(['a1', 'a2']);
    await store.completeMany(running.map((r) => ({ lease: { id: r.id, leaseToken: r.lease_token }, resultJson: 'null' })));
    // b is still full: a takes both places it has.
    expect(labels(await claim(4))).toEqual(['a3', 'a4']);
    const counts = await db.query<{ group_key: string; n: number }>(
      `SELECT group_key, count(*)::int AS n FROM job_queue.jobs WHERE type = $1 AND status = 'processing' AND group_key IN ('a', 'b') GROUP BY group_key ORDER BY group_key`,
      [TYPE],
    );
    expect(counts).toEqual([
      { group_key: 'a', n: 2 },
      { group_key: 'b', n: 2 },
    ]);
  });
});
