import { Injectable } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  JobHandler,
  JobNotFoundError,
  JobStateError,
  PermanentJobError,
  type JobContext,
  type JobQueueEvent,
} from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * JobQueueAdmin on real PostgreSQL: dead-letter listing and retry, cancelling waiting and running
 * jobs, stats for a known mix of statuses, and lookups of unknown ids. Admin calls go through a
 * producer-only app, as an operator's API pod would make them; the worker is another app.
 */

const invocations = new Map<string, number[]>();
/** Ids whose cause of failure the "operator" fixed, so their next run succeeds. */
const healed = new Set<string>();
/** Signals of running `admin.block` jobs, and what each saw when it was aborted. */
const blockSignals = new Map<string, AbortSignal>();

function recordCall(job: JobContext): void {
  invocations.set(job.id, [...(invocations.get(job.id) ?? []), job.attempt]);
}

@Injectable()
class AdminHandlers {
  @JobHandler('admin.dead-a')
  async deadA(_payload: unknown, job: JobContext) {
    recordCall(job);
    throw new PermanentJobError('rejected by a');
  }

  @JobHandler('admin.dead-b')
  async deadB(_payload: unknown, job: JobContext) {
    recordCall(job);
    throw new PermanentJobError('rejected by b');
  }

  @JobHandler('admin.heal', { baseDelayMs: 20, maxDelayMs: 50 })
  async heal(payload: { account: number }, job: JobContext) {
    recordCall(job);
    if (!healed.has(job.id)) throw new Error(`account ${payload.account} is locked`);
    return { unlocked: payload.account, attempt: job.attempt };
  }

  @JobHandler('admin.quick')
  async quick(payload: unknown, job: JobContext) {
    recordCall(job);
    return { echoed: payload };
  }

  /** Waits for its signal when asked to, then returns normally as if it had finished its work. */
  @JobHandler('admin.block', { concurrency: 1 })
  async block(payload: { waitForAbort: boolean }, job: JobContext) {
    recordCall(job);
    blockSignals.set(job.id, job.signal);
    if (payload.waitForAbort) {
      await new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve(), { once: true }));
      return { finishedAfterAbort: true };
    }
    return { finished: true };
  }

  /** Backs off a minute after failing, so the job sits in `failed`. */
  @JobHandler('admin.retry-later', { baseDelayMs: 60_000, maxDelayMs: 60_000 })
  async retryLater(_payload: unknown, job: JobContext) {
    recordCall(job);
    throw new Error('try again later');
  }
}

/** Handles a type no other app in this file handles, so its worker can be started on demand. */
@Injectable()
class LateHandlers {
  @JobHandler('admin.later')
  async later(payload: unknown, job: JobContext) {
    recordCall(job);
    return { ran: payload };
  }
}

describe('JobQueueAdmin', () => {
  let db: TestDatabase;
  /** Producer-only: enqueues and administers, never claims. */
  let api: QueueApp;
  let worker: QueueApp;
  const workerEvents: JobQueueEvent[] = [];
  let subscription: Subscription | undefined;

  async function jobWhen(id: string, status: string) {
    return waitFor(
      async () => {
        const job = await api.admin.getJob(id);
        return job?.status === status ? job : null;
      },
      { message: `job ${id} to be ${status}` },
    );
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    api = await startQueueApp(db.url, { runWorker: false });
    // Without LISTEN (the AJQ_TEST_LISTEN=false pass) a running job learns of its cancel at the
    // next lease renewal, every leaseMs / 3: a short lease there makes that half a second.
    const leaseMs = process.env.AJQ_TEST_LISTEN === 'false' ? 1_500 : undefined;
    worker = await startQueueApp(db.url, { workerId: 'admin-worker', drainTimeoutMs: 1_000, ...(leaseMs ? { leaseMs } : {}) }, [AdminHandlers]);
    subscription = worker.events.events$.subscribe((event) => workerEvents.push(event));
  });
  afterAll(async () => {
    subscription?.unsubscribe();
    await worker?.close();
    await api?.close();
    await db?.drop();
  });

  it('lists dead letters newest first, filtered by type and limited', async () => {
    const created: Array<{ type: string; id: string }> = [];
    // One at a time, so each has its own dead_at.
    for (const type of ['admin.dead-a', 'admin.dead-b', 'admin.dead-a', 'admin.dead-a', 'admin.dead-b']) {
      const { id } = await api.producer.enqueue(type, { n: created.length });
      await jobWhen(id, 'dead');
      created.push({ type, id });
    }
    const newestFirst = [...created].reverse();
    const idsOf = (type?: string) => newestFirst.filter((c) => !type || c.type === type).map((c) => c.id);

    const onlyA = await api.admin.listDead({ type: 'admin.dead-a' });
    expect(onlyA.map((r) => r.id)).toEqual(idsOf('admin.dead-a'));
    expect(onlyA.every((r) => r.type === 'admin.dead-a' && r.status === 'dead' && r.lastError?.includes('rejected by a'))).toBe(true);

    const onlyB = await api.admin.listDead({ type: 'admin.dead-b' });
    expect(onlyB.map((r) => r.id)).toEqual(idsOf('admin.dead-b'));

    const twoNewestA = await api.admin.listDead({ type: 'admin.dead-a', limit: 2 });
    expect(twoNewestA.map((r) => r.id)).toEqual(idsOf('admin.dead-a').slice(0, 2));

    const all = await api.admin.listDead();
    const ours = new Set(created.map((c) => c.id));
    expect(all.filter((r) => ours.has(r.id)).map((r) => r.id)).toEqual(idsOf());
    const deadTimes = all.map((r) => r.deadAt!.getTime());
    expect([...deadTimes].sort((a, b) => b - a)).toEqual(deadTimes);
    expect((await api.admin.listDead({ limit: 1 })).map((r) => r.id)).toEqual([newestFirst[0].id]);

    expect(await api.admin.listDead({ type: 'admin.no-such-type' })).toEqual([]);
  });

  it('retryDead puts a dead job back to pending with attempts 0; it runs again and keeps its history', async () => {
    const { id } = await api.producer.enqueue('admin.heal', { account: 7 }, { maxAttempts: 2 });
    const dead = await jobWhen(id, 'dead');
    expect(dead).toMatchObject({ attempts: 2, lastError: 'account 7 is locked' });
    expect(dead.errors.map((e) => e.attempt)).toEqual([1, 2]);

    healed.add(id);
    const retried = await api.admin.retryDead(id);
    expect(retried).toMatchObject({ id, status: 'pending', attempts: 0, deadAt: null, retryAfter: null });
    expect(retried.errors.map((e) => e.attempt)).toEqual([1, 2]);

    const done = await jobWhen(id, 'completed');
    expect(done).toMatchObject({ attempts: 1, deadAt: null, result: { unlocked: 7, attempt: 1 } });
    expect(done.errors.map((e) => [e.attempt, e.error])).toEqual([
      [1, 'account 7 is locked'],
      [2, 'account 7 is locked'],
    ]);
    expect(invocations.get(id)).toEqual([1, 2, 1]);
    // It left the dead-letter list.
    expect((await api.admin.listDead({ type: 'admin.heal' })).map((r) => r.id)).not.toContain(id);
  });

  it('retryDead refuses a job that is not dead, and an unknown id', async () => {
    const { id } = await api.producer.enqueue('admin.quick', { n: 1 });
    await jobWhen(id, 'completed');
    await expect(api.admin.retryDead(id)).rejects.toBeInstanceOf(JobStateError);
    expect(await api.admin.getJob(id)).toMatchObject({ status: 'completed', attempts: 1, result: { echoed: { n: 1 } } });

    const waiting = await api.producer.enqueue('admin.quick', { n: 2 }, { delayMs: 600_000 });
    await expect(api.admin.retryDead(waiting.id)).rejects.toBeInstanceOf(JobStateError);
    expect(await api.admin.getJob(waiting.id)).toMatchObject({ status: 'pending', attempts: 0 });

    await expect(api.admin.retryDead('987654321')).rejects.toBeInstanceOf(JobNotFoundError);
    await expect(api.admin.retryDead('not-an-id')).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('cancel makes a pending job `cancelled`, and it never runs, even once a worker for its type starts', async () => {
    const doomed = await api.producer.enqueue('admin.later', { n: 'doomed' });
    const cancelled = await api.admin.cancel(doomed.id);
    expect(cancelled).toMatchObject({ id: doomed.id, status: 'cancelled', attempts: 0 });
    // Enqueued after the cancelled one: once it has run, the worker has had its chance at both.
    const sentinel = await api.producer.enqueue('admin.later', { n: 'sentinel' });

    const late = await startQueueApp(db.url, { workerId: 'late-worker' }, [LateHandlers]);
    try {
      const done = await jobWhen(sentinel.id, 'completed');
      expect(done.workerId).toBe('late-worker');
    } finally {
      await late.close();
    }
    expect(invocations.has(doomed.id)).toBe(false);
    expect(await api.admin.getJob(doomed.id)).toMatchObject({
      status: 'cancelled',
      attempts: 0,
      claimedAt: null,
      workerId: null,
      completedAt: null,
    });
  });

  it('cancel makes a job waiting for its retry `cancelled`, with no retry left scheduled', async () => {
    const { id } = await api.producer.enqueue('admin.retry-later', {});
    await jobWhen(id, 'failed');
    const cancelled = await api.admin.cancel(id);
    expect(cancelled).toMatchObject({ status: 'cancelled', attempts: 1, retryAfter: null });
    expect(invocations.get(id)).toEqual([1]);
  });

  it('cancel aborts a running job, which ends `cancelled` even though its handler then returns', async () => {
    const { id } = await api.producer.enqueue('admin.block', { waitForAbort: true });
    await waitFor(() => blockSignals.has(id), { message: 'blocking handler running' });
    expect(blockSignals.get(id)!.aborted).toBe(false);

    // Cancelled from the producer-only app: the worker learns it through the database.
    const cancelled = await api.admin.cancel(id);
    expect(cancelled).toMatchObject({ id, status: 'cancelled' });
    const signal = blockSignals.get(id)!;
    // With LISTEN, well within the first lease renewal (leaseMs 30 s → every 10 s): the notification
    // did it. Without LISTEN, the renewal (leaseMs 1.5 s → every 500 ms) found the cancel.
    await waitFor(() => signal.aborted, { timeoutMs: 5_000, message: "the running job's signal to abort" });
    expect(String((signal.reason as Error)?.message ?? signal.reason)).toMatch(/cancel/i);

    // One slot for this type: the next job runs only once the cancelled attempt is fully over.
    const next = await api.producer.enqueue('admin.block', { waitForAbort: false });
    await jobWhen(next.id, 'completed');

    const record = await api.admin.getJob(id);
    expect(record).toMatchObject({ status: 'cancelled', result: null, completedAt: null, attempts: 1, deadAt: null });
    expect(invocations.get(id)).toEqual([1]);
    expect(workerEvents.filter((e) => e.jobId === id && e.kind === 'completed')).toEqual([]);
  });

  it('cancel refuses a completed job and an unknown id', async () => {
    const { id } = await api.producer.enqueue('admin.quick', { n: 3 });
    await jobWhen(id, 'completed');
    await expect(api.admin.cancel(id)).rejects.toBeInstanceOf(JobStateError);
    expect(await api.admin.getJob(id)).toMatchObject({ status: 'completed', result: { echoed: { n: 3 } } });
    await expect(api.admin.cancel('987654321')).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('getJob returns null for unknown ids', async () => {
    expect(await api.admin.getJob('987654321')).toBeNull();
    expect(await api.admin.getJob('0')).toBeNull();
    expect(await api.admin.getJob('abc')).toBeNull();
    expect(await api.admin.getJob('99999999999999999999999')).toBeNull();
  });
});

/** Lets the test hold `stats.*` jobs in `processing` and then let them go. */
let releaseBlocked: () => void = () => undefined;
const blocked = new Promise<void>((resolve) => (releaseBlocked = resolve));

@Injectable()
class StatsHandlers {
  private async run(payload: { do: string }) {
    switch (payload.do) {
      case 'complete':
        return { ok: true };
      case 'fail':
        throw new Error('transient');
      case 'dead':
        throw new PermanentJobError('permanent');
      case 'block':
        await blocked;
        return { ok: true };
      default:
        throw new Error(`unknown ${payload.do}`);
    }
  }

  @JobHandler('stats.a', { baseDelayMs: 600_000, maxDelayMs: 600_000 })
  a(payload: { do: string }) {
    return this.run(payload);
  }

  @JobHandler('stats.b', { baseDelayMs: 600_000, maxDelayMs: 600_000 })
  b(payload: { do: string }) {
    return this.run(payload);
  }
}

describe('JobQueueAdmin.stats()', () => {
  let db: TestDatabase;
  let queue: QueueApp;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    // Its own schema, so the counts are exactly this test's jobs.
    queue = await startQueueApp(db.url, { schema: 'admin_stats', workerId: 'stats-worker', drainTimeoutMs: 1_000 }, [StatsHandlers]);
  });
  afterAll(async () => {
    releaseBlocked();
    await queue?.close();
    await db?.drop();
  });

  it('counts every status in total and per type', async () => {
    const later = { delayMs: 600_000 };
    const jobs = await queue.producer.enqueueMany([
      { type: 'stats.a', payload: { do: 'complete' } },
      { type: 'stats.a', payload: { do: 'complete' } },
      { type: 'stats.a', payload: { do: 'fail' } },
      { type: 'stats.a', payload: { do: 'block' } },
      { type: 'stats.a', payload: { do: 'complete' }, options: later },
      { type: 'stats.a', payload: { do: 'complete' }, options: later },
      { type: 'stats.b', payload: { do: 'complete' } },
      { type: 'stats.b', payload: { do: 'dead' } },
      { type: 'stats.b', payload: { do: 'dead' } },
      { type: 'stats.b', payload: { do: 'complete' }, options: later },
    ]);
    await queue.admin.cancel(jobs[5].id);
    const expected = ['completed', 'completed', 'failed', 'processing', 'pending', 'cancelled', 'completed', 'dead', 'dead', 'pending'];
    await waitFor(
      async () => {
        const rows = await db.query(`SELECT id::text, status FROM admin_stats.jobs`);
        const status = new Map(rows.map((r) => [r.id, r.status]));
        return jobs.every((job, i) => status.get(job.id) === expected[i]);
      },
      { message: 'the planned mix of statuses' },
    );

    const stats = await queue.admin.stats();
    expect(stats).toEqual({
      pending: 2,
      processing: 1,
      completed: 3,
      failed: 1,
      dead: 2,
      cancelled: 1,
      blocked: 0,
      byType: {
        'stats.a': { pending: 1, processing: 1, completed: 2, failed: 1, dead: 0, cancelled: 1, blocked: 0 },
        'stats.b': { pending: 1, processing: 0, completed: 1, failed: 0, dead: 2, cancelled: 0, blocked: 0 },
      },
    });
    // Nothing leaked into the default schema.
    const [{ exists }] = await db.query(`SELECT to_regclass('job_queue.jobs') IS NOT NULL AS exists`);
    if (exists) expect((await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs`))[0].n).toBe(0);

    releaseBlocked();
    await waitFor(async () => (await queue.admin.getJob(jobs[3].id))?.status === 'completed', { message: 'blocked job released' });
    const after = await queue.admin.stats();
    expect(after).toMatchObject({ processing: 0, completed: 4 });
    expect(after.byType['stats.a']).toMatchObject({ processing: 0, completed: 3 });
  });
});
