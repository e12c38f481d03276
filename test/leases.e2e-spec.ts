import { Injectable } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler, type JobContext, type JobQueueEvent } from '../src/index.js';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Leases on real PostgreSQL: a SIGKILLed worker process loses no job (another process reclaims it
 * once the lease expires, and the lost run counts as an attempt), a job that kills its worker every
 * time is dead-lettered without a run beyond maxAttempts, and a worker that outlived its lease
 * cannot overwrite the outcome of the worker that reclaimed the job (fencing).
 */

const LEASE_MS = 1_500;
type Exit = { code: number | null; signal: NodeJS.Signals | null };

/** A promise the test resolves by hand, one per job id. */
class Gates {
  private readonly gates = new Map<string, { promise: Promise<void>; open: () => void }>();

  wait(id: string): Promise<void> {
    return this.get(id).promise;
  }

  open(id: string): void {
    this.get(id).open();
  }

  openAll(): void {
    for (const gate of this.gates.values()) gate.open();
  }

  private get(id: string) {
    let gate = this.gates.get(id);
    if (!gate) {
      let open!: () => void;
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate = { promise, open };
      this.gates.set(id, gate);
    }
    return gate;
  }
}

interface Call {
  attempt: number;
  signal: AbortSignal;
}

/** Handlers that ignore their signal and finish only when the test opens their gate. */
function stubbornHandler(type: string, label: string, gates: Gates, calls: Map<string, Call[]>) {
  @Injectable()
  class StubbornHandler {
    @JobHandler(type, { concurrency: 5 })
    async work(_payload: unknown, job: JobContext) {
      calls.set(job.id, [...(calls.get(job.id) ?? []), { attempt: job.attempt, signal: job.signal }]);
      await gates.wait(`${label}:${job.id}`);
      return { by: label, attempt: job.attempt };
    }
  }
  return StubbornHandler;
}

describe('leases, reclaims and fencing', () => {
  let db: TestDatabase;
  let api: QueueApp;
  const children: ChildWorker[] = [];
  const apps: QueueApp[] = [];
  const gates = new Gates();

  async function child(workerId: string, env: Record<string, string> = {}): Promise<ChildWorker> {
    const worker = await spawnWorker(
      { url: db.url, workerId, leaseMs: LEASE_MS, maintenanceIntervalMs: 200, pollIntervalMs: 200, drainTimeoutMs: 2_000 },
      env,
    );
    children.push(worker);
    return worker;
  }

  async function app(workerId: string, options: Record<string, unknown>, providers: Parameters<typeof startQueueApp>[2]) {
    const started = await startQueueApp(db.url, { workerId, drainTimeoutMs: 500, ...options }, providers);
    apps.push(started);
    return started;
  }

  async function jobRow(id: string) {
    const [row] = await db.query(
      `SELECT status, attempts, max_attempts, worker_id, last_error, errors, result, dead_at, completed_at, lease_expires_at
       FROM job_queue.jobs WHERE id = $1`,
      [id],
    );
    return row;
  }

  async function invocations(jobId: string) {
    return db.query<{ attempt: number; worker_id: string; started_at: Date; finished_at: Date | null }>(
      `SELECT attempt, worker_id, started_at, finished_at FROM fixture_invocations WHERE job_id = $1 ORDER BY id`,
      [jobId],
    );
  }

  /** Who claimed and released `id`, in order, as the claim_log trigger saw it (see beforeAll). */
  async function claimHistory(id: string) {
    return db.query<{ worker_id: string | null; status: string; attempts: number }>(
      `SELECT worker_id, status, attempts FROM claim_log WHERE job_id = $1 ORDER BY seq`,
      [id],
    );
  }

  async function statusIs(id: string, status: string, timeoutMs = 20_000) {
    return waitFor(async () => ((await jobRow(id))?.status === status ? jobRow(id) : null), {
      timeoutMs,
      message: `job ${id} to be ${status}`,
    });
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    // Producer-only, in this process: it migrates the schema and enqueues; it never reaps.
    api = await startQueueApp(db.url, { runWorker: false });
    // Every change of a job's worker (a claim, a hand-back, a reclaim), kept, so a test can tell
    // what happened between two of its polls.
    await db.query(`
      CREATE TABLE claim_log (seq bigserial PRIMARY KEY, job_id bigint NOT NULL, worker_id text, status text NOT NULL, attempts int NOT NULL);
      CREATE FUNCTION log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO claim_log (job_id, worker_id, status, attempts) VALUES (NEW.id, NEW.worker_id, NEW.status, NEW.attempts);
        RETURN NULL;
      END $$;
      CREATE TRIGGER log_claim AFTER UPDATE OF worker_id ON job_queue.jobs FOR EACH ROW
        WHEN (OLD.worker_id IS DISTINCT FROM NEW.worker_id) EXECUTE FUNCTION log_claim();`);
  });
  afterAll(async () => {
    gates.openAll();
    await Promise.all(children.map((w) => w.stop()));
    for (const started of apps.reverse()) await started.close();
    await api?.close();
    await db?.drop();
  });

  it('a job whose worker process is SIGKILLed mid-run is completed by another process once the lease expires', async () => {
    const a = await child('lease-a');
    // Held until the test opens its gate: worker A cannot finish it before it is killed.
    const { id } = await api.producer.enqueue('fixture.work', { gate: 'lease-sigkill' });
    await waitFor(async () => (await invocations(id)).length === 1, { message: 'worker A running the job' });

    a.kill('SIGKILL');
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const orphaned = await jobRow(id);
    expect(orphaned).toMatchObject({ status: 'processing', attempts: 1, worker_id: 'lease-a' });

    // B's run finishes at once.
    await db.query(`INSERT INTO fixture_gates (name) VALUES ('lease-sigkill')`);
    const b = await child('lease-b');
    const done = await statusIs(id, 'completed', 30_000);
    expect(done).toMatchObject({ status: 'completed', attempts: 2, worker_id: 'lease-b', result: { worker: 'lease-b', attempt: 2 } });
    expect(done.errors).toHaveLength(1);
    expect(done.errors[0]).toMatchObject({ attempt: 1, workerId: 'lease-a' });
    expect(done.errors[0].error).toMatch(/worker lost/);

    const runs = await invocations(id);
    expect(runs.map((r) => [r.attempt, r.worker_id])).toEqual([
      [1, 'lease-a'],
      [2, 'lease-b'],
    ]);
    expect(runs[0].finished_at).toBeNull();
    expect(runs[1].finished_at).not.toBeNull();
    // B took the job only after A's lease had run out.
    expect(runs[1].started_at.getTime()).toBeGreaterThanOrEqual(orphaned.lease_expires_at.getTime());
    await b.stop();
  });

  it('a job that kills its worker on every attempt is dead-lettered after maxAttempts, never run again', async () => {
    const env = { AJQ_FIXTURE_MAX_ATTEMPTS: '3' };
    let id: string | null = null;
    for (let attempt = 1; attempt <= 3; attempt++) {
      let exit: Exit | null = null;
      try {
        const worker = await child(`crasher-${attempt}`, env);
        void worker.exited.then((result) => (exit = result));
        // The first worker is started before the job exists, so it cannot die before it is ready.
        id ??= (await api.producer.enqueue('fixture.work', { crash: true })).id;
        await waitFor(() => exit, { timeoutMs: 20_000, message: `worker crasher-${attempt} to die` });
      } catch (error) {
        // A worker may claim and die before it printed READY; that is the same crash.
        if (!/exited before READY \(code null, signal SIGKILL\)/.test(String(error))) throw error;
        exit = { code: null, signal: 'SIGKILL' };
      }
      expect(exit).toEqual({ code: null, signal: 'SIGKILL' });
      expect((await invocations(id!)).map((r) => r.attempt)).toEqual(Array.from({ length: attempt }, (_, i) => i + 1));
    }

    // The third run's lease still has to expire: a healthy worker's reaper dead-letters the job.
    const reaper = await child('crash-reaper', env);
    const dead = await statusIs(id!, 'dead');
    expect(dead).toMatchObject({ status: 'dead', attempts: 3, max_attempts: 3, result: null });
    expect(dead.dead_at).toBeInstanceOf(Date);
    expect(dead.last_error).toMatch(/worker lost/);
    expect(dead.errors.map((e: { attempt: number }) => e.attempt)).toEqual([1, 2, 3]);
    expect(dead.errors.map((e: { workerId: string }) => e.workerId)).toEqual(['crasher-1', 'crasher-2', 'crasher-3']);
    expect(dead.errors.every((e: { error: string }) => /worker lost/.test(e.error))).toBe(true);

    // The reaper's worker is alive and idle, and it never ran the job a 4th time.
    expect(await reaper.stop()).not.toEqual({ code: null, signal: 'SIGKILL' });
    expect((await invocations(id!)).map((r) => [r.attempt, r.worker_id])).toEqual([
      [1, 'crasher-1'],
      [2, 'crasher-2'],
      [3, 'crasher-3'],
    ]);
    expect(await jobRow(id!)).toMatchObject({ status: 'dead', attempts: 3 });
  });

  it('a worker that outlived its lease cannot overwrite the result of the worker that reclaimed the job', async () => {
    const callsA = new Map<string, Call[]>();
    const callsB = new Map<string, Call[]>();
    // A renews only every 20 s: within this test its renewals never land, as if it had stalled.
    // Concurrency 2: A's two stuck jobs fill it, and with nothing finishing it prefetches nothing,
    // so it cannot re-claim what B's reaper frees.
    const a = await app('fence-a', { leaseMs: 60_000, maintenanceIntervalMs: 60_000, concurrency: 2 }, [
      stubbornHandler('fence.work', 'a', gates, callsA),
    ]);
    const eventsA: JobQueueEvent[] = [];
    const subscription: Subscription = a.events.events$.subscribe((event) => eventsA.push(event));
    try {
      const [one, two] = await api.producer.enqueueMany([
        { type: 'fence.work', payload: { n: 1 } },
        { type: 'fence.work', payload: { n: 2 } },
      ]);
      await waitFor(() => callsA.has(one.id) && callsA.has(two.id), { message: 'A running both jobs' });

      const b = await app('fence-b', { leaseMs: LEASE_MS, maintenanceIntervalMs: 200 }, [stubbornHandler('fence.work', 'b', gates, callsB)]);
      const eventsB: JobQueueEvent[] = [];
      const subscriptionB = b.events.events$.subscribe((event) => eventsB.push(event));
      // A's leases run out in the database (its renewals are not coming); B's reaper reclaims them.
      await db.query(
        `UPDATE job_queue.jobs SET lease_expires_at = now() - interval '1 second'
         WHERE id = ANY($1::bigint[]) AND worker_id = 'fence-a' AND status = 'processing'`,
        [[one.id, two.id]],
      );
      await waitFor(() => callsB.has(one.id) && callsB.has(two.id), { message: 'B running both reclaimed jobs' });
      for (const id of [one.id, two.id]) {
        const row = await jobRow(id);
        expect(row).toMatchObject({ status: 'processing', attempts: 2, worker_id: 'fence-b' });
        expect(row.errors).toHaveLength(1);
        expect(row.errors[0]).toMatchObject({ attempt: 1, workerId: 'fence-a' });
        expect(row.errors[0].error).toMatch(/worker lost/);
        expect(callsB.get(id)!.map((c) => c.attempt)).toEqual([2]);
      }

      // Job one: A finishes while B still runs it; only the lease token stands in A's way.
      gates.open(`a:${one.id}`);
      await waitFor(() => eventsA.some((e) => e.kind === 'lease-lost' && e.jobId === one.id), { message: 'A lease-lost on job one' });
      expect(await jobRow(one.id)).toMatchObject({ status: 'processing', worker_id: 'fence-b', result: null, completed_at: null });
      // A never noticed by itself (no renewal ran, its signal is intact): the database refused its write.
      expect(callsA.get(one.id)![0].signal.aborted).toBe(false);

      // Job two: B completes first, then A finishes late with a different result.
      gates.open(`b:${two.id}`);
      const completedByB = await statusIs(two.id, 'completed');
      expect(completedByB).toMatchObject({ worker_id: 'fence-b', attempts: 2, result: { by: 'b', attempt: 2 } });
      gates.open(`a:${two.id}`);
      await waitFor(() => eventsA.some((e) => e.kind === 'lease-lost' && e.jobId === two.id), { message: 'A lease-lost on job two' });
      expect(await jobRow(two.id)).toEqual(completedByB);

      // B finishes job one; both rows hold B's outcome.
      gates.open(`b:${one.id}`);
      expect(await statusIs(one.id, 'completed')).toMatchObject({ worker_id: 'fence-b', attempts: 2, result: { by: 'b', attempt: 2 } });
      expect(eventsA.filter((e) => e.kind === 'completed')).toEqual([]);
      expect(eventsB.filter((e) => e.kind === 'completed').map((e) => e.jobId).sort()).toEqual([one.id, two.id].sort());
      expect(eventsA.find((e) => e.kind === 'lease-lost' && e.jobId === one.id)).toMatchObject({ type: 'fence.work', workerId: 'fence-a' });
      expect(callsA.get(one.id)!.map((c) => c.attempt)).toEqual([1]);
      expect(callsA.get(two.id)!.map((c) => c.attempt)).toEqual([1]);
      subscriptionB.unsubscribe();
    } finally {
      subscription.unsubscribe();
    }
  });

  it('a worker whose handlers hang hands back the jobs it prefetched, and another worker runs them', async () => {
    const ranBy = new Map<string, string>();
    function hangingHandler(type: string, label: string) {
      @Injectable()
      class HangingHandler {
        @JobHandler(type, { concurrency: 2 })
        async work(payload: { hang?: boolean }, job: JobContext) {
          ranBy.set(job.id, label);
          if (payload.hang) await gates.wait(`${label}:${job.id}`);
          return { by: label };
        }
      }
      return HangingHandler;
    }
    // Renewals every 500 ms: a prefetched job still waiting a second after its claim goes back at the next.
    await app('hang-a', { leaseMs: LEASE_MS, concurrency: 2 }, [hangingHandler('hang.work', 'a')]);
    // A stream of short jobs grows A's prefetch; the two that hang take both of its slots.
    const jobs = await api.producer.enqueueMany([
      ...Array.from({ length: 200 }, (_, n) => ({ type: 'hang.work', payload: { n } })),
      { type: 'hang.work', payload: { hang: true } },
      { type: 'hang.work', payload: { hang: true } },
      ...Array.from({ length: 20 }, (_, n) => ({ type: 'hang.work', payload: { tail: n } })),
    ]);
    const hung = jobs.slice(200, 202).map((job) => job.id);
    const tail = jobs.slice(202).map((job) => job.id);
    await waitFor(() => hung.every((id) => ranBy.has(id)), { message: 'A running both hanging jobs' });
    const tailHeldByA = () =>
      db.query<{ id: string }>(`SELECT id FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND worker_id = 'hang-a'`, [tail]);
    // Claimed behind the hanging jobs, some of the tail waits in A's buffer (seen in the claim
    // log, however briefly it stayed there before this test looked).
    await waitFor(
      async () =>
        (await db.query(`SELECT 1 FROM claim_log WHERE job_id = ANY($1::bigint[]) AND worker_id = 'hang-a' LIMIT 1`, [tail])).length > 0,
      { message: 'some of the tail claimed by A' },
    );

    await waitFor(async () => (await tailHeldByA()).length === 0, { timeoutMs: 10_000, message: 'A handing the tail back' });
    const handedBack = await db.query(`SELECT status, attempts, worker_id, claimed_at FROM job_queue.jobs WHERE id = ANY($1::bigint[])`, [tail]);
    for (const row of handedBack) expect(row).toMatchObject({ status: 'pending', attempts: 0, worker_id: null, claimed_at: null });

    await app('hang-b', { leaseMs: LEASE_MS }, [hangingHandler('hang.work', 'b')]);
    for (const id of tail) {
      expect(await statusIs(id, 'completed')).toMatchObject({ worker_id: 'hang-b', attempts: 1, result: { by: 'b' } });
    }
    expect(tail.map((id) => ranBy.get(id))).toEqual(tail.map(() => 'b'));
    for (const id of hung) expect(await jobRow(id)).toMatchObject({ status: 'processing', worker_id: 'hang-a', attempts: 1 });
  });

  it('a worker keeps none of a slow type’s jobs waiting behind its running one while fast ones stream through', async () => {
    const ranBy = new Map<string, string>();
    function fastAndSlowHandlers(label: string) {
      @Injectable()
      class FastAndSlowHandlers {
        @JobHandler('mixed.fast')
        fast() {
          return { by: label };
        }

        /** Slow: at least 300 ms of work, and until the test lets it go. */
        @JobHandler('mixed.slow', { concurrency: 1 })
        async slow(_payload: unknown, job: JobContext) {
          ranBy.set(job.id, label);
          await Promise.all([gates.wait(`${label}:${job.id}`), new Promise((resolve) => setTimeout(resolve, 300))]);
          return { by: label };
        }
      }
      return FastAndSlowHandlers;
    }
    // The default lease: a renewal pass would hand a waiting job back only 10 s after its claim.
    await app('mixed-a', { concurrency: 4 }, [fastAndSlowHandlers('a')]);
    // A runs the first slow job while hundreds of fast ones go through its other slots, and it
    // prefetches fast ones. The slow type gets no share of that prefetch (none of its jobs has
    // finished lately), so the second slow job stays in the queue for any worker.
    const jobs = await api.producer.enqueueMany([
      ...[1, 2, 3].map((n) => ({ type: 'mixed.slow', payload: { n } })),
      ...Array.from({ length: 300 }, (_, n) => ({ type: 'mixed.fast', payload: { n } })),
    ]);
    const [first, second, third] = jobs.map((job) => job.id);
    const fast = jobs.slice(3).map((job) => job.id);
    await waitFor(
      async () =>
        (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'`, [fast]))[0]
          .n === fast.length,
      { message: 'A running every fast job' },
    );
    expect(ranBy.get(first)).toBe('a');
    expect(await jobRow(second)).toMatchObject({ status: 'pending', attempts: 0, worker_id: null });

    // The first slow job finishes: A claims the second for the freed slot, and still none behind
    // it (its one slot frees every 300 ms or more), though the worker as a whole reads that finish
    // as 20 jobs/s and would keep two.
    gates.open(`a:${first}`);
    await waitFor(() => ranBy.get(second) === 'a', { message: 'A running the second slow job' });
    expect(await jobRow(third)).toMatchObject({ status: 'pending', attempts: 0, worker_id: null });

    await app('mixed-b', {}, [fastAndSlowHandlers('b')]);
    await waitFor(() => ranBy.get(third) === 'b', { message: 'B running the third slow job' });
    // A never claimed it (not even for a while, to hand it back at a renewal): B's claim is its only one.
    expect(await claimHistory(third)).toEqual([{ worker_id: 'mixed-b', status: 'processing', attempts: 1 }]);
    gates.open(`a:${second}`);
    gates.open(`b:${third}`);
    for (const [id, by] of [
      [first, 'a'],
      [second, 'a'],
      [third, 'b'],
    ]) {
      expect(await statusIs(id, 'completed')).toMatchObject({ worker_id: `mixed-${by}`, attempts: 1, result: { by } });
    }
  });

  it("a worker's renewal that finds its lease gone aborts the handler's signal, and its late result changes nothing", async () => {
    const calls = new Map<string, Call[]>();
    const c = await app('fence-c', { leaseMs: LEASE_MS, maintenanceIntervalMs: 200 }, [stubbornHandler('fence.stall', 'c', gates, calls)]);
    const events: JobQueueEvent[] = [];
    const subscription = c.events.events$.subscribe((event) => events.push(event));
    try {
      // One attempt only: once reclaimed it is dead, so nobody (C included) can run it again.
      const { id } = await api.producer.enqueue('fence.stall', { n: 3 }, { maxAttempts: 1 });
      await waitFor(() => calls.has(id), { message: 'C running the job' });
      const signal = calls.get(id)![0].signal;

      // C stalls: its lease keeps running out in the database until a reaper takes the job back.
      await waitFor(
        async () => {
          await db.query(
            `UPDATE job_queue.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1 AND status = 'processing'`,
            [id],
          );
          return (await jobRow(id)).status === 'dead';
        },
        { intervalMs: 100, message: 'the stalled job to be reclaimed' },
      );
      // C's next renewal (every 500 ms) learns the lease is gone and aborts the handler.
      await waitFor(() => signal.aborted, { timeoutMs: 5_000, message: "C's signal to abort" });
      expect(String((signal.reason as Error)?.message ?? signal.reason)).toMatch(/lease/i);
      await waitFor(() => events.some((e) => e.kind === 'lease-lost' && e.jobId === id), { message: 'lease-lost event' });

      gates.open(`c:${id}`);
      // C goes on working: a new job of the type completes, after the late return was ignored.
      const next = await api.producer.enqueue('fence.stall', { n: 4 });
      gates.open(`c:${next.id}`);
      expect(await statusIs(next.id, 'completed')).toMatchObject({ worker_id: 'fence-c', result: { by: 'c', attempt: 1 } });

      const row = await jobRow(id);
      expect(row).toMatchObject({ status: 'dead', attempts: 1, result: null, completed_at: null });
      expect(row.last_error).toMatch(/worker lost/);
      expect(calls.get(id)!.map((call) => call.attempt)).toEqual([1]);
      expect(events.filter((e) => e.kind === 'completed' && e.jobId === id)).toEqual([]);
    } finally {
      subscription.unsubscribe();
    }
  });
});
