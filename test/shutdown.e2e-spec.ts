import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { holdsThroughout, waitFor } from './support/wait-for.js';

/**
 * The Kubernetes side of shutdown, with real child processes: SIGTERM drains (readiness down,
 * liveness still served, nothing new claimed, in-flight jobs finish or are released), a second
 * SIGTERM changes nothing, and a SIGKILL loses no job.
 */

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/** A line of a JavaScript stack trace ("    at fn (file.js:1:2)"). */
const STACK_LINE = /^\s+at\s.+(?::\d+:\d+\)?|\(native\)|\(<anonymous>\))\s*$/m;

interface Tracked {
  worker: ChildWorker;
  stderr: () => string;
  /** The exit once it happened, else null (lets waitFor poll for it with a deadline). */
  exit: () => Exit | null;
}

async function startWorker(config: Record<string, unknown>): Promise<Tracked> {
  const worker = await spawnWorker(config);
  let stderr = '';
  worker.process.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let exit: Exit | null = null;
  void worker.exited.then((result) => (exit = result));
  return { worker, stderr: () => stderr, exit: () => exit };
}

/** Exit 0, or the SIGTERM that Nest re-raises once its hooks are done; never a crash. */
function expectCleanExit(tracked: Tracked, exit: Exit): void {
  const how = exit.signal ?? `code ${exit.code}`;
  expect(['code 0', 'SIGTERM'], `exit (${how}); output:\n${tracked.worker.output()}`).toContain(how);
  expect(tracked.stderr(), 'stderr holds a stack trace').not.toMatch(STACK_LINE);
  expect(tracked.worker.output(), 'output holds a stack trace').not.toMatch(STACK_LINE);
}

async function getJson(port: number, path: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body };
}

describe('SIGTERM and SIGKILL on real worker processes', () => {
  let db: TestDatabase;
  let producer: QueueApp;
  const started: Tracked[] = [];

  async function worker(config: Record<string, unknown>): Promise<Tracked> {
    const tracked = await startWorker({ url: db.url, pollIntervalMs: 200, ...config });
    started.push(tracked);
    return tracked;
  }

  async function invocations(jobId: string) {
    return db.query<{ worker_id: string; attempt: number; finished_at: Date | null; aborted: boolean | null }>(
      `SELECT worker_id, attempt, finished_at, aborted FROM fixture_invocations WHERE job_id = $1 ORDER BY id`,
      [jobId],
    );
  }

  /** Lets `gate`'s jobs finish (the fixture handler holds a job with `gate` until then). */
  const openGate = (gate: string) => db.query(`INSERT INTO fixture_gates (name) VALUES ($1)`, [gate]);

  async function jobRow(id: string) {
    const [row] = await db.query(
      `SELECT status, attempts, worker_id, claimed_at, completed_at, lease_token FROM job_queue.jobs WHERE id = $1`,
      [id],
    );
    return row;
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    // Producer-only, in this process: it migrates the schema and enqueues.
    producer = await startQueueApp(db.url, { runWorker: false });
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((t) => t.worker.stop()));
  });
  afterAll(async () => {
    await Promise.all(started.map((t) => t.worker.stop()));
    await producer?.close();
    await db?.drop();
  });

  it('drains a running job to completion while readiness is down and liveness still answers, claiming nothing new', async () => {
    const a = await worker({ workerId: 'drain-a', httpPort: 0 });
    expect((await getJson(a.worker.port, '/health/ready')).status).toBe(200);
    // It runs until the test opens its gate: whatever the machine's speed, it is still running
    // through every check of the drain below.
    const { id } = await producer.producer.enqueue('fixture.work', { gate: 'drain-a', recordAbort: true });
    await waitFor(async () => (await invocations(id)).length === 1, { message: 'the held job to start' });

    a.worker.kill('SIGTERM');
    const ready = await waitFor(
      async () => {
        const response = await getJson(a.worker.port, '/health/ready');
        return response.status === 503 ? response : null;
      },
      { message: 'readiness to go down after SIGTERM' },
    );
    // Enqueued once the process has reacted to the signal (a job enqueued before the child's event
    // loop even saw the signal may fairly be claimed): its notification and the polls must not claim it.
    const late = await producer.producer.enqueue('fixture.work', { ms: 10 });
    const live = await getJson(a.worker.port, '/health/live');
    // Both answers came during the drain: the job has not finished yet.
    expect((await invocations(id))[0].finished_at).toBeNull();
    expect((await jobRow(id)).status).toBe('processing');
    expect(ready.body.details?.['job-queue']).toMatchObject({ status: 'down', draining: true });
    // Liveness still answers and the queue reports itself alive. The HTTP status is 200, unless
    // Terminus's own shutdown flag (set in its beforeApplicationShutdown) turned the whole check
    // into 503 `shutting_down`: that is Terminus, not the queue's indicator.
    expect(live.body.details?.['job-queue']?.status, `liveness during the drain: ${JSON.stringify(live.body)}`).toBe('up');
    if (live.status !== 200) expect({ status: live.status, overall: live.body.status }).toEqual({ status: 503, overall: 'shutting_down' });
    // Five of its poll intervals and any notification later, the draining process has still not claimed the late job.
    await holdsThroughout(
      1_000,
      async () => expect(await jobRow(late.id), 'the job enqueued during the drain').toMatchObject({ status: 'pending', worker_id: null }),
      'the drain to go on for a second',
    );
    expect((await invocations(id))[0].finished_at).toBeNull();

    await openGate('drain-a');
    const exit = await waitFor(a.exit, { timeoutMs: 15_000, message: 'the worker to exit after its drain' });
    expectCleanExit(a, exit);

    expect(await jobRow(id)).toMatchObject({ status: 'completed', attempts: 1, worker_id: 'drain-a' });
    const [run] = await invocations(id);
    expect(run).toMatchObject({ worker_id: 'drain-a', attempt: 1, aborted: false });
    expect(run.finished_at).toBeInstanceOf(Date);

    // The job enqueued after the signal was never claimed by the draining process.
    expect(await jobRow(late.id)).toMatchObject({ status: 'pending', attempts: 0, worker_id: null, claimed_at: null });
    expect(await invocations(late.id)).toEqual([]);
    await producer.admin.cancel(late.id);
  });

  it('releases a job that outlives drainTimeoutMs back to pending, aborted, for another worker to run', async () => {
    const b = await worker({ workerId: 'drain-b', drainTimeoutMs: 1_000 });
    // Held by a gate the test never opens: only the drain's timeout can end it.
    const { id } = await producer.producer.enqueue('fixture.work', { gate: 'drain-b', recordAbort: true });
    await waitFor(async () => (await invocations(id)).length === 1, { message: 'the held job to start' });
    expect(await jobRow(id)).toMatchObject({ status: 'processing', attempts: 1, worker_id: 'drain-b' });

    b.worker.kill('SIGTERM');
    const exit = await waitFor(b.exit, { timeoutMs: 15_000, message: 'the worker to exit once the drain timed out' });
    expectCleanExit(b, exit);

    expect(await jobRow(id)).toMatchObject({ status: 'pending', attempts: 0, worker_id: null, claimed_at: null, lease_token: null });
    const [aborted] = await invocations(id);
    expect(aborted).toMatchObject({ worker_id: 'drain-b', attempt: 1, aborted: true });

    // Shorten the released job so the next worker finishes it quickly; nothing else changes.
    await db.query(`UPDATE job_queue.jobs SET payload = '{"ms": 20}' WHERE id = $1 AND status = 'pending'`, [id]);
    await worker({ workerId: 'drain-c' });
    await waitFor(async () => (await jobRow(id)).status === 'completed', { message: 'another worker to complete the job' });
    expect(await jobRow(id)).toMatchObject({ status: 'completed', attempts: 1, worker_id: 'drain-c' });
    const runs = await invocations(id);
    expect(runs).toHaveLength(2);
    expect(runs[1]).toMatchObject({ worker_id: 'drain-c', attempt: 1, aborted: false });
  });

  it('ignores a second SIGTERM during the drain: the job still completes once and the exit is clean', async () => {
    const d = await worker({ workerId: 'drain-d', httpPort: 0 });
    const { id } = await producer.producer.enqueue('fixture.work', { gate: 'drain-d', recordAbort: true });
    await waitFor(async () => (await invocations(id)).length === 1, { message: 'the held job to start' });

    d.worker.kill('SIGTERM');
    await waitFor(async () => (await getJson(d.worker.port, '/health/ready')).status === 503, { message: 'the drain to begin' });
    d.worker.kill('SIGTERM');
    // The second signal changes nothing: the process stays up, draining, its job running.
    await holdsThroughout(
      500,
      async () => {
        expect(d.exit(), 'exit after the second SIGTERM').toBeNull();
        expect((await invocations(id))[0]).toMatchObject({ finished_at: null, aborted: null });
      },
      'the second SIGTERM to be handled',
    );
    expect((await getJson(d.worker.port, '/health/ready')).status).toBe(503);

    await openGate('drain-d');
    const exit = await waitFor(d.exit, { timeoutMs: 15_000, message: 'the worker to exit after its drain' });
    expectCleanExit(d, exit);
    expect(await jobRow(id)).toMatchObject({ status: 'completed', attempts: 1, worker_id: 'drain-d' });
    const runs = await invocations(id);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ worker_id: 'drain-d', aborted: false });
    expect(runs[0].finished_at).toBeInstanceOf(Date);
  });

  it('loses no job when one of three workers is SIGKILLed midway through 3,000 jobs', { timeout: 90_000 }, async () => {
    const settings = { leaseMs: 2_000, maintenanceIntervalMs: 200, concurrency: 10, prefetch: 20 };
    const [wa, wb, wc] = await Promise.all(['kill-a', 'kill-b', 'kill-c'].map((workerId) => worker({ workerId, ...settings })));
    const ids = (
      await producer.producer.enqueueMany(Array.from({ length: 3_000 }, (_, n) => ({ type: 'fixture.work', payload: { ms: 5, n } })))
    ).map((r) => r.id);
    const completed = async () =>
      (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'`, [ids]))[0]
        .n as number;

    await waitFor(
      async () => {
        const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM fixture_invocations WHERE worker_id = 'kill-b'`);
        return n >= 100 && (await completed()) >= 1_000;
      },
      { timeoutMs: 30_000, message: 'a third of the jobs done, kill-b among the workers' },
    );
    wb.worker.kill('SIGKILL');
    expect(await waitFor(wb.exit, { message: 'kill-b to die' })).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await completed(), 'the kill came before the end').toBeLessThan(3_000);

    await waitFor(async () => (await completed()) === 3_000, { timeoutMs: 45_000, message: 'every job completed' });
    expect(wa.exit()).toBeNull();
    expect(wc.exit()).toBeNull();

    const jobs = await db.query<{ id: string; attempts: number; worker_id: string; last_error: string | null }>(
      `SELECT id::text AS id, attempts, worker_id, last_error FROM job_queue.jobs WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    const runs = await db.query<{ job_id: string; worker_id: string; attempt: number; finished_at: Date | null }>(
      `SELECT job_id::text AS job_id, worker_id, attempt, finished_at FROM fixture_invocations
       WHERE job_id = ANY($1::bigint[]) ORDER BY id`,
      [ids],
    );
    const runsByJob = new Map<string, typeof runs>();
    for (const run of runs) runsByJob.set(run.job_id, [...(runsByJob.get(run.job_id) ?? []), run]);

    // Nothing lost: every job ran, and completed.
    expect(jobs).toHaveLength(3_000);
    expect(ids.filter((id) => !runsByJob.has(id))).toEqual([]);

    // Only jobs kill-b had in flight ran twice: first on kill-b (its outcome never recorded), then elsewhere.
    const twice = [...runsByJob.entries()].filter(([, list]) => list.length > 1);
    for (const [jobId, list] of twice) {
      expect(list, `runs of job ${jobId}`).toHaveLength(2);
      expect(list[0], `first run of job ${jobId}`).toMatchObject({ worker_id: 'kill-b', attempt: 1 });
      expect(list[1].worker_id, `second run of job ${jobId}`).not.toBe('kill-b');
      // Its run on kill-b counted if its start had been charged: by the claim (it took a free slot
      // at once), or a few ms after it started from the buffer. A short job killed within those
      // few ms runs again as attempt 1, its attempts as if never claimed.
      expect([1, 2], `second run of job ${jobId}`).toContain(list[1].attempt);
      expect(list[1].finished_at).toBeInstanceOf(Date);
    }
    // (A first run may show finished_at: the handler returned just before the kill, whose completion
    // write never landed. That job is still one kill-b had in flight, so it runs again.)

    // Reclaimed jobs are exactly the ones whose kill-b lease expired: those running (at most
    // concurrency), those whose handler had returned but whose outcome was still being written (at
    // most concurrency), prefetched ones it had not started (at most prefetch), and those of a
    // claim it had sent ahead (at most concurrency plus prefetch); the unstarted ones ran once,
    // elsewhere, as attempt 1, their attempts untouched. Only a run kill-b had started and charged
    // counts: none took more than that one extra attempt.
    expect(twice.length, 'kill-b had jobs in flight').toBeGreaterThan(0);
    // Effects repeat only for jobs kill-b had started.
    expect(twice.length).toBeLessThanOrEqual(2 * settings.concurrency);
    const reclaimed = jobs.filter((job) => job.attempts !== 1);
    for (const job of reclaimed) {
      expect(job.attempts, `attempts of job ${job.id}`).toBe(2);
      expect(job.last_error, `last error of job ${job.id}`).toMatch(/^worker lost: kill-b /);
      expect(job.worker_id).not.toBe('kill-b');
      // Its start was charged on kill-b: by its run there, or by the claim that took it for a free
      // slot, which charges before the handler starts (a kill in between leaves no run recorded there).
      const charged = runsByJob.get(job.id)!;
      expect(charged.length, `runs of charged job ${job.id}`).toBeLessThanOrEqual(2);
      expect(charged.at(-1), `last run of charged job ${job.id}`).toMatchObject({ attempt: 2 });
      expect(charged.at(-1)!.worker_id).not.toBe('kill-b');
    }
    // Every job's attempts are its charged runs: its last run's number.
    for (const job of jobs) expect(job.attempts, `attempts of job ${job.id}`).toBe(runsByJob.get(job.id)!.at(-1)!.attempt);
    // Completed by kill-b means it ran exactly once, there.
    for (const job of jobs.filter((j) => j.worker_id === 'kill-b')) {
      expect(runsByJob.get(job.id)!.map((r) => r.worker_id)).toEqual(['kill-b']);
    }
  });
});
