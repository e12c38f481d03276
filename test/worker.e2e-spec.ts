import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { JobHandler, type JobContext } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/** Handler work (not a test wait): keeps a job running for a while so overlaps can be observed. */
const work = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ------------------------------------------------------------------------------------------
// Handlers. Each class is given to exactly one app, so each job type has one worker app.
// ------------------------------------------------------------------------------------------

const ran: string[] = [];
const seenMaxAttempts = new Map<string, number>();

/** Runs in the `main` worker app (module retry.maxAttempts 7). */
@Injectable()
class MainHandlers {
  @JobHandler('worker.delayed')
  delayed(_payload: unknown, job: JobContext) {
    ran.push(job.id);
  }

  @JobHandler('worker.sentinel')
  async sentinel(payload: { ms?: number }, job: JobContext) {
    if (payload.ms) await work(payload.ms);
    ran.push(job.id);
  }

  @JobHandler('worker.attempts.handler', { maxAttempts: 3 })
  attemptsFromHandler(_payload: unknown, job: JobContext) {
    seenMaxAttempts.set(job.id, job.maxAttempts);
  }

  @JobHandler('worker.attempts.module')
  attemptsFromModule(_payload: unknown, job: JobContext) {
    seenMaxAttempts.set(job.id, job.maxAttempts);
  }
}

const priorityOrder: string[] = [];

@Injectable()
class PriorityHandlers {
  @JobHandler('worker.priority')
  async run(payload: { name: string }) {
    priorityOrder.push(payload.name);
    // Let the next claim happen while this one is still busy, if the worker wrongly allowed it.
    await work(20);
  }
}

const load = { running: 0, maxRunning: 0, limitedRunning: 0, maxLimitedRunning: 0, done: 0 };

@Injectable()
class ConcurrencyHandlers {
  @JobHandler('worker.load.free')
  async free() {
    await this.track(false);
  }

  @JobHandler('worker.load.limited', { concurrency: 2 })
  async limited() {
    await this.track(true);
  }

  private async track(limited: boolean) {
    load.running++;
    load.maxRunning = Math.max(load.maxRunning, load.running);
    if (limited) {
      load.limitedRunning++;
      load.maxLimitedRunning = Math.max(load.maxLimitedRunning, load.limitedRunning);
    }
    try {
      await work(60);
    } finally {
      load.running--;
      if (limited) load.limitedRunning--;
      load.done++;
    }
  }
}

/** Held jobs wait here until the test lets them go. */
const held = { started: 0, release: null as (() => void) | null, gate: Promise.resolve() };
const freeRan: string[] = [];

/** A type held to one slot, beside a type with nothing waiting. */
const narrowRan: string[] = [];

@Injectable()
class NarrowTypeHandlers {
  @JobHandler('worker.narrow', { concurrency: 1 })
  narrow(_payload: unknown, job: JobContext) {
    narrowRan.push(job.id);
  }

  @JobHandler('worker.idle')
  idle() {}
}

@Injectable()
class HeldBackHandlers {
  @JobHandler('worker.held', { concurrency: 1 })
  async heldJob(payload: { block?: boolean }) {
    if (!payload.block) return;
    held.started++;
    await held.gate;
  }

  @JobHandler('worker.unheld')
  unheld(_payload: unknown, job: JobContext) {
    freeRan.push(job.id);
  }
}

/** The first attempt waits for the test (ignoring its signal, but noting when it fires); later ones return at once. */
const reclaimed = { calls: 0, firstAborted: false, firstReturned: false, releaseFirst: null as (() => void) | null };

@Injectable()
class ReclaimedHandlers {
  @JobHandler('worker.reclaimed')
  async run(_payload: unknown, job: JobContext) {
    const call = ++reclaimed.calls;
    if (call > 1) return { attempt: call };
    job.signal.addEventListener('abort', () => (reclaimed.firstAborted = true));
    await new Promise<void>((resolve) => (reclaimed.releaseFirst = resolve));
    reclaimed.firstReturned = true;
    return { attempt: call };
  }
}

const noClaimCalls: string[] = [];

/** Given to a producer-only app: it must never run. */
@Injectable()
class ProducerOnlyHandlers {
  @JobHandler('worker.producer-only')
  run(_payload: unknown, job: JobContext) {
    noClaimCalls.push(job.id);
  }
}

@Injectable()
class WakeHandlers {
  @JobHandler('worker.wake')
  run() {}
}

@Injectable()
class PollingHandlers {
  @JobHandler('worker.polling')
  run() {}
}

/** Synchronous handlers: what each saw, and how deep the stack was under it. */
const syncRuns = { seqs: [] as number[], deepestStack: 0 };

@Injectable()
class SyncHandlers {
  @JobHandler('worker.sync')
  run(payload: { seq: number }) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = Infinity;
    const depth = (new Error().stack ?? '').split('\n').length;
    Error.stackTraceLimit = limit;
    syncRuns.deepestStack = Math.max(syncRuns.deepestStack, depth);
    syncRuns.seqs.push(payload.seq);
    if (payload.seq % 97 === 0) throw new Error(`seq ${payload.seq} fails once`);
  }
}

const flakyRuns: number[] = [];

@Injectable()
class FlakyCompletionHandlers {
  @JobHandler('worker.flaky-complete')
  run(payload: { n: number }) {
    flakyRuns.push(payload.n);
    return { n: payload.n };
  }
}

@Injectable()
class ClosingHandlers {
  @JobHandler('worker.closing')
  run() {}
}

// ------------------------------------------------------------------------------------------

describe('worker', () => {
  let db: TestDatabase;
  /** A worker app running MainHandlers. */
  let main: QueueApp;
  /** A producer-only app with no handlers and its own default maxAttempts. */
  let api: QueueApp;

  const row = async (id: string) => (await db.query(`SELECT * FROM job_queue.jobs WHERE id = $1`, [id]))[0];
  const completed = (queue: QueueApp, id: string, timeoutMs = 15_000) =>
    waitFor(
      async () => {
        const job = await queue.admin.getJob(id);
        return job?.status === 'completed' ? job : null;
      },
      { timeoutMs, message: `job ${id} completed` },
    );
  const connectionsOf = (applicationName: string) =>
    db.query<{ query: string; state: string }>(`SELECT query, state FROM pg_stat_activity WHERE application_name = $1`, [
      applicationName,
    ]);

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    main = await startQueueApp(db.url, { workerId: 'worker-main', retry: { maxAttempts: 7 } }, [MainHandlers]);
    api = await startQueueApp(db.url, { runWorker: false, retry: { maxAttempts: 4 } });
  });
  afterAll(async () => {
    await Promise.all([main?.close(), api?.close()]);
    await db?.drop();
  });

  describe('scheduling', () => {
    it('runs a job with delayMs, or with runAt in the future, no earlier than asked (database clock)', async () => {
      const runAt = new Date(Date.now() + 1_500);
      const [delayed, scheduled] = await Promise.all([
        api.producer.enqueue('worker.delayed', { kind: 'delayMs' }, { delayMs: 1_500 }),
        api.producer.enqueue('worker.delayed', { kind: 'runAt' }, { runAt }),
      ]);
      await completed(main, delayed.id);
      await completed(main, scheduled.id);

      const [d] = await db.query(
        `SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS waited_ms,
                extract(epoch FROM run_at - created_at) * 1000 AS scheduled_ms
         FROM job_queue.jobs WHERE id = $1`,
        [delayed.id],
      );
      expect(Number(d.scheduled_ms)).toBeCloseTo(1_500, 0);
      expect(Number(d.waited_ms)).toBeGreaterThanOrEqual(1_500);

      const [s] = await db.query(
        `SELECT run_at, claimed_at >= run_at AS claimed_after_run_at,
                extract(epoch FROM run_at - created_at) * 1000 AS ahead_ms
         FROM job_queue.jobs WHERE id = $1`,
        [scheduled.id],
      );
      expect((s.run_at as Date).getTime()).toBe(runAt.getTime());
      // Still ahead when it was written (however long the enqueue took), so the claim below had to wait for it.
      expect(Number(s.ahead_ms)).toBeGreaterThan(0);
      expect(s.claimed_after_run_at).toBe(true);
      expect(ran).toEqual(expect.arrayContaining([delayed.id, scheduled.id]));
    });

    it('with concurrency 1 and a worker started after enqueuing, runs higher priority first, then FIFO', async () => {
      const jobs = [
        { name: 'a', priority: 0 },
        { name: 'b', priority: 5 },
        { name: 'c', priority: 0 },
        { name: 'd', priority: 10 },
        { name: 'e', priority: 5 },
        { name: 'f', priority: -1 },
        { name: 'g', priority: 0 },
        { name: 'h', priority: 10 },
      ];
      // One by one, so each has a later created_at / run_at than the one before.
      for (const job of jobs) await api.producer.enqueue('worker.priority', { name: job.name }, { priority: job.priority });
      // Then a batch: same instant, ids in input order.
      await api.producer.enqueueMany([
        { type: 'worker.priority', payload: { name: 'i' }, options: { priority: 5 } },
        { type: 'worker.priority', payload: { name: 'j' }, options: { priority: 5 } },
      ]);
      const expected = ['d', 'h', 'b', 'e', 'i', 'j', 'a', 'c', 'g', 'f'];

      const ordered = await startQueueApp(db.url, { concurrency: 1, workerId: 'worker-priority' }, [PriorityHandlers]);
      try {
        await waitFor(
          async () =>
            (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'worker.priority' AND status = 'completed'`))[0]
              .n === expected.length,
          { timeoutMs: 20_000, message: 'all priority jobs completed' },
        );
      } finally {
        await ordered.close();
      }
      expect(priorityOrder).toEqual(expected);
      // One claim statement may take several jobs (same claimed_at), in priority, then run-time order.
      const byClaim = await db.query(
        `SELECT payload->>'name' AS name FROM job_queue.jobs WHERE type = 'worker.priority' ORDER BY claimed_at, priority DESC, run_at, id`,
      );
      expect(byClaim.map((r) => r.name)).toEqual(expected);
    });
  });

  describe('concurrency', () => {
    it('never runs more than `concurrency` jobs at once, nor more than a type’s own `concurrency`', async () => {
      const busy = await startQueueApp(db.url, { concurrency: 4, workerId: 'worker-load' }, [ConcurrencyHandlers]);
      try {
        const items = Array.from({ length: 24 }, (_, i) => ({
          type: i % 2 === 0 ? 'worker.load.free' : 'worker.load.limited',
          payload: { i },
        }));
        await api.producer.enqueueMany(items);
        await waitFor(() => load.done === items.length, { timeoutMs: 30_000, message: 'all load jobs finished' });
        await waitFor(
          async () =>
            (
              await db.query(
                `SELECT count(*)::int AS n FROM job_queue.jobs WHERE type LIKE 'worker.load.%' AND status = 'completed'`,
              )
            )[0].n === items.length,
          { message: 'all load jobs recorded' },
        );
      } finally {
        await busy.close();
      }
      expect(load.maxRunning).toBeLessThanOrEqual(4);
      expect(load.maxLimitedRunning).toBeLessThanOrEqual(2);
      // The limits were reached, so the bounds above were really exercised.
      expect(load.maxRunning).toBe(4);
      expect(load.maxLimitedRunning).toBe(2);
    });
  });

  describe('synchronous handlers', () => {
    it('a backlog of them runs each job once, each started from a flat stack; a synchronous throw is retried', async () => {
      Object.assign(syncRuns, { seqs: [], deepestStack: 0 });
      const jobs = 1_000;
      await api.producer.enqueueMany(Array.from({ length: jobs }, (_, seq) => ({ type: 'worker.sync', payload: { seq } })));
      // Started after the backlog is in, with a large prefetch: claims of hundreds of jobs that
      // finish as soon as they start, the case where starting the next job from inside the last
      // one's completion would nest one stack frame set per job.
      const syncWorker = await startQueueApp(db.url, { concurrency: 8, prefetch: 1_000, workerId: 'worker-sync', retry: { baseDelayMs: 10 } }, [
        SyncHandlers,
      ]);
      try {
        await waitFor(
          async () =>
            (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'worker.sync' AND status = 'completed'`))[0].n ===
            jobs - Math.ceil(jobs / 97),
          { timeoutMs: 30_000, message: 'every synchronous job completed or scheduled for retry' },
        );
      } finally {
        await syncWorker.close();
      }
      const counts = new Map<number, number>();
      for (const seq of syncRuns.seqs) counts.set(seq, (counts.get(seq) ?? 0) + 1);
      expect(counts.size).toBe(jobs);
      const failing = [...counts.keys()].filter((seq) => seq % 97 === 0);
      // Every job ran; those that do not throw exactly once (a throwing one once per attempt so far).
      expect([...counts].filter(([seq, n]) => seq % 97 !== 0 && n !== 1)).toEqual([]);
      const retried = await db.query<{ attempts: number; last_error: string }>(
        `SELECT attempts, last_error FROM job_queue.jobs WHERE type = 'worker.sync' AND (payload->>'seq')::int % 97 = 0`,
      );
      expect(retried).toHaveLength(failing.length);
      for (const job of retried) expect(job.last_error).toMatch(/fails once/);
      expect(syncRuns.deepestStack).toBeLessThan(150);
    });
  });

  describe('a completion write that fails', () => {
    it('is retried, not the job: each handler ran once, and every result is stored', async () => {
      flakyRuns.length = 0;
      // The database refuses the first two completion statements of this type (a sequence,
      // because it advances even in a transaction that fails).
      await db.query(`CREATE SEQUENCE flaky_completion_seq`);
      await db.query(`
        CREATE FUNCTION flaky_completion() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF nextval('flaky_completion_seq') <= 2 THEN RAISE EXCEPTION 'simulated outage'; END IF;
          RETURN NEW;
        END $$`);
      await db.query(`
        CREATE TRIGGER flaky_completion BEFORE UPDATE ON job_queue.jobs FOR EACH ROW
        WHEN (NEW.status = 'completed' AND NEW.type = 'worker.flaky-complete') EXECUTE FUNCTION flaky_completion()`);
      const flaky = await startQueueApp(db.url, { workerId: 'worker-flaky' }, [FlakyCompletionHandlers]);
      try {
        const jobs = await api.producer.enqueueMany([1, 2, 3].map((n) => ({ type: 'worker.flaky-complete', payload: { n } })));
        for (const job of jobs) expect((await completed(flaky, job.id)).result).toEqual({ n: Number((await row(job.id)).payload.n) });
      } finally {
        await flaky.close();
        await db.query(`DROP TRIGGER flaky_completion ON job_queue.jobs`);
        await db.query(`DROP FUNCTION flaky_completion()`);
      }
      const [{ refused }] = await db.query(`SELECT last_value >= 3 AS refused FROM flaky_completion_seq`);
      expect(refused).toBe(true);
      expect(flakyRuns.sort()).toEqual([1, 2, 3]);
    });
  });

  describe('a type held to few slots beside a type with nothing waiting', () => {
    it('claims the next of its jobs as each finishes, not at the poll', async () => {
      // Queued before the worker starts, so its first claim (at start) finds them with or without
      // LISTEN. Polls an hour apart: after that first claim, only freed slots can wake the worker.
      const jobs = await api.producer.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ type: 'worker.narrow', payload: { i } })));
      const worker = await startQueueApp(db.url, { concurrency: 4, workerId: 'worker-narrow', pollIntervalMs: 3_600_000 }, [
        NarrowTypeHandlers,
      ]);
      try {
        await waitFor(() => narrowRan.length === 50, { message: 'all 50 narrow jobs run' });
        expect([...narrowRan].sort()).toEqual(jobs.map((job) => job.id).sort());
      } finally {
        await worker.close();
      }
    });
  });

  describe('claiming around held-back jobs', () => {
    it('claims other types for free slots while its buffer holds only jobs their type’s concurrency holds back', async () => {
      held.gate = new Promise<void>((resolve) => (held.release = resolve));
      const worker = await startQueueApp(db.url, { concurrency: 4, workerId: 'worker-held' }, [HeldBackHandlers]);
      try {
        // Short jobs of both types first, so the worker prefetches both (it keeps none of a type that
        // finishes fewer than 10 a second). Then one blocking held job runs (type concurrency 1), and
        // another, claimed while the held type's quick jobs were still finishing, waits in the buffer.
        await api.producer.enqueueMany([
          ...Array.from({ length: 100 }, (_, i) => ({ type: 'worker.unheld', payload: { i } })),
          ...Array.from({ length: 100 }, (_, i) => ({ type: 'worker.held', payload: { i } })),
          ...Array.from({ length: 3 }, (_, i) => ({ type: 'worker.held', payload: { i, block: true } })),
        ]);
        await waitFor(
          async () =>
            (
              await db.query(
                `SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'worker.held' AND payload ? 'block' AND status = 'processing'`,
              )
            )[0].n >= 2,
          { message: 'a held job running and another buffered' },
        );
        expect(held.started).toBe(1);
        // Three slots are free: a job of another type runs while the held one still blocks its type.
        const { id } = await api.producer.enqueue('worker.unheld', {});
        await waitFor(() => freeRan.includes(id), { message: 'the other type’s job to run' });
        expect(held.started).toBe(1);
      } finally {
        held.release?.();
        await waitFor(
          async () =>
            (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'worker.held' AND status = 'completed'`))[0].n === 103,
          { message: 'held jobs finished' },
        );
        await worker.close();
      }
    });
  });

  describe('a job this worker claims again while a stale attempt of it still runs', () => {
    it('interrupts the stale attempt at once, and writes only the new attempt’s outcome', async () => {
      const worker = await startQueueApp(db.url, { workerId: 'worker-reclaim', pollIntervalMs: 100 }, [ReclaimedHandlers]);
      try {
        const { id } = await api.producer.enqueue('worker.reclaimed', {});
        await waitFor(() => reclaimed.calls === 1, { message: 'the first attempt to start' });
        // What the reaper does once a lease has expired. The lease is 30 s, so this worker's own
        // renewals cannot have noticed yet; only the new claim tells it.
        await db.query(
          `UPDATE job_queue.jobs SET status = 'pending', lease_token = NULL, lease_expires_at = NULL, worker_id = NULL, run_at = now()
           WHERE id = $1`,
          [id],
        );
        await waitFor(() => reclaimed.calls === 2, { message: 'this worker to claim the job again' });
        await waitFor(() => reclaimed.firstAborted, { timeoutMs: 3_000, message: 'the stale attempt to be interrupted' });
        const done = await completed(worker, id);
        expect(done).toMatchObject({ attempts: 2, result: { attempt: 2 } });
        // The stale attempt finishing later changes nothing: once it has returned, and a later job
        // of its type has been run and recorded after it, the row still holds attempt 2's outcome.
        reclaimed.releaseFirst?.();
        await waitFor(() => reclaimed.firstReturned, { message: 'the stale attempt to return' });
        const later = await api.producer.enqueue('worker.reclaimed', {});
        expect(await completed(worker, later.id)).toMatchObject({ result: { attempt: 3 } });
        expect(await worker.admin.getJob(id)).toMatchObject({ status: 'completed', attempts: 2, result: { attempt: 2 } });
        expect((await worker.health.isReady())['job-queue'].inFlight).toBe(0);
      } finally {
        reclaimed.releaseFirst?.();
        await worker.close();
      }
    });
  });

  describe('what a worker claims', () => {
    it('a producer-only app never claims, even its own handler’s type; a worker claims only types it handles', async () => {
      const producerOnly = await startQueueApp(db.url, { runWorker: false, pollIntervalMs: 50 }, [ProducerOnlyHandlers]);
      try {
        const ownType = await producerOnly.producer.enqueue('worker.producer-only', { x: 1 });
        const foreign = await api.producer.enqueue('worker.nobody', { x: 2 });
        // Meanwhile the main worker runs several jobs one after another: time passes, workers are active.
        for (let i = 0; i < 3; i++) {
          const sentinel = await api.producer.enqueue('worker.sentinel', { ms: 150 });
          const done = await completed(main, sentinel.id);
          expect(done.workerId).toBe('worker-main');
        }
        for (const id of [ownType.id, foreign.id]) {
          expect(await row(id)).toMatchObject({
            status: 'pending',
            attempts: 0,
            worker_id: null,
            claimed_at: null,
            lease_token: null,
          });
        }
        expect(noClaimCalls).toEqual([]);
      } finally {
        await producerOnly.close();
      }
    });
  });

  describe('maxAttempts precedence', () => {
    it('job option > handler option > module default, in job.maxAttempts and in max_attempts', async () => {
      const cases = [
        // From the worker's own process.
        { queue: main, type: 'worker.attempts.handler', maxAttempts: 2, expected: 2 },
        { queue: main, type: 'worker.attempts.handler', maxAttempts: undefined, expected: 3 },
        { queue: main, type: 'worker.attempts.module', maxAttempts: undefined, expected: 7 },
        // From a producer-only process with no handler and retry.maxAttempts 4: the job's own
        // setting still wins; otherwise the claiming worker's handler setting applies.
        { queue: api, type: 'worker.attempts.handler', maxAttempts: 9, expected: 9 },
        { queue: api, type: 'worker.attempts.handler', maxAttempts: undefined, expected: 3 },
        { queue: api, type: 'worker.attempts.module', maxAttempts: undefined, expected: 7 },
      ];
      const ids: string[] = [];
      for (const c of cases) {
        const { id } = await c.queue.producer.enqueue(c.type, {}, c.maxAttempts === undefined ? {} : { maxAttempts: c.maxAttempts });
        ids.push(id);
      }
      for (const [i, c] of cases.entries()) {
        const record = await completed(main, ids[i]);
        expect({ case: i, handler: seenMaxAttempts.get(ids[i]), record: record.maxAttempts }).toEqual({
          case: i,
          handler: c.expected,
          record: c.expected,
        });
        expect((await row(ids[i])).max_attempts).toBe(c.expected);
      }
    });
  });

  describe('wake-ups', () => {
    // Asserts LISTEN itself.
    it.skipIf(process.env.AJQ_TEST_LISTEN === 'false')('with pollIntervalMs 60000, LISTEN/NOTIFY still runs a new job promptly', async () => {
      const sleepy = await startQueueApp(
        db.url,
        { pollIntervalMs: 60_000, workerId: 'worker-sleepy', dataSource: { type: 'postgres', url: db.url, applicationName: 'ajq-sleepy' } },
        [WakeHandlers],
      );
      try {
        // The worker's boot claim has found nothing; from now on only a notification wakes it.
        const first = await sleepy.producer.enqueue('worker.wake', { n: 1 });
        await completed(sleepy, first.id, 10_000);
        // From another process's connection, and again from its own, each well before a poll.
        const second = await api.producer.enqueue('worker.wake', { n: 2 });
        await completed(sleepy, second.id, 10_000);
        const third = await sleepy.producer.enqueue('worker.wake', { n: 3 });
        await completed(sleepy, third.id, 10_000);
        const batch = await api.producer.enqueueMany([
          { type: 'worker.wake', payload: { n: 4 } },
          { type: 'worker.wake', payload: { n: 5 } },
        ]);
        for (const { id } of batch) await completed(sleepy, id, 10_000);
        // It holds a LISTEN connection.
        const connections = await connectionsOf('ajq-sleepy');
        expect(connections.some((c) => /^\s*LISTEN\b/i.test(c.query))).toBe(true);
      } finally {
        await sleepy.close();
      }
    });

    // Asserts LISTEN itself.
    it.skipIf(process.env.AJQ_TEST_LISTEN === 'false')('with pollIntervalMs 60000, delayed jobs run when they come due, not at the next poll', async () => {
      const sleepy = await startQueueApp(db.url, { pollIntervalMs: 60_000, workerId: 'worker-sleepy-delayed' }, [WakeHandlers]);
      try {
        // One at a time, so each is woken for by its own notification: from another process, from
        // this one, and in a caller's transaction; by delay and by time.
        const appDataSource = await new DataSource({ type: 'postgres', url: db.url }).initialize();
        const enqueues = [
          () => api.producer.enqueue('worker.wake', { n: 'delay' }, { delayMs: 300 }),
          () => sleepy.producer.enqueue('worker.wake', { n: 'runAt' }, { runAt: new Date(Date.now() + 400) }),
          () => appDataSource.transaction((manager) => api.producer.enqueue('worker.wake', { n: 'tx' }, { delayMs: 200, manager })),
        ];
        try {
          for (const enqueue of enqueues) {
            const { id } = await enqueue();
            const record = await completed(sleepy, id, 10_000);
            // Claimed once due (the claim's own condition) and within seconds of it, where the
            // next poll would have been a minute away.
            expect(record.claimedAt!.getTime() - record.runAt.getTime()).toBeLessThan(5_000);
          }
        } finally {
          await appDataSource.destroy();
        }
      } finally {
        await sleepy.close();
      }
    });

    it('with listen: false and pollIntervalMs 200, jobs still run, and no LISTEN connection is held', async () => {
      const polling = await startQueueApp(
        db.url,
        {
          listen: false,
          pollIntervalMs: 200,
          workerId: 'worker-polling',
          dataSource: { type: 'postgres', url: db.url, applicationName: 'ajq-polling' },
        },
        [PollingHandlers],
      );
      try {
        const results = await api.producer.enqueueMany(
          Array.from({ length: 3 }, (_, i) => ({ type: 'worker.polling', payload: { i } })),
        );
        const later = await polling.producer.enqueue('worker.polling', { i: 3 });
        for (const { id } of [...results, later]) {
          const record = await completed(polling, id, 10_000);
          expect(record.workerId).toBe('worker-polling');
        }
        const connections = await connectionsOf('ajq-polling');
        expect(connections.length).toBeGreaterThan(0);
        expect(connections.filter((c) => /LISTEN/i.test(c.query))).toEqual([]);
      } finally {
        await polling.close();
      }
    });
  });

  describe('shutdown', () => {
    // Its worker polls once a minute, so only a notification brings it the job it must finish first.
    it.skipIf(process.env.AJQ_TEST_LISTEN === 'false')('closing an idle app finishes promptly, releases its connections and leaves no job processing', async () => {
      const closing = await startQueueApp(
        db.url,
        { pollIntervalMs: 60_000, workerId: 'worker-closing', dataSource: { type: 'postgres', url: db.url, applicationName: 'ajq-closing' } },
        [ClosingHandlers],
      );
      let closed = false;
      try {
        const { id } = await api.producer.enqueue('worker.closing', {});
        await completed(closing, id, 10_000);
        // Idle now: the claim loop sleeps for up to a minute. close() must not wait for that.
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), 10_000)));
        const outcome = await Promise.race([closing.close().then(() => 'closed' as const), deadline]);
        clearTimeout(timer);
        expect(outcome).toBe('closed');
        closed = true;
      } finally {
        if (!closed) await closing.close();
      }
      await waitFor(async () => (await connectionsOf('ajq-closing')).length === 0, {
        timeoutMs: 10_000,
        message: 'the closed app’s connections are gone',
      });
      const [processing] = await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE status = 'processing'`);
      expect(processing.n).toBe(0);
    });
  });
});
