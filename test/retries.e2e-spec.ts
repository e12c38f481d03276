import { Injectable } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { JobHandler, JobTimeoutError, PermanentJobError, type JobContext, type JobQueueEvent } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Failure discipline on real PostgreSQL: retries with capped, jittered exponential backoff,
 * dead letters with their error history, poison payloads, permanent errors, timeouts, handlers
 * that throw odd values, and the events that report all of it.
 */

/** Every invocation of a handler, by job id: what the handler saw. */
const invocations = new Map<string, Array<{ attempt: number; maxAttempts: number; payload: unknown; at: number }>>();

function recordCall(payload: unknown, job: JobContext): void {
  const calls = invocations.get(job.id) ?? [];
  calls.push({ attempt: job.attempt, maxAttempts: job.maxAttempts, payload, at: Date.now() });
  invocations.set(job.id, calls);
}

function callsOf(id: string) {
  return invocations.get(id) ?? [];
}

/** A payload schema with a transform: the handler must receive parse()'s output, not the raw payload. */
const orderSchema = z
  .object({ orderId: z.string().min(1), quantity: z.number().int().positive() })
  .transform((order) => ({ ...order, quantity: order.quantity * 10, validated: true as const }));

@Injectable()
class RetryHandlers {
  @JobHandler('retry.always-fails', { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 100 })
  async alwaysFails(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    throw new Error(`downstream refused (attempt ${job.attempt})`);
  }

  @JobHandler('retry.fails-twice', { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 100 })
  async failsTwice(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    if (job.attempt < 3) throw new Error(`flaky (attempt ${job.attempt})`);
    return { succeededOn: job.attempt };
  }

  /** Fails its first attempt with a long backoff, so the waiting state can be inspected at leisure. */
  @JobHandler('retry.waits', { maxAttempts: 3, baseDelayMs: 30_000, maxDelayMs: 30_000 })
  async waits(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    throw new Error('service temporarily unavailable');
  }

  /** Attempt 1 backs off within [500, 1000] ms, attempt 2 within [750, 1500] ms (capped), then it succeeds. */
  @JobHandler('retry.jitter', { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 1_500 })
  async jitter(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    if (job.attempt < 3) throw new Error(`jitter probe (attempt ${job.attempt})`);
    return null;
  }

  @JobHandler('retry.schema', { schema: orderSchema, baseDelayMs: 20, maxDelayMs: 100 })
  async schema(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    return { received: payload };
  }

  @JobHandler('retry.permanent', { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 100 })
  async permanent(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    throw new PermanentJobError('card declined: retrying cannot help');
  }
}

/** How the slot handlers were called, for the concurrency-1 app. */
const hangSignals = new Map<string, AbortSignal>();

@Injectable()
class SlotHandlers {
  /** Never settles, whatever its signal says. */
  @JobHandler('slot.hang', { timeoutMs: 300, maxAttempts: 1 })
  hang(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    hangSignals.set(job.id, job.signal);
    return new Promise<never>(() => undefined);
  }

  /** Not async on purpose: the 'sync' case throws before any promise exists. */
  @JobHandler('slot.throws', { maxAttempts: 1 })
  throws(payload: { how: string }, job: JobContext): unknown {
    recordCall(payload, job);
    switch (payload.how) {
      case 'string':
        throw 'plain string thrown';
      case 'undefined':
        throw undefined;
      case 'null':
        throw null;
      case 'reject-object':
        return Promise.reject({ code: 42, reason: 'object rejection' });
      case 'reject-number':
        return Promise.reject(404);
      case 'sync':
        throw new TypeError('synchronous explosion');
      default:
        throw new Error(`unknown mode ${payload.how}`);
    }
  }

  @JobHandler('slot.ok')
  async ok(payload: { n: number }, job: JobContext) {
    recordCall(payload, job);
    return { n: payload.n };
  }
}

describe('retries, dead letters and failure handling', () => {
  let db: TestDatabase;
  let queue: QueueApp;
  const events: JobQueueEvent[] = [];
  let subscription: Subscription | undefined;

  async function jobWhen(id: string, status: string, timeoutMs = 15_000) {
    return waitFor(
      async () => {
        const job = await queue.admin.getJob(id);
        return job?.status === status ? job : null;
      },
      { timeoutMs, message: `job ${id} to be ${status}` },
    );
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    queue = await startQueueApp(db.url, { workerId: 'retry-worker', concurrency: 25 }, [RetryHandlers]);
    subscription = queue.events.events$.subscribe((event) => events.push(event));
    // Test instrumentation, not part of the library: remember each row exactly as it was when it
    // became `failed` (a later claim clears retry_after), so every backoff can be measured.
    await db.query(`CREATE TABLE retry_audit (
      job_id bigint NOT NULL, attempts int NOT NULL, failed_at timestamptz, retry_after timestamptz, run_at timestamptz)`);
    await db.query(`CREATE FUNCTION record_retry() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO retry_audit VALUES (NEW.id, NEW.attempts, (NEW.errors -> -1 ->> 'at')::timestamptz, NEW.retry_after, NEW.run_at);
        RETURN NULL;
      END $$`);
    await db.query(`CREATE TRIGGER jobs_retry_audit AFTER UPDATE ON job_queue.jobs FOR EACH ROW
      WHEN (NEW.status = 'failed' AND OLD.status IS DISTINCT FROM 'failed') EXECUTE FUNCTION record_retry()`);
  });
  afterAll(async () => {
    subscription?.unsubscribe();
    await queue?.close();
    await db?.drop();
  });

  it('runs an always-failing job exactly maxAttempts times, then dead-letters it with its error history', async () => {
    const { id } = await queue.producer.enqueue('retry.always-fails', { to: 'nobody' });
    const record = await jobWhen(id, 'dead');

    expect(callsOf(id).map((c) => c.attempt)).toEqual([1, 2, 3]);
    expect(callsOf(id).every((c) => c.maxAttempts === 3)).toBe(true);
    expect(record).toMatchObject({ status: 'dead', attempts: 3, maxAttempts: 3, lastError: 'downstream refused (attempt 3)' });
    expect(record.deadAt).toBeInstanceOf(Date);
    expect(record.completedAt).toBeNull();
    expect(record.retryAfter).toBeNull();
    expect(record.errors.map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(record.errors.map((e) => e.error)).toEqual([
      'downstream refused (attempt 1)',
      'downstream refused (attempt 2)',
      'downstream refused (attempt 3)',
    ]);
    expect(record.errors.every((e) => e.workerId === 'retry-worker')).toBe(true);
    const times = record.errors.map((e) => new Date(e.at).getTime());
    expect(times.every((t) => Number.isFinite(t))).toBe(true);
    expect([...times].sort((a, b) => a - b)).toEqual(times);

    // Dead is final: after a newer job went through a whole retry cycle, there was still no 4th run.
    const probe = await queue.producer.enqueue('retry.fails-twice', { probe: true });
    await jobWhen(probe.id, 'completed');
    expect(callsOf(id)).toHaveLength(3);
    const [row] = await db.query(`SELECT status, attempts FROM job_queue.jobs WHERE id = $1`, [id]);
    expect(row).toEqual({ status: 'dead', attempts: 3 });
  });

  it('completes a job that fails twice and then succeeds, on its last allowed attempt', async () => {
    const { id } = await queue.producer.enqueue('retry.fails-twice', { n: 1 });
    const record = await jobWhen(id, 'completed');
    expect(callsOf(id).map((c) => c.attempt)).toEqual([1, 2, 3]);
    expect(record).toMatchObject({ status: 'completed', attempts: 3, maxAttempts: 3, deadAt: null, result: { succeededOn: 3 } });
    expect(record.completedAt).toBeInstanceOf(Date);
    expect(record.errors.map((e) => [e.attempt, e.error])).toEqual([
      [1, 'flaky (attempt 1)'],
      [2, 'flaky (attempt 2)'],
    ]);
  });

  it('keeps a job waiting for its retry as `failed`, with retry_after in the future and last_error set', async () => {
    const { id } = await queue.producer.enqueue('retry.waits', { n: 2 });
    await waitFor(() => callsOf(id).length === 1, { message: 'first attempt' });
    const record = await jobWhen(id, 'failed');
    expect(record).toMatchObject({ status: 'failed', attempts: 1, lastError: 'service temporarily unavailable', deadAt: null });
    expect(record.retryAfter).toBeInstanceOf(Date);
    expect(record.errors).toHaveLength(1);

    // Judged by the database clock: the retry is 15 to 30 s away (jittered half of a 30 s base).
    const [row] = await db.query(
      `SELECT status, retry_after > clock_timestamp() AS in_future, run_at = retry_after AS runs_then,
              extract(epoch FROM retry_after - (errors -> 0 ->> 'at')::timestamptz) * 1000 AS delay_ms,
              lease_expires_at, last_error
       FROM job_queue.jobs WHERE id = $1`,
      [id],
    );
    expect(row).toMatchObject({ status: 'failed', in_future: true, runs_then: true, lease_expires_at: null });
    expect(Number(row.delay_ms)).toBeGreaterThanOrEqual(15_000);
    expect(Number(row.delay_ms)).toBeLessThanOrEqual(30_000);

    const scheduled = events.find((e) => e.kind === 'retry-scheduled' && e.jobId === id);
    expect(scheduled).toMatchObject({ type: 'retry.waits', attempt: 1, error: 'service temporarily unavailable' });
    expect(Math.abs(scheduled!.delayMs! - Number(row.delay_ms))).toBeLessThan(1);
    // Still waiting: no second run happened before its time.
    expect(callsOf(id)).toHaveLength(1);
    expect((await queue.admin.getJob(id))?.status).toBe('failed');
  });

  it('spreads retry delays with jitter, grows them per attempt and caps them at maxDelayMs', async () => {
    const count = 200;
    const results = await queue.producer.enqueueMany(Array.from({ length: count }, (_, n) => ({ type: 'retry.jitter', payload: { n } })));
    const ids = results.map((r) => r.id);
    await waitFor(
      async () => {
        const [row] = await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'`, [
          ids,
        ]);
        return row.n === count;
      },
      { timeoutMs: 40_000, message: 'all jitter jobs completed' },
    );
    const audit = await db.query<{ job_id: string; attempts: number; delay_ms: number; same: boolean }>(
      `SELECT job_id::text, attempts, extract(epoch FROM retry_after - failed_at)::float8 * 1000 AS delay_ms,
              run_at = retry_after AS same
       FROM retry_audit WHERE job_id = ANY($1::bigint[])`,
      [ids],
    );
    const first = audit.filter((a) => a.attempts === 1).map((a) => a.delay_ms);
    const second = audit.filter((a) => a.attempts === 2).map((a) => a.delay_ms);
    expect(first).toHaveLength(count);
    expect(second).toHaveLength(count);
    expect(audit.every((a) => a.same)).toBe(true);

    // Attempt 1: base 1000 → a delay within [base/2, base].
    expect(Math.min(...first)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...first)).toBeLessThanOrEqual(1_000);
    // Attempt 2: 2·base = 2000 is capped at 1500 → within [750, 1500], never above maxDelayMs.
    expect(Math.min(...second)).toBeGreaterThanOrEqual(750);
    expect(Math.max(...second)).toBeLessThanOrEqual(1_500);
    // They grow: attempt-2 delays are larger on average.
    expect(mean(second)).toBeGreaterThan(mean(first) + 150);

    // Jitter: the 200 jobs that failed together do not all retry together.
    for (const delays of [first, second]) {
      expect(new Set(delays.map((d) => Math.round(d))).size).toBeGreaterThan(80);
      expect(stddev(delays)).toBeGreaterThan(60);
    }
    // Both halves of the window are used.
    expect(first.filter((d) => d < 700).length).toBeGreaterThan(10);
    expect(first.filter((d) => d > 800).length).toBeGreaterThan(10);

    // The events report the same delays the database applied.
    const byKey = new Map(audit.map((a) => [`${a.job_id}:${a.attempts}`, a.delay_ms]));
    const scheduled = events.filter((e) => e.kind === 'retry-scheduled' && e.type === 'retry.jitter' && ids.includes(e.jobId!));
    expect(scheduled).toHaveLength(2 * count);
    for (const event of scheduled) {
      expect(Math.abs(event.delayMs! - byKey.get(`${event.jobId}:${event.attempt}`)!)).toBeLessThan(1);
    }
    for (const id of ids) expect(callsOf(id).map((c) => c.attempt)).toEqual([1, 2, 3]);
  });

  it('dead-letters a payload the schema rejects without calling the handler', async () => {
    const { id } = await queue.producer.enqueue('retry.schema', { orderId: '', quantity: -3 });
    const record = await jobWhen(id, 'dead');
    expect(callsOf(id)).toHaveLength(0);
    expect(record.lastError).toMatch(/^invalid payload/);
    expect(record).toMatchObject({ status: 'dead', attempts: 1, retryAfter: null });
    expect(record.deadAt).toBeInstanceOf(Date);
    expect(record.errors).toHaveLength(1);
    expect(record.errors[0]).toMatchObject({ attempt: 1 });
    expect(record.errors[0].error).toMatch(/^invalid payload/);
    // A poison pill is not retried even though the type allows 5 attempts.
    expect(record.maxAttempts).toBe(5);
    expect(events.filter((e) => e.jobId === id).map((e) => e.kind)).toEqual(['dead-lettered']);
  });

  it('hands the handler what the schema returns, not the raw payload', async () => {
    const { id } = await queue.producer.enqueue('retry.schema', { orderId: 'A-17', quantity: 3 });
    const record = await jobWhen(id, 'completed');
    expect(callsOf(id)).toHaveLength(1);
    expect(callsOf(id)[0].payload).toEqual({ orderId: 'A-17', quantity: 30, validated: true });
    expect(record.result).toEqual({ received: { orderId: 'A-17', quantity: 30, validated: true } });
    // The stored payload is untouched.
    expect(record.payload).toEqual({ orderId: 'A-17', quantity: 3 });
  });

  it('dead-letters on PermanentJobError after exactly one invocation', async () => {
    const { id } = await queue.producer.enqueue('retry.permanent', { card: '4000' });
    const record = await jobWhen(id, 'dead');
    expect(callsOf(id)).toHaveLength(1);
    expect(record).toMatchObject({ status: 'dead', attempts: 1, maxAttempts: 5 });
    expect(record.lastError).toContain('card declined: retrying cannot help');
    expect(record.errors.map((e) => e.attempt)).toEqual([1]);
    expect(events.filter((e) => e.jobId === id).map((e) => e.kind)).toEqual(['dead-lettered']);
  });

  it('reports completed, retry-scheduled and dead-lettered on events$ with jobId and type', async () => {
    const failing = await queue.producer.enqueue('retry.always-fails', { events: true });
    const flaky = await queue.producer.enqueue('retry.fails-twice', { events: true });
    const terminal = (id: string, kind: string) => events.some((e) => e.jobId === id && e.kind === kind);
    await waitFor(() => terminal(failing.id, 'dead-lettered') && terminal(flaky.id, 'completed'), { message: 'terminal events' });

    const failingEvents = events.filter((e) => e.jobId === failing.id);
    expect(failingEvents.map((e) => [e.kind, e.attempt])).toEqual([
      ['retry-scheduled', 1],
      ['retry-scheduled', 2],
      ['dead-lettered', 3],
    ]);
    for (const event of failingEvents) {
      expect(event).toMatchObject({ type: 'retry.always-fails', jobId: failing.id });
      expect(event.at).toBeInstanceOf(Date);
    }
    expect(failingEvents[0].delayMs).toBeGreaterThanOrEqual(10);
    expect(failingEvents[0].delayMs).toBeLessThanOrEqual(20);
    expect(failingEvents[1].delayMs).toBeGreaterThanOrEqual(20);
    expect(failingEvents[1].delayMs).toBeLessThanOrEqual(40);
    expect(failingEvents[2].error).toBe('downstream refused (attempt 3)');

    const flakyEvents = events.filter((e) => e.jobId === flaky.id);
    expect(flakyEvents.map((e) => e.kind)).toEqual(['retry-scheduled', 'retry-scheduled', 'completed']);
    expect(flakyEvents.every((e) => e.type === 'retry.fails-twice')).toBe(true);
    expect(flakyEvents[0].error).toBe('flaky (attempt 1)');
  });
});

describe('handlers that hang or throw odd values, with concurrency 1', () => {
  let db: TestDatabase;
  let queue: QueueApp;

  async function terminal(id: string) {
    return waitFor(
      async () => {
        const job = await queue.admin.getJob(id);
        return job && ['completed', 'dead'].includes(job.status) ? job : null;
      },
      { message: `job ${id} to finish` },
    );
  }

  beforeAll(async () => {
    // A fresh database numbers its jobs from 1 again: forget the first app's invocations.
    invocations.clear();
    db = await createTestDatabase(inject('adminUrl'));
    queue = await startQueueApp(db.url, { workerId: 'slot-worker', concurrency: 1, drainTimeoutMs: 1_000 }, [SlotHandlers]);
  });
  afterAll(async () => {
    await queue?.close();
    await db?.drop();
  });

  it('times out a handler that never settles: its signal aborts, the attempt fails and the slot is freed', async () => {
    const hang = await queue.producer.enqueue('slot.hang', { forever: true });
    await waitFor(() => hangSignals.has(hang.id), { message: 'hanging handler invoked' });
    let abortedAt = Infinity;
    hangSignals.get(hang.id)!.addEventListener('abort', () => (abortedAt = Date.now()));
    const ok = await queue.producer.enqueue('slot.ok', { n: 1 });

    const okRecord = await terminal(ok.id);
    expect(okRecord.status).toBe('completed');
    const hangRecord = await terminal(hang.id);
    expect(hangRecord).toMatchObject({ status: 'dead', attempts: 1 });
    expect(hangRecord.lastError).toMatch(/timed out/);
    expect(hangRecord.lastError).toContain('300');

    const signal = hangSignals.get(hang.id)!;
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(JobTimeoutError);
    // With one slot, the second job could only start once the timed-out attempt was over (it may
    // have been claimed earlier, into the prefetch buffer).
    expect(callsOf(ok.id)[0].at).toBeGreaterThanOrEqual(abortedAt);
    expect(callsOf(hang.id)).toHaveLength(1);
    expect((await queue.health.isReady())['job-queue']).toMatchObject({ inFlight: 0 });
  });

  it('records throws of strings, undefined, null, non-Error rejections and synchronous throws, and keeps working', async () => {
    const modes = ['string', 'undefined', 'null', 'reject-object', 'reject-number', 'sync'];
    const bad = await queue.producer.enqueueMany(modes.map((how) => ({ type: 'slot.throws', payload: { how } })));
    const good = await queue.producer.enqueueMany([1, 2, 3].map((n) => ({ type: 'slot.ok', payload: { n } })));

    const badRecords = await Promise.all(bad.map((r) => terminal(r.id)));
    const goodRecords = await Promise.all(good.map((r) => terminal(r.id)));
    for (const record of badRecords) {
      expect(record).toMatchObject({ status: 'dead', attempts: 1 });
      expect(typeof record.lastError).toBe('string');
      expect(record.lastError!.length).toBeGreaterThan(0);
      expect(record.errors).toHaveLength(1);
      expect(callsOf(record.id)).toHaveLength(1);
    }
    const byMode = Object.fromEntries(modes.map((mode, i) => [mode, badRecords[i].lastError!]));
    expect(byMode.string).toContain('plain string thrown');
    expect(byMode['reject-object']).toContain('42');
    expect(byMode['reject-number']).toContain('404');
    expect(byMode.sync).toContain('synchronous explosion');
    expect(byMode.undefined).toMatch(/undefined/);
    expect(byMode.null).toMatch(/null/);

    expect(goodRecords.map((r) => [r.status, r.result])).toEqual([
      ['completed', { n: 1 }],
      ['completed', { n: 2 }],
      ['completed', { n: 3 }],
    ]);
    // No slot leaked: nothing is counted in flight, and one more job still runs.
    expect((await queue.health.isReady())['job-queue']).toMatchObject({ inFlight: 0 });
    const last = await queue.producer.enqueue('slot.ok', { n: 4 });
    expect((await terminal(last.id)).status).toBe('completed');
  });
});

@Injectable()
class WakeHandlers {
  /** Fails its first attempt with a backoff of 100–200 ms; the worker polls once a minute. */
  @JobHandler('wake.retry', { maxAttempts: 3, baseDelayMs: 200, maxDelayMs: 200 })
  async retry(payload: unknown, job: JobContext) {
    recordCall(payload, job);
    if (job.attempt === 1) throw new Error('not yet');
    return { ranOn: job.attempt };
  }
}

describe('retry wake-ups', () => {
  let db: TestDatabase;
  let producer: QueueApp | undefined;
  let worker: QueueApp | undefined;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
  });
  afterAll(async () => {
    await worker?.close();
    await producer?.close();
    await db?.drop();
  });

  it('runs a retry this worker scheduled when it comes due, not at the next poll a minute later', async () => {
    // Queued before the worker starts, so its first claim (at start) takes it with or without LISTEN.
    producer = await startQueueApp(db.url, { runWorker: false });
    const jobs = await Promise.all([1, 2, 3].map((n) => producer!.producer.enqueue('wake.retry', { n })));
    worker = await startQueueApp(db.url, { workerId: 'wake-worker', pollIntervalMs: 60_000 }, [WakeHandlers]);
    for (const { id } of jobs) {
      const record = await waitFor(
        async () => {
          const job = await worker!.admin.getJob(id);
          return job?.status === 'completed' ? job : null;
        },
        { timeoutMs: 20_000, message: `job ${id} retried and completed well before the next poll` },
      );
      expect(record.result).toEqual({ ranOn: 2 });
      const [first, second] = callsOf(id);
      // Not before its backoff was over (200 ms with jitter: 100 to 200 ms).
      expect(second.at - first.at).toBeGreaterThanOrEqual(100);
    }
  });
});

function mean(values: number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}

function stddev(values: number[]): number {
  const m = mean(values);
  return Math.sqrt(values.reduce((sum, v) => sum + (v - m) ** 2, 0) / values.length);
}
