import { Injectable } from '@nestjs/common';
import net from 'node:net';
import type { Subscription } from 'rxjs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { JobHandler, type JobContext, type JobQueueEvent, PermanentJobError, QueueSaturatedError } from '../src/index.js';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { captureErrorLogs, startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { type Sampler, sampleWhile, waitFor } from './support/wait-for.js';

/**
 * Kubernetes probes and backpressure: readiness goes down while the queue is saturated or the
 * database is away, degrades on dead letters, and liveness stays up through all of it.
 */

async function request(
  port: number,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any; retryAfter: string | null }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  const retryAfter = response.headers.get('retry-after');
  try {
    return { status: response.status, body: JSON.parse(text), retryAfter };
  } catch {
    return { status: response.status, body: text, retryAfter };
  }
}

/** The queue's readiness entry, read as plain data. */
async function readiness(queue: QueueApp): Promise<Record<string, any>> {
  return (await queue.health.isReady())['job-queue'];
}

const get = (port: number, path: string) => request(port, 'GET', path);

/** A TCP proxy on 127.0.0.1 that the test can cut and restore, to take the database away. */
class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async open(port = this.port): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, this.targetHost);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as net.AddressInfo).port;
  }

  /** Stops listening and cuts every open connection. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

const poisoned: string[] = [];

@Injectable()
class PoisonHandler {
  @JobHandler('report.poison')
  async run(_payload: unknown, job: JobContext) {
    poisoned.push(job.id);
    throw new PermanentJobError('report.poison always fails');
  }
}

/** Dead-letters its job while `deadLetters.on`; completes it otherwise. */
const deadLetters = { on: true };

@Injectable()
class SwitchablePoisonHandler {
  @JobHandler('report.dead-letter')
  run() {
    if (deadLetters.on) throw new PermanentJobError('report.dead-letter fails while switched on');
  }
}

let releaseSlow: () => void = () => undefined;

@Injectable()
class SlowHandler {
  @JobHandler('report.slow')
  async run() {
    await new Promise<void>((resolve) => (releaseSlow = resolve));
  }
}

describe('health probes and backpressure', () => {
  let db: TestDatabase;
  const children: ChildWorker[] = [];
  const apps: QueueApp[] = [];
  const subscriptions: Subscription[] = [];
  const samplers: Array<Sampler<unknown>> = [];

  async function child(config: Record<string, unknown>): Promise<ChildWorker> {
    const worker = await spawnWorker({ url: db.url, pollIntervalMs: 200, ...config });
    children.push(worker);
    return worker;
  }

  async function app(...args: Parameters<typeof startQueueApp> extends [string, ...infer Rest] ? Rest : never): Promise<QueueApp> {
    const started = await startQueueApp(db.url, ...args);
    apps.push(started);
    return started;
  }

  /** Samples a child's liveness over HTTP from now until the sampler is stopped. */
  function sampleLiveness(worker: ChildWorker): Sampler<number | string> {
    const sampler = sampleWhile(async () => (await get(worker.port, '/health/live')).status, { intervalMs: 50 });
    samplers.push(sampler);
    return sampler;
  }

  /** Liveness answered 200 to every sample (and there were samples). */
  async function expectLiveThroughout(sampler: Sampler<number | string>): Promise<void> {
    const statuses = await sampler.stop();
    expect(statuses.filter((status) => status !== 200), 'liveness answers other than 200').toEqual([]);
    expect(statuses.length, 'liveness samples taken').toBeGreaterThanOrEqual(2);
  }

  function collect(queue: QueueApp): JobQueueEvent[] {
    const seen: JobQueueEvent[] = [];
    subscriptions.push(queue.events.events$.subscribe((event) => seen.push(event)));
    return seen;
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
  });
  afterEach(async () => {
    await Promise.all(samplers.splice(0).map((sampler) => sampler.stop()));
    await Promise.all(children.splice(0).map((w) => w.stop()));
    for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('refuses enqueues past maxQueueDepth with 503, reports not ready, and recovers once a worker drains the queue', async () => {
    const api = await child({ schema: 'hq_sat', runWorker: false, maxQueueDepth: 50, depthRefreshMs: 200, httpPort: 0 });
    expect((await get(api.port, '/health/ready')).status).toBe(200);

    const answers: Array<{ status: number; body: any; retryAfter: string | null }> = [];
    for (let n = 0; n < 80; n++) {
      answers.push(await request(api.port, 'POST', '/jobs', { type: 'fixture.work', payload: { ms: 1, n } }));
    }
    expect(answers.slice(0, 50).map((a) => a.status)).toEqual(Array(50).fill(201));
    expect(answers.slice(50).map((a) => a.status)).toEqual(Array(30).fill(503));
    for (const refused of answers.slice(50)) {
      // Answered by the shipped JobQueueErrorFilter.
      expect(refused.retryAfter).toBe('5');
      expect(refused.body).toMatchObject({ statusCode: 503, code: 'JOB_QUEUE_SATURATED' });
      expect(refused.body.limit).toBe(50);
      expect(refused.body.depth).toBeGreaterThanOrEqual(50);
    }
    const [{ stored }] = await db.query(`SELECT count(*)::int AS stored FROM hq_sat.jobs`);
    expect(stored).toBeGreaterThanOrEqual(50);
    expect(stored).toBeLessThanOrEqual(55);

    const saturated = await get(api.port, '/health/ready');
    expect(saturated.status).toBe(503);
    expect(saturated.body.details['job-queue']).toMatchObject({ status: 'down', message: 'queue saturated', limit: 50, draining: false });
    expect(saturated.body.details['job-queue'].depth).toBeGreaterThanOrEqual(50);
    expect((await get(api.port, '/health/live')).status).toBe(200);

    await child({ schema: 'hq_sat', concurrency: 10 });
    await waitFor(
      async () => (await db.query(`SELECT count(*)::int AS n FROM hq_sat.jobs WHERE status = 'completed'`))[0].n === stored,
      { timeoutMs: 30_000, message: 'the worker to drain the queue' },
    );
    const recovered = await waitFor(
      async () => {
        const response = await get(api.port, '/health/ready');
        return response.status === 200 ? response : null;
      },
      { message: 'readiness to come back once the queue drained' },
    );
    expect(recovered.body.details['job-queue']).toMatchObject({ status: 'up', depth: 0, limit: 50 });
    expect((await request(api.port, 'POST', '/jobs', { type: 'fixture.work', payload: { ms: 1 } })).status).toBe(201);
  });

  it('emits `saturated` once per transition into saturation, and writes nothing it refuses', async () => {
    const queue = await app({ schema: 'hq_sat_events', runWorker: false, maxQueueDepth: 5, depthRefreshMs: 50 });
    const events = collect(queue);
    const refusals: unknown[] = [];
    for (let n = 0; n < 9; n++) {
      await queue.producer.enqueue('report.build', { n }).catch((error) => refusals.push(error));
    }
    expect(refusals).toHaveLength(4);
    for (const error of refusals) {
      expect(error).toBeInstanceOf(QueueSaturatedError);
      expect(error).toMatchObject({ limit: 5 });
      expect((error as QueueSaturatedError).depth).toBeGreaterThanOrEqual(5);
    }
    const saturatedEvents = () => events.filter((e) => e.kind === 'saturated');
    expect(saturatedEvents()).toHaveLength(1);
    expect(saturatedEvents()[0]).toMatchObject({ kind: 'saturated', limit: 5 });
    expect(saturatedEvents()[0].depth).toBeGreaterThanOrEqual(5);
    expect((await db.query(`SELECT count(*)::int AS n FROM hq_sat_events.jobs`))[0].n).toBe(5);
    expect((await readiness(queue)).status).toBe('down');

    // The queue empties (cancelled jobs do not wait), readiness recovers, and a new saturation fires again.
    const waiting = await db.query<{ id: string }>(`SELECT id::text AS id FROM hq_sat_events.jobs`);
    for (const { id } of waiting) await queue.admin.cancel(id);
    await waitFor(async () => (await readiness(queue)).status === 'up', { message: 'readiness to recover' });
    expect(saturatedEvents()).toHaveLength(1);
    for (let n = 0; n < 6; n++) await queue.producer.enqueue('report.build', { n }).catch(() => undefined);
    expect(saturatedEvents()).toHaveLength(2);
  });

  it('raises a dead-letter alert and degrades readiness (HTTP 200) on one dead letter; liveness stays up', async () => {
    // The in-process app raises the alert; the child serves the probes over HTTP. Both see schema hq_dead.
    const queue = await app(
      { schema: 'hq_dead', workerId: 'dead-inproc', deadLetterAlertThreshold: 1, depthRefreshMs: 100 },
      [PoisonHandler],
    );
    const events = collect(queue);
    const probe = await child({ schema: 'hq_dead', deadLetterAlertThreshold: 1, depthRefreshMs: 100, httpPort: 0 });
    expect((await get(probe.port, '/health/ready')).body.details['job-queue'].status).toBe('up');
    // The child's liveness, from before the dead letter to the end: it never goes down.
    const live = sampleLiveness(probe);

    const { id } = await queue.producer.enqueue('report.poison', {});
    await waitFor(() => events.some((e) => e.kind === 'dead-lettered' && e.jobId === id), { message: 'the job to be dead-lettered' });
    const alert = await waitFor(
      async () => {
        await queue.health.isReady(); // readiness refreshes the monitor (it also runs every 5 s on its own)
        return events.find((e) => e.kind === 'dead-letter-alert');
      },
      { message: 'a dead-letter-alert event' },
    );
    expect(alert.count).toBe(1);
    const inProcess = await readiness(queue);
    expect(inProcess).toMatchObject({ status: 'degraded', dead: 1 });
    expect(queue.health.isAlive()['job-queue'].status).toBe('up');
    // Raised once, not on every refresh.
    expect(events.filter((e) => e.kind === 'dead-letter-alert')).toHaveLength(1);

    const degraded = await waitFor(
      async () => {
        const response = await get(probe.port, '/health/ready');
        return response.body?.details?.['job-queue']?.status === 'degraded' ? response : null;
      },
      { message: 'the child to report degraded readiness' },
    );
    expect(degraded.status).toBe(200);
    expect(degraded.body.details['job-queue']).toMatchObject({ status: 'degraded', dead: 1 });
    await expectLiveThroughout(live);
    expect(poisoned).toEqual([id]);
  });

  describe('dead-letter alert above a threshold of one', () => {
    /**
     * The monitored app (in-process, it runs the handler) and a producer-only app on the same
     * schema. Jobs come from the second one, so the first one's numbers change only when it
     * reads them afresh from the database. The second one never alerts (its threshold is out of
     * reach), so every alert and alert log here is the first one's.
     */
    async function alertApps(schema: string, threshold: number) {
      const source = await app({ schema, runWorker: false, deadLetterAlertThreshold: 1_000 });
      const queue = await app({ schema, workerId: `${schema}-worker`, deadLetterAlertThreshold: threshold, depthRefreshMs: 100 }, [
        SwitchablePoisonHandler,
      ]);
      const events = collect(queue);
      let waiting = 0;
      return {
        source,
        queue,
        events,
        alerts: () => events.filter((e) => e.kind === 'dead-letter-alert'),
        /** Enqueues `n` jobs of the switchable type and waits until the worker has dead-lettered them all. */
        async deadLetter(n: number) {
          const jobs = await source.producer.enqueueMany(Array.from({ length: n }, (_, i) => ({ type: 'report.dead-letter', payload: { i } })));
          await waitFor(() => jobs.every((job) => events.some((e) => e.kind === 'dead-lettered' && e.jobId === job.id)), {
            message: `${n} job(s) dead-lettered`,
          });
          return jobs.map((job) => job.id);
        },
        /**
         * Readiness from a read of the database made after this call: a job nobody here handles is
         * added from the other app, and readiness is probed until its depth counts it.
         */
        async freshReadiness() {
          waiting++;
          await source.producer.enqueue('report.waits', { waiting });
          return waitFor(
            async () => {
              const details = await readiness(queue);
              return details.depth === waiting ? details : null;
            },
            { message: `a fresh read counting ${waiting} waiting job(s)` },
          );
        },
      };
    }

    beforeEach(() => {
      deadLetters.on = true;
    });

    it('threshold 3: no alert at two dead letters; the third raises one event and one error log, and readiness degrades', async () => {
      const { alerts, deadLetter, freshReadiness, queue } = await alertApps('hq_alert3', 3);
      const logs = captureErrorLogs();
      try {
        await deadLetter(2);
        for (let read = 0; read < 3; read++) {
          expect(await freshReadiness()).toMatchObject({ status: 'up', dead: 2 });
        }
        expect(alerts()).toEqual([]);
        expect(logs.errors.filter((line) => /dead-lettered in the last hour/.test(line))).toEqual([]);

        await deadLetter(1);
        const alert = await waitFor(
          async () => {
            await queue.health.isReady();
            return alerts()[0];
          },
          { message: 'a dead-letter-alert event' },
        );
        expect(alert).toMatchObject({ kind: 'dead-letter-alert', count: 3 });
        expect(await freshReadiness()).toMatchObject({ status: 'degraded', dead: 3 });
        expect(alerts()).toHaveLength(1);
        const alertLogs = logs.errors.filter((line) => /dead-lettered in the last hour/.test(line));
        expect(alertLogs).toHaveLength(1);
        expect(alertLogs[0]).toMatch(/^3 job\(s\) dead-lettered in the last hour \(alert threshold 3\)/);
        expect(alertLogs[0]).toContain('report.dead-letter fails while switched on');
      } finally {
        logs.stop();
      }
    });

    it('raises the alert once per crossing: not again for more dead letters or later reads, again after falling below', async () => {
      const { alerts, deadLetter, freshReadiness, queue } = await alertApps('hq_alert_once', 3);
      const first = await deadLetter(3);
      await waitFor(
        async () => {
          await queue.health.isReady();
          return alerts().length > 0;
        },
        { message: 'the first alert' },
      );

      // More dead letters, and reads over several refresh periods: still alerting, no new event.
      await deadLetter(2);
      for (let read = 0; read < 4; read++) {
        expect(await freshReadiness()).toMatchObject({ status: 'degraded', dead: 5 });
      }
      expect(alerts()).toHaveLength(1);

      // Replayed dead letters that now succeed take the count below the threshold: readiness recovers, silently.
      deadLetters.on = false;
      for (const id of first) await queue.admin.retryDead(id);
      await waitFor(async () => (await Promise.all(first.map((id) => queue.admin.getJob(id)))).every((job) => job?.status === 'completed'), {
        message: 'the replayed jobs to complete',
      });
      expect(await freshReadiness()).toMatchObject({ status: 'up', dead: 2 });
      expect(alerts()).toHaveLength(1);

      // Reaching it again is a new crossing: one more event.
      deadLetters.on = true;
      await deadLetter(1);
      const second = await waitFor(
        async () => {
          await queue.health.isReady();
          return alerts()[1];
        },
        { message: 'the second alert' },
      );
      expect(second).toMatchObject({ kind: 'dead-letter-alert', count: 3 });
      expect(await freshReadiness()).toMatchObject({ status: 'degraded', dead: 3 });
      expect(alerts()).toHaveLength(2);
    });

    it('raises the alert from its own periodic read when nothing probes readiness and nothing enqueues through it', async () => {
      // Watched: producer-only, never probed, never enqueued through. Its periodic read runs every
      // max(depthRefreshMs, 5 s); only that read can see the dead letters.
      const watcher = await app({ schema: 'hq_alert_idle', runWorker: false, deadLetterAlertThreshold: 2, depthRefreshMs: 100 });
      const watched = collect(watcher);
      // The dead letters are made by another app, with its own monitor.
      const worker = await app({ schema: 'hq_alert_idle', workerId: 'alert-idle-worker', deadLetterAlertThreshold: 1_000 }, [
        SwitchablePoisonHandler,
      ]);
      const workerEvents = collect(worker);
      const jobs = await worker.producer.enqueueMany([0, 1].map((i) => ({ type: 'report.dead-letter', payload: { i } })));
      await waitFor(() => jobs.every((job) => workerEvents.some((e) => e.kind === 'dead-lettered' && e.jobId === job.id)), {
        message: 'both jobs dead-lettered',
      });

      const alert = await waitFor(() => watched.find((e) => e.kind === 'dead-letter-alert'), {
        timeoutMs: 15_000,
        message: "the watcher's own periodic read to raise the alert",
      });
      expect(alert).toMatchObject({ kind: 'dead-letter-alert', count: 2 });
      expect(watched.filter((e) => e.kind === 'dead-letter-alert')).toHaveLength(1);
      expect(workerEvents.filter((e) => e.kind === 'dead-letter-alert')).toEqual([]);
      expect(await readiness(watcher)).toMatchObject({ status: 'degraded', dead: 2 });
    });
  });

  it('keeps liveness up but takes readiness down while the database is unreachable, and recovers', { timeout: 60_000 }, async () => {
    const target = new URL(db.url);
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.open();
    try {
      const viaProxy = new URL(db.url);
      viaProxy.hostname = '127.0.0.1';
      viaProxy.port = String(proxy.port);
      const worker = await child({ url: viaProxy.toString(), schema: 'hq_outage', depthRefreshMs: 200, httpPort: 0 });
      expect((await get(worker.port, '/health/ready')).status).toBe(200);
      expect((await get(worker.port, '/health/live')).status).toBe(200);

      // Liveness, from before the cut until the queue works again: it never goes down.
      const live = sampleLiveness(worker);
      await proxy.close();
      const down = await waitFor(
        async () => {
          const response = await get(worker.port, '/health/ready');
          return response.status === 503 ? response : null;
        },
        { message: 'readiness to go down without the database' },
      );
      expect(down.body.details['job-queue'].status).toBe('down');
      expect(down.body.details['job-queue'].message).toMatch(/^database unreachable: /);
      // The driver's reason, not the typed error's advice to callers repeated after it.
      expect(down.body.details['job-queue'].message).not.toMatch(/could not serve this call/);
      // Still down a few probes later, while the worker keeps failing to claim (and, sampled, alive).
      for (let n = 0; n < 5; n++) expect((await get(worker.port, '/health/ready')).status).toBe(503);

      await proxy.open(proxy.port);
      await waitFor(async () => (await get(worker.port, '/health/ready')).status === 200, {
        timeoutMs: 20_000,
        message: 'readiness to recover once the database is back',
      });
      // And it works again: a job enqueued through it completes.
      const enqueued = await request(worker.port, 'POST', '/jobs', { type: 'fixture.work', payload: { ms: 1 } });
      expect(enqueued.status).toBe(201);
      await waitFor(
        async () => (await db.query(`SELECT status FROM hq_outage.jobs WHERE id = $1`, [enqueued.body.id]))[0]?.status === 'completed',
        { timeoutMs: 20_000, message: 'a job to complete after the outage' },
      );
      await expectLiveThroughout(live);
      const exit = await worker.stop();
      expect(['code 0', 'SIGTERM']).toContain(exit.signal ?? `code ${exit.code}`);
    } finally {
      await Promise.all(children.splice(0).map((w) => w.stop()));
      await proxy.close();
    }
  });

  it('puts depth, dead, inFlight and draining in the readiness details', async () => {
    const queue = await app({ schema: 'hq_details', workerId: 'details-a', depthRefreshMs: 50 }, [SlowHandler]);
    const idle = await readiness(queue);
    expect(idle).toMatchObject({ status: 'up', depth: 0, dead: 0, inFlight: 0, draining: false });

    const { id } = await queue.producer.enqueue('report.slow', {});
    await waitFor(async () => (await queue.admin.getJob(id))?.status === 'processing', { message: 'the slow job to start' });
    await queue.producer.enqueue('report.build', {}); // no handler here: it waits
    const busy = await waitFor(
      async () => {
        const details = await readiness(queue);
        return details.depth === 1 ? details : null;
      },
      { message: 'depth to count the waiting job' },
    );
    expect(busy).toMatchObject({ status: 'up', depth: 1, dead: 0, inFlight: 1, draining: false });

    // During the drain the same details say so.
    const closing = queue.close();
    const draining = await waitFor(
      async () => {
        const details = await readiness(queue);
        return details.draining ? details : null;
      },
      { message: 'readiness to report the drain' },
    );
    expect(draining).toMatchObject({ status: 'down', draining: true, inFlight: 1 });
    releaseSlow();
    await closing;
  });
});
