import { Controller, Get, Header, Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Registry, register as globalRegistry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler, JobQueueModule, JobProducer, JobQueueConfigError, PermanentJobError, QueueSaturatedError, type JobContext } from '../src/index.js';
import { parsePrometheusText, sampleValue, type Sample } from './support/prometheus-text.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Prometheus series on real PostgreSQL, scraped over HTTP from an app's own /metrics endpoint and
 * parsed from the exposition text: counters and histograms as jobs run, database gauges read at
 * most once per depthRefreshMs however often scraped, and nothing registered when metrics are off.
 */
const registry = new Registry();
const releases = new Map<string, () => void>();

@Controller()
class MetricsController {
  @Get('metrics')
  @Header('content-type', 'text/plain; version=0.0.4')
  metrics(): Promise<string> {
    return registry.metrics();
  }
}

@Injectable()
class MeteredHandlers {
  @JobHandler('m.quick')
  quick() {
    return 'done';
  }

  @JobHandler('m.flaky', { baseDelayMs: 10, maxDelayMs: 20 })
  flaky(_payload: unknown, job: JobContext) {
    if (job.attempt === 1) throw new Error('first try fails');
  }

  @JobHandler('m.poison')
  poison() {
    throw new PermanentJobError('never');
  }

  @JobHandler('m.block')
  async block(_payload: unknown, job: JobContext) {
    await new Promise<void>((resolve) => releases.set(job.id, resolve));
  }

  @JobHandler('m.circuit', { circuitBreaker: { failureThreshold: 1, cooldownMs: 60_000 } })
  circuit() {
    throw new Error('downstream down');
  }
}

describe('metrics (Prometheus)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;

  const scrape = async (): Promise<Sample[]> => {
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    return parsePrometheusText(await response.text());
  };

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    @Module({
      imports: [
        JobQueueModule.forRoot({
          dataSource: { type: 'postgres', url: db.url },
          metrics: { registry },
          maxQueueDepth: 10,
          depthRefreshMs: 500,
          pollIntervalMs: 100,
        }),
      ],
      controllers: [MetricsController],
      providers: [MeteredHandlers],
    })
    class MeteredApp {}
    const moduleRef = await Test.createTestingModule({ imports: [MeteredApp] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
    base = base.replace('[::1]', '127.0.0.1');
  });

  afterAll(async () => {
    for (const release of releases.values()) release();
    await app?.close();
    await db?.drop();
  });

  it('counts enqueued (not deduplicated), completed, failed, dead; times handlers by outcome and waits', async () => {
    const producer = app.get(JobProducer);
    await producer.enqueue('m.quick', {}, { idempotencyKey: 'once' });
    await producer.enqueue('m.quick', {}, { idempotencyKey: 'once' });
    await producer.enqueue('m.flaky', {});
    await producer.enqueue('m.poison', {});
    const samples = await waitFor(
      async () => {
        const now = await scrape();
        return sampleValue(now, 'job_queue_jobs_completed_total', { type: 'm.flaky' }) === 1 &&
          sampleValue(now, 'job_queue_jobs_dead_lettered_total', { type: 'm.poison' }) === 1
          ? now
          : null;
      },
      { message: 'the outcomes counted' },
    );
    expect(sampleValue(samples, 'job_queue_jobs_enqueued_total', { type: 'm.quick' })).toBe(1);
    expect(sampleValue(samples, 'job_queue_jobs_completed_total', { type: 'm.quick' })).toBe(1);
    expect(sampleValue(samples, 'job_queue_jobs_failed_total', { type: 'm.flaky' })).toBe(1);
    expect(sampleValue(samples, 'job_queue_job_duration_seconds_count', { type: 'm.flaky', outcome: 'failed' })).toBe(1);
    expect(sampleValue(samples, 'job_queue_job_duration_seconds_count', { type: 'm.flaky', outcome: 'completed' })).toBe(1);
    expect(sampleValue(samples, 'job_queue_job_duration_seconds_count', { type: 'm.poison', outcome: 'dead' })).toBe(1);
    expect(sampleValue(samples, 'job_queue_job_wait_seconds_count', { type: 'm.flaky' })).toBe(2);
    // The retry waited its delay (10–20 ms) before it was due: the wait counts from due, not from enqueue.
    expect(sampleValue(samples, 'job_queue_job_wait_seconds_sum', { type: 'm.quick' })).toBeLessThan(5);
  });

  it('shows in-flight attempts per type, open circuits, saturation and database counts per type and status', async () => {
    const producer = app.get(JobProducer);
    const { id } = await producer.enqueue('m.block', {});
    await waitFor(async () => sampleValue(await scrape(), 'job_queue_in_flight', { type: 'm.block' }) === 1, { message: 'one in flight' });
    await producer.enqueue('m.circuit', {});
    expect(sampleValue(await scrape(), 'job_queue_saturated')).toBe(0);
    // Fill the queue up to maxQueueDepth 10 (a type nobody handles here stays waiting): enqueues
    // are refused from then on, and the gauge says so.
    await waitFor(
      async () => {
        // A refusal on the way is fine (a count a moment old may refuse early); anything else is not.
        await producer.enqueue('m.nobody', {}).catch((error: unknown) => expect(error).toBeInstanceOf(QueueSaturatedError));
        return sampleValue(await scrape(), 'job_queue_saturated') === 1;
      },
      { message: 'saturated', intervalMs: 100 },
    );
    await expect(producer.enqueue('m.nobody', {})).rejects.toBeInstanceOf(QueueSaturatedError);
    const samples = await waitFor(
      async () => {
        const now = await scrape();
        return sampleValue(now, 'job_queue_circuit_open', { type: 'm.circuit' }) === 1 ? now : null;
      },
      { message: 'the open circuit' },
    );
    releases.get(id)?.();
    await waitFor(async () => sampleValue(await scrape(), 'job_queue_in_flight', { type: 'm.block' }) === 0, { message: 'none in flight' });
  });

  it('reads the database gauges once per depthRefreshMs however often it is scraped', async () => {
    const store = app.get<{ oldestWaiting(): Promise<Map<string, number>> }>(Symbol.for('auto-job-queue:store'));
    const read = store.oldestWaiting.bind(store);
    let reads = 0;
    store.oldestWaiting = async () => {
      reads++;
      return read();
    };
    await new Promise((resolve) => setTimeout(resolve, 600));
    const started = performance.now();
    const scrapes = await Promise.all(Array.from({ length: 10 }, () => scrape()));
    for (let i = 0; i < 10; i++) scrapes.push(await scrape());
    const tookMs = performance.now() - started;
    // Twenty scrapes, ten of them at once, within one depthRefreshMs (500 ms): one read.
    if (tookMs < 450) expect(reads).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 600));
    const later = await scrape();
    expect(reads).toBeLessThanOrEqual(Math.ceil(tookMs / 500) + 2);
    // The nobody-type jobs wait, due, and none ran: its oldest waiting age is there.
    expect(sampleValue(later, 'job_queue_oldest_waiting_seconds', { type: 'm.nobody' })).toBeGreaterThan(0);
    expect(sampleValue(later, 'job_queue_jobs', { type: 'm.nobody', status: 'pending' })).toBeGreaterThan(0);
    expect(sampleValue(later, 'job_queue_jobs', { type: 'm.quick', status: 'completed' })).toBe(1);
  });

  it('registers nothing without the metrics option, and refuses a second module on the same registry', async () => {
    const off = await Test.createTestingModule({
      imports: [JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: db.url }, runWorker: false })],
    }).compile();
    await off.init();
    expect((await globalRegistry.getMetricsAsJSON()).filter((metric) => metric.name.startsWith('job_queue_'))).toEqual([]);
    await off.close();

    const twice = Test.createTestingModule({
      imports: [JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: db.url }, runWorker: false, metrics: { registry } })],
    }).compile();
    await expect(twice).rejects.toBeInstanceOf(JobQueueConfigError);
  });
});
