import { Injectable, type LoggerService, type Provider, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import pg from 'pg';
import type { Subscription } from 'rxjs';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import {
  InvalidJobError,
  JobFailedError,
  JobHandler,
  JobQueueConfigError,
  JobQueueModule,
  JobWaitTimeoutError,
  PermanentJobError,
  type JobContext,
  type JobQueueEvent,
  type JobQueueOptions,
  type JobRecord,
} from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

let db: TestDatabase;

/** A promise with its resolve at hand: the test decides when a paused handler goes on. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** Handler-side wait (the handler's own work), not a test sleep. */
function work(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Business table written by transactional handlers; no unique key, so duplicates would show. */
const BUSINESS_DDL = `
  CREATE TABLE business_rows (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    worker text NOT NULL,
    attempt int NOT NULL,
    note text
  )`;

async function businessRows(jobId: string): Promise<Array<{ worker: string; attempt: number; note: string | null }>> {
  return db.query(`SELECT worker, attempt, note FROM business_rows WHERE job_id = $1 ORDER BY id`, [jobId]);
}

/** Apps and subscriptions a test started; afterEach stops them all, even when the test failed. */
const started: QueueApp[] = [];
const subscriptions: Subscription[] = [];

async function boot(options: Partial<JobQueueOptions>, providers: Array<Provider | Type>): Promise<QueueApp> {
  const queue = await startQueueApp(db.url, options, providers);
  started.push(queue);
  return queue;
}

function record(queue: QueueApp): JobQueueEvent[] {
  const events: JobQueueEvent[] = [];
  subscriptions.push(queue.events.events$.subscribe((event) => events.push(event)));
  return events;
}

async function finished(queue: QueueApp, id: string, timeoutMs = 15_000): Promise<JobRecord> {
  return waitFor(
    async () => {
      const job = await queue.admin.getJob(id);
      return job && ['completed', 'dead', 'cancelled'].includes(job.status) ? job : null;
    },
    { timeoutMs, message: `job ${id} to finish` },
  );
}

/** The error a promise rejects with; fails the test when it resolves instead. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection, but the promise resolved');
}

beforeAll(async () => {
  db = await createTestDatabase(inject('adminUrl'));
  await db.query(BUSINESS_DDL);
});
afterEach(async () => {
  for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
  await Promise.all(started.splice(0).map((queue) => queue.close()));
});
afterAll(async () => {
  await db?.drop();
});

// ---------------------------------------------------------------------------------------------
// (1) Lease lost during a transactional handler

const leaseA = { started: false, returned: false, release: gate() };

@Injectable()
class LeaseHandlerA {
  @JobHandler('eo.lease', { transactional: true, concurrency: 1 })
  async run(_payload: unknown, job: JobContext) {
    await job.manager!.query(`INSERT INTO business_rows (job_id, worker, attempt) VALUES ($1, 'A', $2)`, [job.id, job.attempt]);
    leaseA.started = true;
    // Stalls (a GC pause, a hung call) and ignores its signal: it comes back after losing the lease.
    await leaseA.release.opened;
    leaseA.returned = true;
    return { by: 'A' };
  }
}

@Injectable()
class LeaseHandlerB {
  @JobHandler('eo.lease', { transactional: true })
  async run(_payload: unknown, job: JobContext) {
    await job.manager!.query(`INSERT INTO business_rows (job_id, worker, attempt) VALUES ($1, 'B', $2)`, [job.id, job.attempt]);
    return { by: 'B' };
  }
}

describe('a transactional handler that loses its lease', () => {
  it('commits nothing, while the worker that reclaimed the job completes it exactly once', async () => {
    // A's renewals would come only every 40 s: within this test its lease simply runs out.
    // One slot and no prefetch: A, stuck in its handler, cannot claim the job again once it is reaped.
    const a = await boot({ workerId: 'lease-a', leaseMs: 120_000, maintenanceIntervalMs: 100, concurrency: 1, prefetch: 0 }, [
      LeaseHandlerA,
    ]);
    const eventsA = record(a);
    const { id } = await a.producer.enqueue('eo.lease', { order: 1 });
    await waitFor(() => leaseA.started, { message: "A's handler to insert its row and pause" });

    // No row lock is held for the handler's duration: another session can lock the job row now.
    const locked = await db.query(`SELECT id::text FROM job_queue.jobs WHERE id = $1 FOR UPDATE NOWAIT`, [id]);
    expect(locked).toEqual([{ id }]);
    // A's insert is not visible to anyone while its transaction is open.
    expect(await businessRows(id)).toEqual([]);

    const b = await boot({ workerId: 'lease-b', maintenanceIntervalMs: 100 }, [LeaseHandlerB]);
    const eventsB = record(b);
    // A's lease runs out (its renewals failing), the reaper takes the job back, and B runs it.
    const completedByB = await waitFor(
      async () => {
        await db.query(
          `UPDATE job_queue.jobs SET lease_expires_at = now() - interval '1 second'
           WHERE id = $1 AND status = 'processing' AND worker_id = 'lease-a'`,
          [id],
        );
        const job = await b.admin.getJob(id);
        return job?.status === 'completed' ? job : null;
      },
      { timeoutMs: 20_000, message: 'B to reclaim and complete the job' },
    );
    expect(completedByB).toMatchObject({ status: 'completed', workerId: 'lease-b', result: { by: 'B' }, attempts: 2 });
    expect(leaseA.returned).toBe(false);
    expect(await businessRows(id)).toEqual([{ worker: 'B', attempt: 2, note: null }]);

    // A comes back and returns a result: its commit is refused, and it learns it lost the lease.
    leaseA.release.open();
    await waitFor(() => eventsA.find((e) => e.kind === 'lease-lost' && e.jobId === id), {
      message: "A's lease-lost event",
    });
    expect(leaseA.returned).toBe(true);
    expect(await businessRows(id)).toEqual([{ worker: 'B', attempt: 2, note: null }]);
    const final = await b.admin.getJob(id);
    expect(final).toMatchObject({ status: 'completed', workerId: 'lease-b', result: { by: 'B' }, attempts: 2 });
    expect(final!.completedAt).toEqual(completedByB.completedAt);
    expect([...eventsA, ...eventsB].filter((e) => e.kind === 'completed' && e.jobId === id)).toHaveLength(1);
    expect(eventsB.filter((e) => e.kind === 'completed' && e.jobId === id)).toHaveLength(1);
    // A's transaction is over (rolled back), not left open holding a connection. The maintenance
    // leader's own short transactions come and go (every 100 ms here): a leak is one that stays.
    await waitFor(
      async () => {
        const [open] = await db.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
        );
        return open.n === 0;
      },
      { timeoutMs: 3_000, message: 'no transaction left open' },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// (2) Failed attempts roll back their writes

@Injectable()
class FlakyTransactional {
  @JobHandler('eo.flaky', { transactional: true, maxAttempts: 5, baseDelayMs: 10, maxDelayMs: 20 })
  async run(_payload: unknown, job: JobContext) {
    await job.manager!.query(`INSERT INTO business_rows (job_id, worker, attempt) VALUES ($1, 'flaky', $2)`, [job.id, job.attempt]);
    if (job.attempt < 3) throw new Error(`flaky: attempt ${job.attempt} failed after its insert`);
    return { attempt: job.attempt };
  }
}

describe('a transactional handler that throws', () => {
  it('leaves no write behind from failed attempts: one row after success on attempt 3', async () => {
    const queue = await boot({ workerId: 'flaky-w' }, [FlakyTransactional]);
    const { id } = await queue.producer.enqueue('eo.flaky', {});
    const job = await finished(queue, id);
    expect(job).toMatchObject({ status: 'completed', attempts: 3, result: { attempt: 3 } });
    expect(job.errors).toHaveLength(2);
    expect(job.errors.map((e) => e.attempt)).toEqual([1, 2]);
    expect(job.errors[0].error).toContain('flaky: attempt 1 failed');
    expect(await businessRows(id)).toEqual([{ worker: 'flaky', attempt: 3, note: null }]);
  });
});

// ---------------------------------------------------------------------------------------------
// (2b) A transactional handler that times out, ignores its signal and writes on

const stubborn = { lateError: null as Error | null, done: false };

@Injectable()
class StubbornTransactional {
  @JobHandler('eo.stubborn', { transactional: true, timeoutMs: 500, maxAttempts: 1 })
  async run(_payload: unknown, job: JobContext) {
    const insert = (note: string) =>
      job.manager!.query(`INSERT INTO business_rows (job_id, worker, attempt, note) VALUES ($1, 'stubborn', $2, $3)`, [
        job.id,
        job.attempt,
        note,
      ]);
    await insert('before');
    // A statement that outlasts the timeout: the attempt ends while it runs.
    await job.manager!.query(`SELECT pg_sleep(1.5)`).catch(() => undefined);
    try {
      await insert('after');
    } catch (error) {
      stubborn.lateError = error as Error;
    }
    stubborn.done = true;
  }
}

describe('a transactional handler that times out and writes on', () => {
  it('commits none of its writes, not even one sent after the attempt ended', async () => {
    const queue = await boot({ workerId: 'stubborn-w' }, [StubbornTransactional]);
    const { id } = await queue.producer.enqueue('eo.stubborn', {});
    expect(await finished(queue, id)).toMatchObject({ status: 'dead', attempts: 1 });
    await waitFor(() => stubborn.done, { message: 'the handler to run to its end' });
    // Its late write failed rather than run on its own once the transaction was over.
    expect(stubborn.lateError).toBeInstanceOf(Error);
    expect(await businessRows(id)).toEqual([]);
    await waitFor(
      async () => {
        const [open] = await db.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid()
             AND (state LIKE 'idle in transaction%' OR (state = 'active' AND query LIKE '%pg_sleep(1.5)%'))`,
        );
        return open.n === 0;
      },
      { timeoutMs: 3_000, message: 'the timed-out transaction to be gone' },
    );
    expect(await businessRows(id)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// (2b') A transactional handler that times out while its statement waits for a lock

const blocked = { started: false };

@Injectable()
class BlockedTransactional {
  @JobHandler('eo.blocked', { transactional: true, timeoutMs: 400, maxAttempts: 1 })
  async run(_payload: unknown, job: JobContext) {
    blocked.started = true;
    // Waits for the row lock the test holds, far longer than timeoutMs.
    await job.manager!.query(`UPDATE business_rows SET note = 'blocked' WHERE note = 'locked'`).catch(() => undefined);
  }
}

describe('a transactional handler that times out while its statement waits for a lock', () => {
  it("leaves no backend behind holding the job's transaction open", async () => {
    const [{ id: rowId }] = await db.query(
      `INSERT INTO business_rows (job_id, worker, attempt, note) VALUES (0, 'test', 0, 'locked') RETURNING id`,
    );
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM business_rows WHERE id = $1 FOR UPDATE`, [rowId]);
      const queue = await boot({ workerId: 'blocked-w' }, [BlockedTransactional]);
      const { id } = await queue.producer.enqueue('eo.blocked', {});
      expect(await finished(queue, id)).toMatchObject({ status: 'dead', attempts: 1 });
      // Its backend was cancelled: nothing is left waiting for the lock, which the test still holds.
      await waitFor(
        async () => {
          const [waiting] = await db.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%SET note = ''blocked''%'`,
          );
          return waiting.n === 0;
        },
        { timeoutMs: 3_000, message: 'the timed-out statement to stop waiting for the lock' },
      );
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    expect(blocked.started).toBe(true);
    expect(await db.query(`SELECT note FROM business_rows WHERE id = $1`, [rowId])).toEqual([{ note: 'locked' }]);
  });
});

// ---------------------------------------------------------------------------------------------
// (2c) A transactional handler that outlasts its lease renewals, under a stricter isolation level

@Injectable()
class LongTransactional {
  @JobHandler('eo.long-tx', { transactional: true, maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 20 })
  async run(_payload: unknown, job: JobContext) {
    await job.manager!.query(`INSERT INTO business_rows (job_id, worker, attempt) VALUES ($1, 'long', $2)`, [job.id, job.attempt]);
    // Outlasts two renewals of its lease (every leaseMs / 3), each an update of the job's row.
    await work(1_200);
    return { attempt: job.attempt };
  }
}

describe('a transactional handler that outlasts its lease renewals', () => {
  it('completes even when the DataSource defaults transactions to SERIALIZABLE', async () => {
    const queue = await boot(
      { workerId: 'long-tx', leaseMs: 1_500, dataSource: { type: 'postgres', url: db.url, isolationLevel: 'SERIALIZABLE' } },
      [LongTransactional],
    );
    const { id } = await queue.producer.enqueue('eo.long-tx', {});
    expect(await finished(queue, id)).toMatchObject({ status: 'completed', attempts: 1, result: { attempt: 1 } });
    expect(await businessRows(id)).toEqual([{ worker: 'long', attempt: 1, note: null }]);
  });
});

// ---------------------------------------------------------------------------------------------
// (3) job.enqueue inside the handler's transaction

const followUps: string[] = [];
const visibleBeforeCommit: Record<string, number> = {};

@Injectable()
class ParentHandler {
  @JobHandler('eo.parent', { transactional: true, maxAttempts: 1 })
  async run(payload: { tag: string; fail: boolean }, job: JobContext) {
    const child = await job.enqueue('eo.follow-up', { tag: payload.tag });
    // Another session cannot see the follow-up before the handler's transaction commits.
    const [row] = await db.query(
      `SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'eo.follow-up' AND payload->>'tag' = $1`,
      [payload.tag],
    );
    visibleBeforeCommit[payload.tag] = row.n;
    if (payload.fail) throw new Error('parent failed after enqueueing its follow-up');
    return { child: child.id };
  }
}

@Injectable()
class FollowUpHandler {
  @JobHandler('eo.follow-up')
  async run(payload: { tag: string }) {
    followUps.push(payload.tag);
    return { done: payload.tag };
  }
}

describe('job.enqueue in a transactional handler', () => {
  it('adds the follow-up only if the handler commits', async () => {
    const queue = await boot({ workerId: 'parent-w' }, [ParentHandler, FollowUpHandler]);
    const failing = await queue.producer.enqueue('eo.parent', { tag: 'doomed', fail: true });
    const ok = await queue.producer.enqueue('eo.parent', { tag: 'kept', fail: false });

    const failed = await finished(queue, failing.id);
    expect(failed.status).toBe('dead');
    expect(failed.lastError).toContain('parent failed after enqueueing');
    expect(visibleBeforeCommit.doomed).toBe(0);

    const parent = await finished(queue, ok.id);
    expect(parent.status).toBe('completed');
    expect(visibleBeforeCommit.kept).toBe(0);
    const childId = (parent.result as { child: string }).child;
    const child = await finished(queue, childId);
    expect(child).toMatchObject({ type: 'eo.follow-up', status: 'completed', payload: { tag: 'kept' }, result: { done: 'kept' } });

    const rows = await db.query(`SELECT payload->>'tag' AS tag FROM job_queue.jobs WHERE type = 'eo.follow-up' ORDER BY id`);
    expect(rows).toEqual([{ tag: 'kept' }]);
    expect(followUps).toEqual(['kept']);
  });
});

// ---------------------------------------------------------------------------------------------
// (4) + (5) job.manager only in transactional handlers; results stored

const managers: Record<string, string> = {};

@Injectable()
class ResultHandlers {
  @JobHandler('eo.plain')
  async plain(payload: { n: number }, job: JobContext) {
    managers.plain = typeof job.manager;
    managers.plainHasKey = String('manager' in job && job.manager !== undefined);
    return { plain: payload.n * 2, nested: { list: [1, 'two', null], ok: true } };
  }

  @JobHandler('eo.tx-result', { transactional: true })
  async transactional(payload: { n: number }, job: JobContext) {
    managers.transactional = typeof job.manager?.query;
    const [row] = await job.manager!.query(`SELECT $1::int + 1 AS next`, [payload.n]);
    return { transactional: row.next };
  }
}

describe('handler context and results', () => {
  it('gives job.manager to transactional handlers only', async () => {
    const queue = await boot({ workerId: 'result-w' }, [ResultHandlers]);
    const plain = await queue.producer.enqueue('eo.plain', { n: 1 });
    const tx = await queue.producer.enqueue('eo.tx-result', { n: 1 });
    await finished(queue, plain.id);
    await finished(queue, tx.id);
    expect(managers.plain).toBe('undefined');
    expect(managers.plainHasKey).toBe('false');
    expect(managers.transactional).toBe('function');
  });

  it("stores the handler's return value as result, for plain and transactional handlers", async () => {
    const queue = await boot({ workerId: 'result-w' }, [ResultHandlers]);
    const plain = await queue.producer.enqueue('eo.plain', { n: 21 });
    const tx = await queue.producer.enqueue('eo.tx-result', { n: 41 });
    expect(await finished(queue, plain.id)).toMatchObject({
      status: 'completed',
      result: { plain: 42, nested: { list: [1, 'two', null], ok: true } },
    });
    expect(await finished(queue, tx.id)).toMatchObject({ status: 'completed', result: { transactional: 42 } });
    const rows = await db.query(`SELECT j.id::text, j.result FROM job_queue.jobs j WHERE j.id = ANY($1::bigint[]) ORDER BY j.id`, [
      [plain.id, tx.id],
    ]);
    expect(rows).toEqual([
      { id: plain.id, result: { plain: 42, nested: { list: [1, 'two', null], ok: true } } },
      { id: tx.id, result: { transactional: 42 } },
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// (6) enqueueAndWait

@Injectable()
class WaitHandlers {
  @JobHandler('eo.wait.ok')
  async ok(payload: { n: number }, job: JobContext) {
    return { doubled: payload.n * 2, attempt: job.attempt };
  }

  @JobHandler('eo.wait.fail')
  async fail() {
    throw new PermanentJobError('card declined: insufficient funds');
  }
}

@Injectable()
class RemoteWaitHandler {
  @JobHandler('eo.wait.remote', { transactional: true })
  async run(payload: { n: number }) {
    return { answer: payload.n * 2, by: 'wait-worker' };
  }
}

describe('enqueueAndWait', () => {
  it("resolves with the handler's result", async () => {
    const queue = await boot({ workerId: 'wait-w' }, [WaitHandlers]);
    await expect(queue.producer.enqueueAndWait('eo.wait.ok', { n: 21 }, { timeoutMs: 15_000 })).resolves.toEqual({
      doubled: 42,
      attempt: 1,
    });
  });

  it('rejects with the dead-letter reason', async () => {
    const queue = await boot({ workerId: 'wait-w' }, [WaitHandlers]);
    const error = await rejectionOf(queue.producer.enqueueAndWait('eo.wait.fail', {}, { timeoutMs: 15_000 }));
    expect(error).toBeInstanceOf(JobFailedError);
    expect(error.message).toContain('card declined: insufficient funds');
  });

  it('rejects with JobWaitTimeoutError when no worker runs the type', async () => {
    const queue = await boot({ workerId: 'wait-w' }, [WaitHandlers]);
    const error = await rejectionOf(queue.producer.enqueueAndWait('eo.wait.nobody', {}, { timeoutMs: 400 }));
    expect(error).toBeInstanceOf(JobWaitTimeoutError);
    const [row] = await db.query(`SELECT status FROM job_queue.jobs WHERE type = 'eo.wait.nobody'`);
    expect(row.status).toBe('pending');
  });

  it('waits out its whole timeout when the wall clock steps forward meanwhile', async () => {
    const queue = await boot({ runWorker: false }, []);
    // Only the wall clock is faked (Date, moving with real time); timers keep real time.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    try {
      let settled = false;
      const waiting = queue.producer.enqueueAndWait('eo.wait.step', {}, { timeoutMs: 10_000 });
      void waiting.catch(() => undefined).finally(() => (settled = true));
      const stepJob = `SELECT id::text AS id FROM job_queue.jobs WHERE type = 'eo.wait.step'`;
      const row = await waitFor(async () => (await db.query<{ id: string }>(stepJob))[0]);
      // NTP, or a resumed VM: an hour later by the wall clock, a moment later in fact.
      vi.setSystemTime(Date.now() + 3_600_000);
      await new Promise((resolve) => setTimeout(resolve, 1_100)); // past the waiter's longest poll
      expect(settled).toBe(false);
      await queue.admin.cancel(row.id);
      expect(await rejectionOf(waiting)).toBeInstanceOf(JobFailedError);
    } finally {
      vi.useRealTimers();
    }
  });

  it('works from a producer-only module while another module runs the handler', async () => {
    const producerOnly = await boot({ runWorker: false }, []);
    await boot({ workerId: 'wait-worker' }, [RemoteWaitHandler]);
    const result = await producerOnly.producer.enqueueAndWait('eo.wait.remote', { n: 50 }, { timeoutMs: 15_000 });
    expect(result).toEqual({ answer: 100, by: 'wait-worker' });
  });

  it('rejects InvalidJobError for a missing or negative timeoutMs, writing nothing', async () => {
    const queue = await boot({ workerId: 'wait-w' }, [WaitHandlers]);
    const missing = await rejectionOf(queue.producer.enqueueAndWait('eo.wait.invalid', {}, {} as never));
    expect(missing).toBeInstanceOf(InvalidJobError);
    expect(missing.message).toContain('timeoutMs');
    const negative = await rejectionOf(queue.producer.enqueueAndWait('eo.wait.invalid', {}, { timeoutMs: -5 }));
    expect(negative).toBeInstanceOf(InvalidJobError);
    expect(negative.message).toContain('timeoutMs');
    const noOptions = await rejectionOf(queue.producer.enqueueAndWait('eo.wait.invalid', {}, undefined as never));
    expect(noOptions).toBeInstanceOf(InvalidJobError);
    const [row] = await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'eo.wait.invalid'`);
    expect(row.n).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// (7) job.once

const onceCalls: Array<{ job: string; key: string; attempt: number }> = [];
const onceSeen: Array<{ job: string; attempt: number; charge: unknown; receipt: unknown }> = [];

@Injectable()
class OnceHandler {
  @JobHandler('eo.once', { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 })
  async run(payload: { failFirst: boolean }, job: JobContext) {
    const charge = await job.once('charge', async () => {
      onceCalls.push({ job: job.id, key: 'charge', attempt: job.attempt });
      return { chargeId: `ch_${job.id}`, amount: 4200, at: new Date(Date.UTC(2025, 0, 2)) };
    });
    if (payload.failFirst && job.attempt === 1) {
      onceSeen.push({ job: job.id, attempt: job.attempt, charge, receipt: null });
      throw new Error('failed after charging');
    }
    const receipt = await job.once('receipt', () => {
      onceCalls.push({ job: job.id, key: 'receipt', attempt: job.attempt });
      return `receipt for ${job.id}`;
    });
    onceSeen.push({ job: job.id, attempt: job.attempt, charge, receipt });
    return { charge, receipt };
  }
}

describe('job.once', () => {
  it('does not repeat an effect an earlier attempt recorded, and returns its stored JSON result', async () => {
    const queue = await boot({ workerId: 'once-w' }, [OnceHandler]);
    const first = await queue.producer.enqueue('eo.once', { failFirst: true });
    const second = await queue.producer.enqueue('eo.once', { failFirst: false });
    const job = await finished(queue, first.id);
    expect(job).toMatchObject({ status: 'completed', attempts: 2 });
    await finished(queue, second.id);

    // The charge ran once for the first job, on attempt 1; attempt 2 got the stored JSON.
    expect(onceCalls.filter((c) => c.job === first.id)).toEqual([
      { job: first.id, key: 'charge', attempt: 1 },
      { job: first.id, key: 'receipt', attempt: 2 },
    ]);
    const seen = onceSeen.filter((s) => s.job === first.id);
    expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
    expect(seen[0].charge).toEqual({ chargeId: `ch_${first.id}`, amount: 4200, at: new Date(Date.UTC(2025, 0, 2)) });
    expect(seen[1].charge).toEqual({ chargeId: `ch_${first.id}`, amount: 4200, at: '2025-01-02T00:00:00.000Z' });
    expect(seen[1].receipt).toBe(`receipt for ${first.id}`);

    // Keys and jobs are independent: the second job charged for itself, once.
    expect(onceCalls.filter((c) => c.job === second.id)).toEqual([
      { job: second.id, key: 'charge', attempt: 1 },
      { job: second.id, key: 'receipt', attempt: 1 },
    ]);

    const ledger = await db.query(
      `SELECT e.job_id::text, e.key, e.result, e.attempt FROM job_queue.job_effects e
       WHERE e.job_id = ANY($1::bigint[]) ORDER BY e.job_id, e.key`,
      [[first.id, second.id]],
    );
    expect(ledger).toEqual([
      {
        job_id: first.id,
        key: 'charge',
        result: { chargeId: `ch_${first.id}`, amount: 4200, at: '2025-01-02T00:00:00.000Z' },
        attempt: 1,
      },
      { job_id: first.id, key: 'receipt', result: `receipt for ${first.id}`, attempt: 2 },
      {
        job_id: second.id,
        key: 'charge',
        result: { chargeId: `ch_${second.id}`, amount: 4200, at: '2025-01-02T00:00:00.000Z' },
        attempt: 1,
      },
      { job_id: second.id, key: 'receipt', result: `receipt for ${second.id}`, attempt: 1 },
    ]);
  });
});

const cutOnce = { calls: 0, seen: [] as unknown[] };

@Injectable()
class CutResultOnce {
  @JobHandler('eo.once.cut', { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 20 })
  async run(_payload: unknown, job: JobContext) {
    const greeting = await job.once('greet', () => {
      cutOnce.calls++;
      // A preview cut inside an emoji: half a character, which jsonb cannot store.
      return '👋 hello'.slice(0, 1);
    });
    cutOnce.seen.push(greeting);
    if (job.attempt === 1) throw new Error('fails once, after the effect');
  }
}

describe('job.once with a result jsonb cannot store', () => {
  it('records the effect (with a null result), so the retry does not repeat it', async () => {
    const queue = await boot({ workerId: 'once-cut-w' }, [CutResultOnce]);
    const { id } = await queue.producer.enqueue('eo.once.cut', {});
    expect(await finished(queue, id)).toMatchObject({ status: 'completed', attempts: 2 });
    expect(cutOnce.calls).toBe(1);
    expect(cutOnce.seen).toEqual(['\ud83d', null]);
  });
});

// ---------------------------------------------------------------------------------------------
// (8) Pool guard for transactional handlers

const pool = { current: 0, max: 0, finished: 0, seenByFast: [] as number[] };

@Injectable()
class PoolSlowTransactional {
  @JobHandler('eo.pool.slow', { transactional: true })
  async run(_payload: unknown, job: JobContext) {
    pool.current++;
    pool.max = Math.max(pool.max, pool.current);
    try {
      await job.manager!.query(`INSERT INTO business_rows (job_id, worker, attempt, note) VALUES ($1, 'pool', $2, 'slow')`, [
        job.id,
        job.attempt,
      ]);
      // Longer than leaseMs: only lease renewals (which need a free connection) keep the job.
      await work(3_000);
    } finally {
      pool.current--;
      pool.finished++;
    }
    return { attempt: job.attempt };
  }
}

@Injectable()
class PoolFastPlain {
  @JobHandler('eo.pool.fast')
  async run() {
    pool.seenByFast.push(pool.current);
    return { fast: true };
  }
}

const quiet: LoggerService | undefined = process.env.AJQ_TEST_LOGS
  ? undefined
  : { log() {}, warn() {}, error() {}, debug() {}, verbose() {} };

describe('connection pool guard for transactional handlers', () => {
  it('fails the boot with JobQueueConfigError when the pool cannot spare a connection', async () => {
    const builder = Test.createTestingModule({
      imports: [
        JobQueueModule.forRoot({
          workerId: 'pool-3',
          dataSource: { type: 'postgres', url: db.url, poolSize: 3 },
        }),
      ],
      providers: [PoolSlowTransactional],
    });
    if (quiet) builder.setLogger(quiet);
    const app = await builder.compile();
    let booted = false;
    try {
      await app.init();
      booted = true;
    } catch (error) {
      expect(error).toBeInstanceOf(JobQueueConfigError);
      expect((error as Error).message).toMatch(/raise the pool size/i);
      expect((error as Error).message).toContain('eo.pool.slow');
    } finally {
      await app.close().catch(() => undefined);
    }
    expect(booted).toBe(false);
  });

  // With LISTEN the pool keeps 3 connections back (claims, renewals, LISTEN); without it (the
  // AJQ_TEST_LISTEN=false pass), 2. Four slow jobs exceed either capacity.
  const listening = process.env.AJQ_TEST_LISTEN !== 'false';
  const capacity = 5 - (listening ? 3 : 2);
  it(`runs at most poolSize - ${listening ? 3 : 2} transactional jobs at once (listen: ${listening}), while other types and renewals go on`, async () => {
    const queue = await boot(
      {
        workerId: 'pool-5',
        concurrency: 10,
        leaseMs: 1_000,
        maintenanceIntervalMs: 200,
        dataSource: { type: 'postgres', url: db.url, poolSize: 5 },
      },
      [PoolSlowTransactional, PoolFastPlain],
    );
    const events = record(queue);
    const slow = await queue.producer.enqueueMany(Array.from({ length: 4 }, (_, n) => ({ type: 'eo.pool.slow', payload: { n } })));
    await waitFor(() => pool.current === capacity, { message: `${capacity} transactional jobs running` });

    // Every transactional slot is taken; a plain job still runs at once.
    const fast = await queue.producer.enqueueMany(Array.from({ length: 3 }, (_, n) => ({ type: 'eo.pool.fast', payload: { n } })));
    for (const { id } of fast) expect((await finished(queue, id)).status).toBe('completed');
    expect(pool.seenByFast).toHaveLength(3);
    expect(pool.seenByFast.every((running) => running >= 1)).toBe(true);
    expect(pool.seenByFast).toContain(capacity);

    const records = [];
    for (const { id } of slow) records.push(await finished(queue, id, 30_000));
    expect(pool.max).toBe(capacity);
    for (const job of records) {
      expect(job).toMatchObject({ status: 'completed', attempts: 1, errors: [], result: { attempt: 1 } });
    }
    expect(events.filter((e) => e.kind === 'lease-lost' || e.kind === 'lease-expired')).toEqual([]);
    const [rows] = await db.query(`SELECT count(*)::int AS n FROM business_rows WHERE note = 'slow'`);
    expect(rows.n).toBe(4);
  });
});
