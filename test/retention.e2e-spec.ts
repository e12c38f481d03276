import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler } from '../src/index.js';
import { jobSql } from '../libs/job-queue/src/persistence/job.sql.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

@Injectable()
class RetentionHandlers {
  @JobHandler('retention.noop')
  run(): void {}
}

const HOUR_MS = 3_600_000;

/**
 * Retention on real PostgreSQL: completed and cancelled jobs are found by walking the table in id
 * order (no index of them), dead letters on their own index; nothing unfinished or recent goes.
 */
describe('retention', () => {
  let db: TestDatabase;
  let app: QueueApp | undefined;
  const sql = jobSql('job_queue');

  interface Row {
    status: string;
    ageMs: number;
    /** Completed or dead this long ago (default: ageMs). */
    finishedAgoMs?: number;
    /** Due this far in the future (default: now). */
    runInMs?: number;
  }

  /** Rows with chosen ages, in id order; returns their ids. */
  async function insertRows(rows: Row[]): Promise<string[]> {
    const inserted = await db.query<{ id: string }>(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, created_at, run_at, completed_at, dead_at, last_error)
       SELECT 'retention.noop', '{}'::jsonb, r.status, CASE WHEN r.status IN ('completed', 'dead') THEN 1 ELSE 0 END, 3,
              now() - r.age_ms * interval '1 millisecond',
              now() + COALESCE(r.run_in_ms, 0) * interval '1 millisecond',
              CASE WHEN r.status = 'completed' THEN now() - r.finished_ago_ms * interval '1 millisecond' END,
              CASE WHEN r.status = 'dead' THEN now() - r.finished_ago_ms * interval '1 millisecond' END,
              CASE WHEN r.status = 'dead' THEN 'boom' END
       FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[]) WITH ORDINALITY AS r(status, age_ms, finished_ago_ms, run_in_ms, n)
       ORDER BY r.n
       RETURNING id::text`,
      [rows.map((r) => r.status), rows.map((r) => r.ageMs), rows.map((r) => r.finishedAgoMs ?? r.ageMs), rows.map((r) => r.runInMs ?? 0)],
    );
    return inserted.map((r) => r.id);
  }

  const remaining = async (ids: readonly string[]) =>
    (await db.query<{ id: string }>(`SELECT id::text FROM job_queue.jobs WHERE id = ANY($1::bigint[]) ORDER BY id`, [ids])).map((r) => r.id);

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    // The schema, before any pruner runs.
    await (await startQueueApp(db.url, { runWorker: false })).close();
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('one chunk: deletes the expired completed and cancelled jobs among the next ids, reports where it got, skips a locked row', async () => {
    const ids = await insertRows([
      { status: 'completed', ageMs: 2 * HOUR_MS, finishedAgoMs: HOUR_MS },
      { status: 'completed', ageMs: 2 * HOUR_MS, finishedAgoMs: 60_000 }, // finished within the retention window
      { status: 'cancelled', ageMs: 2 * HOUR_MS },
      { status: 'pending', ageMs: 2 * HOUR_MS, runInMs: HOUR_MS },
      { status: 'dead', ageMs: 2 * HOUR_MS, finishedAgoMs: HOUR_MS }, // dead letters have their own retention
      { status: 'completed', ageMs: 2 * HOUR_MS, finishedAgoMs: HOUR_MS }, // locked below
      { status: 'completed', ageMs: 2 * HOUR_MS, finishedAgoMs: HOUR_MS },
    ]);
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM job_queue.jobs WHERE id = $1 FOR UPDATE', [ids[5]]);
      const before = BigInt(ids[0]) - 1n;
      const [chunk] = await db.query(sql.pruneFinishedChunk, [before.toString(), 6, 30 * 60_000, 0]);
      expect(chunk).toEqual({ scanned: 6, last_id: ids[5], reached_recent: false, completed: 1, cancelled: 1 });
      expect(await remaining(ids)).toEqual([ids[1], ids[3], ids[4], ids[5], ids[6]]);
      await holder.query('ROLLBACK');

      const [rest] = await db.query(sql.pruneFinishedChunk, [before.toString(), 6, 30 * 60_000, 0]);
      expect(rest).toEqual({ scanned: 5, last_id: ids[6], reached_recent: false, completed: 2, cancelled: 0 });
      expect(await remaining(ids)).toEqual([ids[1], ids[3], ids[4]]);
    } finally {
      await holder.end();
    }
    const recent = await insertRows([{ status: 'completed', ageMs: 1_000, finishedAgoMs: 500 }]);
    const [end] = await db.query(sql.pruneFinishedChunk, [ids[6], 1_000, 30 * 60_000, 0]);
    expect(end).toEqual({ scanned: 1, last_id: recent[0], reached_recent: true, completed: 0, cancelled: 0 });
    await db.query('DELETE FROM job_queue.jobs');
  });

  it('the maintenance leader prunes thousands of expired jobs across chunks and keeps everything unfinished or recent', async () => {
    const old = { ageMs: 3 * HOUR_MS, finishedAgoMs: 2 * HOUR_MS };
    const rows: Row[] = [
      ...Array.from({ length: 1_500 }, () => ({ status: 'completed', ...old })),
      { status: 'pending', ageMs: 3 * HOUR_MS, runInMs: HOUR_MS }, // scheduled long ago for later: kept
      { status: 'completed', ageMs: 3 * HOUR_MS, finishedAgoMs: 1_000 }, // old job, finished recently: kept
      ...Array.from({ length: 1_200 }, (_, i) => ({ status: i % 100 === 0 ? 'cancelled' : 'completed', ...old })),
      { status: 'dead', ageMs: 3 * HOUR_MS, finishedAgoMs: 2 * HOUR_MS }, // past deadMs: pruned
      { status: 'dead', ageMs: 3 * HOUR_MS, finishedAgoMs: 60_000 }, // a recent dead letter: kept
      ...Array.from({ length: 300 }, () => ({ status: 'completed', ageMs: 60_000, finishedAgoMs: 30_000 })), // recent: kept
    ];
    const ids = await insertRows(rows);
    const kept = ids.filter((_, i) => {
      const row = rows[i];
      const finishedAgo = row.finishedAgoMs ?? row.ageMs;
      return row.status === 'pending' || finishedAgo < HOUR_MS;
    });
    expect(kept).toHaveLength(303);

    app = await startQueueApp(db.url, { maintenanceIntervalMs: 50, retention: { completedMs: HOUR_MS, deadMs: HOUR_MS } }, [RetentionHandlers]);
    await waitFor(async () => (await remaining(ids)).length === kept.length, { message: 'expired jobs pruned' });
    expect(await remaining(ids)).toEqual(kept);
    const [{ n }] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs`);
    expect(n).toBe(kept.length);
    // The walk reached the recent jobs, started over and rests (a tenth of the hour, at most a minute).
    const [walk] = await db.query(
      `SELECT walked_to::text AS walked_to, rest_until > now() + interval '50 seconds' AS resting FROM job_queue.retention_walk`,
    );
    expect(walk).toEqual({ walked_to: '0', resting: true });
  });

  it('a pruning pass that fails does not undo the reaping before it', async () => {
    await app?.close();
    app = undefined;
    // Deletes from the jobs table fail, as a pruning pass might every time (a foreign key of the
    // app's, a missing permission).
    await db.query(`CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'deletes refused'; END $$`);
    await db.query(`CREATE TRIGGER refuse_delete BEFORE DELETE ON job_queue.jobs FOR EACH ROW EXECUTE FUNCTION refuse_delete()`);
    try {
      // A dead letter past deadMs, which every pass tries to prune, and a job whose worker is gone.
      const [dead] = await insertRows([{ status: 'dead', ageMs: 3 * HOUR_MS, finishedAgoMs: 2 * HOUR_MS }]);
      const [{ id: orphan }] = await db.query<{ id: string }>(
        `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, worker_id, lease_token, lease_expires_at, claimed_at)
         VALUES ('retention.noop', '{}', 'processing', 1, 3, 'a-lost-worker', gen_random_uuid(), now() - interval '1 second', now() - interval '1 minute')
         RETURNING id::text`,
      );
      app = await startQueueApp(db.url, { maintenanceIntervalMs: 50, retention: { completedMs: HOUR_MS, deadMs: HOUR_MS } }, [RetentionHandlers]);
      const reclaimed = await waitFor(
        async () => {
          const job = await app!.admin.getJob(orphan);
          return job?.status === 'completed' ? job : null;
        },
        { message: 'the orphaned job reclaimed and run' },
      );
      expect(reclaimed).toMatchObject({ attempts: 2 });
      expect(await remaining([dead])).toEqual([dead]);
    } finally {
      await app?.close();
      app = undefined;
      await db.query('DROP TRIGGER refuse_delete ON job_queue.jobs');
      await db.query('DROP FUNCTION refuse_delete()');
    }
  });

  it('walks the primary key of a large table whatever its statistics say, never the whole table', async () => {
    const explain = async (): Promise<string> => {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        // As the pruning pass runs it: in a transaction, after the walk's planner setting.
        await client.query('BEGIN');
        await client.query(sql.planWalkInIdOrder);
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN ${sql.pruneFinishedChunk.replaceAll('$1', "'0'").replaceAll('$2', '1000').replaceAll('$3', '60000').replaceAll('$4', '0')}`,
        );
        return rows.map((row) => row['QUERY PLAN']).join('\n');
      } finally {
        await client.query('ROLLBACK');
        await client.end();
      }
    };
    const fill = `INSERT INTO job_queue.jobs (type, payload, max_attempts) SELECT 'retention.plan', '{}'::jsonb, 3 FROM generate_series(1, 100000)`;
    try {
      // Never analysed.
      await db.query(fill);
      const unanalysed = await explain();
      // Statistics from when the table was nearly empty but as long (a vacuum after a purge): the
      // planner then thinks a chunk is half the table, and sorting all of it cheaper than the index.
      await db.query(`DELETE FROM job_queue.jobs WHERE type = 'retention.plan' AND id % 100 <> 0`);
      await db.query('VACUUM ANALYZE job_queue.jobs');
      await db.query(fill);
      const stale = await explain();
      await db.query('ANALYZE job_queue.jobs');
      const analysed = await explain();
      for (const text of [unanalysed, stale, analysed]) {
        expect(text, text).not.toMatch(/Seq Scan on jobs\b/);
        // The walk, the lock, the delete, and the dependants of a job others depend on.
        expect(text.match(/jobs_pkey/g)?.length, text).toBe(4);
      }
    } finally {
      await db.query(`DELETE FROM job_queue.jobs WHERE type = 'retention.plan'`);
    }
  });
});
