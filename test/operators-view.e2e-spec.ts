import { Injectable } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { InvalidJobError, JobHandler, PermanentJobError, type JobContext, type JobQueueEvent } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { holdsThroughout, waitFor } from './support/wait-for.js';

/**
 * The operator's view on real PostgreSQL: worker heartbeats, pauses that every process honours,
 * keyset pages of jobs, bulk retry and purge, per-minute throughput from the rollup, and progress.
 * Admin calls go through a producer-only app, as an operator's API pod (or the CLI) makes them.
 */

const releases = new Map<string, () => void>();
const ran: string[] = [];
const progressErrors: string[] = [];

@Injectable()
class OperatorHandlers {
  @JobHandler('ops.quick')
  quick(_payload: unknown, job: JobContext) {
    ran.push(job.id);
  }

  @JobHandler('ops.other')
  other(_payload: unknown, job: JobContext) {
    ran.push(job.id);
  }

  @JobHandler('ops.block')
  async block(_payload: unknown, job: JobContext) {
    await new Promise<void>((resolve) => releases.set(job.id, resolve));
  }

  @JobHandler('ops.flaky', { baseDelayMs: 10, maxDelayMs: 20 })
  flaky(_payload: unknown, job: JobContext) {
    if (job.attempt === 1) throw new Error('first try fails');
  }

  @JobHandler('ops.poison')
  poison() {
    throw new PermanentJobError('never');
  }

  @JobHandler('ops.progress')
  async progress(_payload: unknown, job: JobContext) {
    void job.progress(10);
    void job.progress({ step: 'copying', done: 3, of: 7 });
    await new Promise<void>((resolve) => releases.set(job.id, resolve));
    for (const bad of [150, -1, Number.NaN, 'half', [1, 2], null]) {
      try {
        await job.progress(bad as never);
      } catch (error) {
        progressErrors.push(error instanceof InvalidJobError ? error.field : `not InvalidJobError: ${String(error)}`);
      }
    }
    await job.progress(100);
  }
}

describe("the operator's view", () => {
  let db: TestDatabase;
  let admin: QueueApp;
  const workers: QueueApp[] = [];
  const events: JobQueueEvent[] = [];
  const subscriptions: Subscription[] = [];

  async function startWorker(workerId: string, extra: Record<string, unknown> = {}): Promise<QueueApp> {
    const app = await startQueueApp(db.url, { workerId, heartbeatIntervalMs: 100, ...extra }, [OperatorHandlers]);
    subscriptions.push(app.events.events$.subscribe((event) => events.push({ ...event, workerId: event.workerId ?? workerId })));
    workers.push(app);
    return app;
  }

  async function statusOf(id: string): Promise<string | undefined> {
    return (await admin.admin.getJob(id))?.status;
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    admin = await startQueueApp(db.url, { runWorker: false });
    subscriptions.push(admin.events.events$.subscribe((event) => events.push({ ...event, workerId: 'admin' })));
  });

  afterEach(async () => {
    for (const release of releases.values()) release();
    releases.clear();
    await Promise.all(workers.splice(0).map((app) => app.close()));
    // A test that failed midway must not leave a type paused for the next.
    for (const type of await admin.admin.paused()) await admin.admin.resume(type);
    events.length = 0;
  });

  afterAll(async () => {
    for (const subscription of subscriptions) subscription.unsubscribe();
    await admin?.close();
    await db?.drop();
  });

  it('lists each live worker process from its heartbeat, with what it runs; a closed or silent one drops off', async () => {
    const first = await startWorker('ops-worker-1', { concurrency: 4 });
    await startWorker('ops-worker-2', { concurrency: 2 });
    // A worker that stopped beating long ago (killed): its row is there, expired.
    await db.query(
      `INSERT INTO job_queue.job_workers (id, host, pid, started_at, heartbeat_at, expires_at, types, concurrency)
       VALUES ('ops-gone', 'lost-host', 1, now() - interval '1 hour', now() - interval '10 minutes', now() - interval '9 minutes', '{ops.quick}', 1)`,
    );
    const { id } = await admin.producer.enqueue('ops.block', {});
    const listed = await waitFor(
      async () => {
        const list = await admin.admin.workers();
        return list.length === 2 && list.some((w) => w.inFlight === 1) ? list : null;
      },
      { message: 'both workers listed, one running the blocking job' },
    );
    expect(listed.map((w) => w.id).sort()).toEqual(['ops-worker-1', 'ops-worker-2']);
    for (const worker of listed) {
      expect(worker).toMatchObject({ host: expect.any(String), pid: process.pid, draining: false });
      expect(worker.types.sort()).toEqual(['ops.block', 'ops.flaky', 'ops.other', 'ops.poison', 'ops.progress', 'ops.quick']);
      expect(worker.heartbeatAt.getTime()).toBeGreaterThanOrEqual(worker.startedAt.getTime() - 1_000);
    }
    expect(listed.find((w) => w.id === 'ops-worker-1')?.concurrency).toBe(4);
    expect(listed.find((w) => w.id === 'ops-worker-2')?.concurrency).toBe(2);

    releases.get(id)?.();
    await waitFor(async () => (await statusOf(id)) === 'completed', { message: 'the blocking job completed' });
    await first.close();
    expect((await admin.admin.workers()).map((w) => w.id)).toEqual(['ops-worker-2']);
  });

  it('a paused type is started by no worker, in any process, until it is resumed; enqueues are still taken', async () => {
    const worker = await startWorker('ops-pause-1');
    await startWorker('ops-pause-2');
    await admin.admin.pause('ops.quick');
    await admin.admin.pause('ops.quick');
    expect(await admin.admin.paused()).toEqual(['ops.quick']);
    // Every worker process hears of it and says so; the admin's process (no worker) says so once.
    await waitFor(() => events.filter((e) => e.kind === 'paused' && e.type === 'ops.quick').length === 3, { message: 'paused events' });
    expect(events.filter((e) => e.kind === 'paused').map((e) => e.workerId).sort()).toEqual(['admin', 'ops-pause-1', 'ops-pause-2']);

    const paused = await Promise.all(Array.from({ length: 5 }, (_, i) => admin.producer.enqueue('ops.quick', { i })));
    const other = await admin.producer.enqueue('ops.other', {});
    await waitFor(async () => (await statusOf(other.id)) === 'completed', { message: 'a type not paused runs' });
    // A claim planned before a worker heard of the pause may take some; that worker hands them back unstarted.
    await waitFor(
      async () => {
        for (const { id } of paused) if ((await statusOf(id)) !== 'pending') return false;
        return true;
      },
      { message: 'the paused jobs pending' },
    );
    await holdsThroughout(
      600,
      async () => {
        for (const { id } of paused) expect(await statusOf(id)).toBe('pending');
      },
      'paused jobs wait',
    );

    // The pause outlives a restart.
    await worker.close();
    workers.splice(workers.indexOf(worker), 1);
    await startWorker('ops-pause-3');
    await holdsThroughout(
      300,
      async () => {
        for (const { id } of paused) expect(await statusOf(id)).toBe('pending');
      },
      'paused jobs wait after a restart',
    );

    expect(ran.filter((id) => paused.some((job) => job.id === id))).toEqual([]);
    await admin.admin.resume('ops.quick');
    expect(await admin.admin.paused()).toEqual([]);
    await waitFor(
      async () => {
        for (const { id } of paused) if ((await statusOf(id)) !== 'completed') return false;
        return true;
      },
      { message: 'resumed jobs run' },
    );
    expect(events.some((e) => e.kind === 'resumed' && e.type === 'ops.quick' && e.workerId === 'ops-pause-3')).toBe(true);
    // Resuming what is not paused changes nothing and says nothing.
    const resumedBefore = events.filter((e) => e.kind === 'resumed').length;
    await admin.admin.resume('ops.quick');
    expect(events.filter((e) => e.kind === 'resumed').length).toBe(resumedBefore);
    await expect(admin.admin.pause('')).rejects.toMatchObject({ field: 'type' });
    expect(await admin.admin.paused()).toEqual([]);
  });

  it('pages through jobs newest first with a cursor, filtered by status and type, and refuses bad filters', async () => {
    await db.query(`DELETE FROM job_queue.jobs`);
    await db.query(
      `INSERT INTO job_queue.jobs (type, payload, status, max_attempts, completed_at, dead_at, last_error)
       SELECT CASE WHEN n % 3 = 0 THEN 'page.a' ELSE 'page.b' END, jsonb_build_object('n', n),
              (ARRAY['pending', 'completed', 'dead', 'cancelled'])[1 + n % 4], 3,
              CASE WHEN n % 4 = 1 THEN now() END, CASE WHEN n % 4 = 2 THEN now() END, CASE WHEN n % 4 = 2 THEN 'boom' END
       FROM generate_series(1, 130) AS n ORDER BY n`,
    );
    const all: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await admin.admin.listJobs({ limit: 50, cursor });
      all.push(...page.jobs.map((job) => (job.payload as { n: number }).n));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(all).toEqual(Array.from({ length: 130 }, (_, i) => 130 - i));

    for (const [status, remainder] of [['pending', 0], ['completed', 1], ['dead', 2], ['cancelled', 3]] as const) {
      const listed: number[] = [];
      cursor = null;
      do {
        const page = await admin.admin.listJobs({ status, type: 'page.a', limit: 4, cursor });
        expect(page.jobs.every((job) => job.status === status && job.type === 'page.a')).toBe(true);
        listed.push(...page.jobs.map((job) => (job.payload as { n: number }).n));
        cursor = page.nextCursor;
      } while (cursor);
      const expected = Array.from({ length: 130 }, (_, i) => 130 - i).filter((n) => n % 4 === remainder && n % 3 === 0);
      expect(listed, status).toEqual(expected);
    }

    await expect(admin.admin.listJobs({ status: 'lost' as never })).rejects.toMatchObject({ field: 'status' });
    await expect(admin.admin.listJobs({ cursor: 'abc' })).rejects.toMatchObject({ field: 'cursor' });
    await expect(admin.admin.listJobs({ limit: 0 })).rejects.toMatchObject({ field: 'limit' });
    await expect(admin.admin.listJobs({ type: '' })).rejects.toMatchObject({ field: 'type' });
  });

  it('a sparse filter on unindexed statuses costs a bounded walk per page and goes on where the walk stopped', async () => {
    await db.query(`DELETE FROM job_queue.jobs`);
    const [{ id: rare }] = await db.query<{ id: string }>(
      `INSERT INTO job_queue.jobs (type, payload, status, max_attempts) VALUES ('walk.rare', '{}', 'cancelled', 3) RETURNING id::text`,
    );
    await db.query(
      `INSERT INTO job_queue.jobs (type, payload, status, max_attempts, completed_at)
       SELECT 'walk.common', '{}', 'completed', 3, now() FROM generate_series(1, 12000)`,
    );
    const first = await admin.admin.listJobs({ status: 'cancelled' });
    expect(first.jobs).toEqual([]);
    expect(first.nextCursor).not.toBeNull();
    const found: string[] = [];
    let cursor = first.nextCursor;
    let pages = 1;
    while (cursor) {
      const page = await admin.admin.listJobs({ status: 'cancelled', cursor });
      found.push(...page.jobs.map((job) => job.id));
      cursor = page.nextCursor;
      pages++;
    }
    expect(found).toEqual([rare]);
    // 12,001 rows at 5,000 a walk.
    expect(pages).toBe(3);
    await db.query(`DELETE FROM job_queue.jobs`);
  });

  it('retries every dead job of a type, or all, in batches with progress; purges finished jobs by status, type and age', async () => {
    await db.query(`DELETE FROM job_queue.jobs`);
    await db.query(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, dead_at, last_error)
       SELECT CASE WHEN n <= 3 THEN 'bulk.b' ELSE 'bulk.a' END, '{}', 'dead', 3, 3, now() - interval '2 hours', 'boom'
       FROM generate_series(1, 2503) AS n`,
    );
    expect(await admin.admin.retryDeadMany({ type: 'bulk.b' })).toBe(3);
    const progress: number[] = [];
    expect(await admin.admin.retryDeadMany({ onProgress: (done) => progress.push(done) })).toBe(2500);
    expect(progress).toEqual([1000, 2000, 2500]);
    const [{ pending, attempts }] = await db.query<{ pending: number; attempts: number }>(
      `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending, max(attempts)::int AS attempts FROM job_queue.jobs`,
    );
    expect({ pending, attempts }).toEqual({ pending: 2503, attempts: 0 });
    expect(await admin.admin.retryDeadMany()).toBe(0);

    await db.query(`DELETE FROM job_queue.jobs`);
    await db.query(
      `INSERT INTO job_queue.jobs (type, payload, status, max_attempts, completed_at, dead_at, created_at)
       SELECT t.type, '{}', s.status, 3,
              CASE WHEN s.status = 'completed' THEN now() - a.age END, CASE WHEN s.status = 'dead' THEN now() - a.age END, now() - a.age
       FROM (VALUES ('purge.a'), ('purge.b')) AS t(type),
            (VALUES ('completed'), ('dead'), ('cancelled'), ('pending')) AS s(status),
            (VALUES (interval '2 days'), (interval '1 minute')) AS a(age),
            generate_series(1, 10)`,
    );
    const count = async (where: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE ${where}`))[0].n;
    await expect(admin.admin.purge({ status: 'pending' as never })).rejects.toMatchObject({ field: 'status' });
    await expect(admin.admin.purge(undefined as never)).rejects.toMatchObject({ field: 'status' });
    await expect(admin.admin.purge({ status: 'dead', olderThanMs: -1 })).rejects.toMatchObject({ field: 'olderThanMs' });
    expect(await count('true')).toBe(160);
    expect(await admin.admin.purge({ status: 'completed', type: 'purge.a', olderThanMs: 86_400_000 })).toBe(10);
    expect(await admin.admin.purge({ status: 'dead', olderThanMs: 86_400_000 })).toBe(20);
    expect(await admin.admin.purge({ status: 'cancelled' })).toBe(40);
    expect(await count(`status = 'completed'`)).toBe(30);
    expect(await count(`status = 'dead'`)).toBe(20);
    expect(await count(`status = 'pending'`)).toBe(40);
    await db.query(`DELETE FROM job_queue.jobs`);
  });

  it('counts completed, failed and dead jobs per minute in the rollup, every minute of the window, by type', async () => {
    await db.query(`DELETE FROM job_queue.job_throughput`);
    await startWorker('ops-throughput');
    const quick = await Promise.all(Array.from({ length: 5 }, () => admin.producer.enqueue('ops.quick', {})));
    const flaky = await admin.producer.enqueue('ops.flaky', {});
    const poison = await admin.producer.enqueue('ops.poison', {});
    await waitFor(
      async () => {
        for (const { id } of [...quick, flaky]) if ((await statusOf(id)) !== 'completed') return false;
        return (await statusOf(poison.id)) === 'dead';
      },
      { message: 'the jobs finished' },
    );
    const minutes = await waitFor(
      async () => {
        const window = await admin.admin.throughput({ minutes: 5 });
        const total = window.reduce((sum, m) => ({ completed: sum.completed + m.completed, failed: sum.failed + m.failed, dead: sum.dead + m.dead }), {
          completed: 0,
          failed: 0,
          dead: 0,
        });
        return total.completed === 6 && total.failed === 1 && total.dead === 1 ? window : null;
      },
      { message: 'the outcomes in the rollup' },
    );
    expect(minutes).toHaveLength(5);
    for (let i = 1; i < minutes.length; i++) expect(minutes[i].minute.getTime() - minutes[i - 1].minute.getTime()).toBe(60_000);
    const byType = await admin.admin.throughput({ minutes: 5, type: 'ops.quick' });
    expect(byType.reduce((sum, m) => sum + m.completed, 0)).toBe(5);
    expect(byType.reduce((sum, m) => sum + m.failed + m.dead, 0)).toBe(0);
    expect(await admin.admin.throughput()).toHaveLength(60);
    await expect(admin.admin.throughput({ minutes: 0 })).rejects.toMatchObject({ field: 'minutes' });
    await expect(admin.admin.throughput({ minutes: 1441 })).rejects.toMatchObject({ field: 'minutes' });
  });

  it("stores a running job's latest progress, coalesced, and refuses a value of the wrong kind at the call", async () => {
    await startWorker('ops-progress');
    const { id } = await admin.producer.enqueue('ops.progress', {});
    await waitFor(async () => (await admin.admin.getJob(id))?.progress?.toString() === '[object Object]', { message: 'the latest progress stored' });
    expect((await admin.admin.getJob(id))?.progress).toEqual({ step: 'copying', done: 3, of: 7 });
    releases.get(id)?.();
    await waitFor(async () => (await statusOf(id)) === 'completed', { message: 'the job completed' });
    expect((await admin.admin.getJob(id))?.progress).toBe(100);
    expect(progressErrors).toEqual(['progress', 'progress', 'progress', 'progress', 'progress', 'progress']);
  });
});
