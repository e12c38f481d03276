import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobQueueConnection } from '../libs/job-queue/src/connection/job-queue.connection.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * OpenTelemetry across two processes on real PostgreSQL: an HTTP-like span in this process
 * enqueues (a `send` span, its context stored with the job); a worker child process with its own
 * SDK runs the job in a `process` span that continues the trace, and the handler's own span nests
 * under it. Each process exports to memory; the child prints its spans.
 */
const WORKER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../build/test/fixtures/traced-worker.js');

interface ChildSpan {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  attributes: Record<string, unknown>;
  status: { code: number };
  events: Array<{ name: string; attributes?: Record<string, unknown> }>;
}

describe('tracing (OpenTelemetry)', () => {
  let db: TestDatabase;
  let producer: QueueApp;
  let worker: ChildProcess;
  const childSpans: ChildSpan[] = [];
  const exporter = new InMemorySpanExporter();
  const tracer = () => trace.getTracer('test-app');

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    db = await createTestDatabase(inject('adminUrl'));
    producer = await startQueueApp(db.url, { runWorker: false });
    worker = spawn(process.execPath, [WORKER], { env: { ...process.env, AJQ_FIXTURE: JSON.stringify({ url: db.url }) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let buffered = '';
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the traced worker did not start:\n${output}`)), 30_000);
      worker.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      worker.stdout!.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) {
          if (line.startsWith('READY')) {
            clearTimeout(timer);
            resolve();
          }
          if (line.startsWith('SPAN ')) childSpans.push(JSON.parse(line.slice(5)));
        }
      });
      worker.once('exit', (code) => reject(new Error(`the traced worker exited (${code}):\n${output}`)));
    });
  });

  afterAll(async () => {
    worker?.kill('SIGTERM');
    await producer?.close();
    await db?.drop();
    trace.disable();
    propagation.disable();
    context.disable();
  });

  const processSpans = (jobId: string) => childSpans.filter((span) => span.name === 'process traced.work' && span.attributes['messaging.message.id'] === jobId);

  it("continues a request's trace into the handler in another process: request → send → process → the handler's span", async () => {
    const jobId = await tracer().startActiveSpan('POST /reports', async (request) => {
      const { id } = await producer.producer.enqueue('traced.work', {});
      request.end();
      return id;
    });
    const [processed] = await waitFor(() => (processSpans(jobId).length === 1 ? processSpans(jobId) : null), { message: 'the process span' });
    const spans = exporter.getFinishedSpans();
    const request = spans.find((span) => span.name === 'POST /reports')!;
    const send = spans.find((span) => span.name === 'send traced.work' && span.attributes['messaging.message.id'] === jobId)!;
    expect(send).toBeDefined();
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(send.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(send.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(send.attributes).toMatchObject({
      'messaging.system': 'auto-job-queue',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'traced.work',
      'messaging.message.id': jobId,
    });

    expect(processed.kind).toBe(SpanKind.CONSUMER);
    expect(processed.traceId).toBe(request.spanContext().traceId);
    expect(processed.parentSpanId).toBe(send.spanContext().spanId);
    expect(processed.attributes).toMatchObject({
      'messaging.system': 'auto-job-queue',
      'messaging.operation.type': 'process',
      'messaging.destination.name': 'traced.work',
      'messaging.message.id': jobId,
      'auto_job_queue.attempt': 1,
    });
    expect(processed.status.code).not.toBe(SpanStatusCode.ERROR);
    const handler = await waitFor(() => childSpans.find((span) => span.name === 'handler work' && span.parentSpanId === processed.spanId), {
      message: "the handler's span under the process span",
    });
    expect(handler.traceId).toBe(request.spanContext().traceId);
  });

  it('records a failed attempt on its span, and the retry continues the same trace', async () => {
    const jobId = await tracer().startActiveSpan('POST /flaky', async (request) => {
      const { id } = await producer.producer.enqueue('traced.work', { failFirst: true });
      request.end();
      return id;
    });
    const attempts = await waitFor(() => (processSpans(jobId).length === 2 ? processSpans(jobId) : null), { message: 'two attempts' });
    const send = exporter.getFinishedSpans().find((span) => span.name === 'send traced.work' && span.attributes['messaging.message.id'] === jobId)!;
    const [first, second] = [...attempts].sort((a, b) => Number(a.attributes['auto_job_queue.attempt']) - Number(b.attributes['auto_job_queue.attempt']));
    expect(first.status.code).toBe(SpanStatusCode.ERROR);
    expect(first.events).toEqual([expect.objectContaining({ name: 'exception', attributes: expect.objectContaining({ 'exception.message': 'first attempt fails' }) })]);
    expect(second.status.code).not.toBe(SpanStatusCode.ERROR);
    for (const attempt of [first, second]) {
      expect(attempt.traceId).toBe(send.spanContext().traceId);
      expect(attempt.parentSpanId).toBe(send.spanContext().spanId);
    }
  });

  it('carries the context of enqueueMany and of an enqueue in the caller\'s transaction; stores none with no tracer provider', async () => {
    const ids = await tracer().startActiveSpan('batch', async (span) => {
      const many = await producer.producer.enqueueMany([
        { type: 'traced.work', payload: { n: 1 } },
        { type: 'traced.work', payload: { n: 2 } },
      ]);
      // In the caller's transaction, as the transactional outbox is used.
      const { dataSource } = producer.app.get(JobQueueConnection);
      const inTransaction = await dataSource.transaction((manager) => producer.producer.enqueue('traced.work', { n: 3 }, { manager }));
      many.push(inTransaction);
      span.end();
      return many.map((result) => result.id);
    });
    const rows = await db.query<{ id: string; trace_context: string | null }>(`SELECT id::text, trace_context FROM job_queue.jobs WHERE id = ANY($1::bigint[])`, [ids]);
    expect(rows.every((row) => JSON.parse(row.trace_context!).traceparent.length > 0)).toBe(true);
    await waitFor(() => ids.every((id) => processSpans(id).length === 1), { message: 'the batch processed in its trace' });

    // No tracer provider and no propagator (an app without an SDK): nothing is stored.
    trace.disable();
    propagation.disable();
    try {
      const { id } = await producer.producer.enqueue('traced.work', {});
      const [row] = await db.query<{ trace_context: string | null }>(`SELECT trace_context FROM job_queue.jobs WHERE id = $1`, [id]);
      expect(row.trace_context).toBeNull();
    } finally {
      trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
      propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    }
  });
});
