import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { RetentionPruner, type RetentionSettings } from '../libs/job-queue/src/maintenance/retention-pruner.js';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { startQueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const HOUR_MS = 3_600_000;

/**
 * The retention pass's budget on real PostgreSQL: a pass deletes chunk after chunk while it is
 * within its time budget and rows remain (no fixed ceiling of 5,000), and at least one chunk.
 * Behaviour only: a budget far longer than the pass needs, or none at all.
 */
describe('retention: a pass deletes as much as its budget allows', () => {
  let db: TestDatabase;
  let dataSource: DataSource;
  let store: PostgresJobStore;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    await (await startQueueApp(db.url, { runWorker: false })).close();
    dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 2 } });
    await dataSource.initialize();
    store = new PostgresJobStore(dataSource, 'job_queue', { prepare: true, synchronousClaims: true });
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await db?.drop();
  });

  const pass = (settings: Partial<RetentionSettings>) =>
    store.asMaintenanceLeader((leader) => new RetentionPruner({ completedMs: HOUR_MS, deadMs: HOUR_MS, startsMs: 0, ...settings }).runOnce(leader));

  const count = async (where: string) =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE ${where}`))[0].n;

  /** `n` rows of `status`, finished two hours ago (past the hour's retention). */
  async function expired(status: 'completed' | 'dead', n: number): Promise<void> {
    await db.query(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, created_at, completed_at, dead_at, last_error)
       SELECT 'budget.noop', '{}'::jsonb, $1, 1, 3, now() - interval '3 hours',
              CASE WHEN $1 = 'completed' THEN now() - interval '2 hours' END,
              CASE WHEN $1 = 'dead' THEN now() - interval '2 hours' END,
              CASE WHEN $1 = 'dead' THEN 'boom' END
       FROM generate_series(1, $2::int)`,
      [status, n],
    );
  }

  it('one pass with room in its budget deletes 30,000 expired jobs, keeps the recent ones, and rests', async () => {
    await expired('completed', 30_000);
    await db.query(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, completed_at)
       SELECT 'budget.noop', '{}'::jsonb, 'completed', 1, 3, now() FROM generate_series(1, 10)`,
    );
    expect(await pass({ passBudgetMs: 600_000 })).toEqual({ completed: 30_000, cancelled: 0, dead: 0 });
    expect(await count(`true`)).toBe(10);
    const [walk] = await db.query(`SELECT walked_to::text AS walked_to, rest_until > now() AS resting FROM job_queue.retention_walk`);
    expect(walk).toEqual({ walked_to: '0', resting: true });
    await db.query(`DELETE FROM job_queue.jobs; UPDATE job_queue.retention_walk SET walked_to = 0, rest_until = '-infinity'`);
  });

  it('a pass whose budget is spent stops after its first chunk, and the next pass carries on from there', async () => {
    await expired('completed', 2_500);
    const [{ first }] = await db.query<{ first: string }>(`SELECT min(id)::text AS first FROM job_queue.jobs`);
    expect(await pass({ passBudgetMs: 0 })).toEqual({ completed: 1_000, cancelled: 0, dead: 0 });
    const [{ walked_to }] = await db.query<{ walked_to: string }>(`SELECT walked_to::text FROM job_queue.retention_walk`);
    expect(walked_to).toBe((BigInt(first) + 999n).toString());
    expect(await pass({ passBudgetMs: 0 })).toEqual({ completed: 1_000, cancelled: 0, dead: 0 });
    expect(await pass({ passBudgetMs: 0 })).toEqual({ completed: 500, cancelled: 0, dead: 0 });
    expect(await count(`true`)).toBe(0);
    await db.query(`UPDATE job_queue.retention_walk SET walked_to = 0, rest_until = '-infinity'`);
  });

  it("the jobs table's autovacuum is not throttled (a storage parameter the migrations set)", async () => {
    const [{ reloptions }] = await db.query<{ reloptions: string[] }>(`SELECT reloptions FROM pg_class WHERE oid = 'job_queue.jobs'::regclass`);
    expect(reloptions).toContain('autovacuum_vacuum_cost_delay=0');
  });

  it('dead letters too: 12,000 past their retention in one pass', async () => {
    await expired('dead', 12_000);
    expect(await pass({ passBudgetMs: 600_000 })).toEqual({ completed: 0, cancelled: 0, dead: 12_000 });
    expect(await count(`true`)).toBe(0);
  });
});
