import type { JobTracing } from '../base/job-tracing.js';
import { isThenable } from '../base/thenable.js';

/** The few @opentelemetry/api shapes used here, so no declaration of ours names its types. */
interface Span {
  setAttribute(key: string, value: string | number): void;
  recordException(exception: { name: string; message: string }): void;
  setStatus(status: { code: number; message?: string }): void;
  end(): void;
}
interface OtelApi {
  trace: {
    getTracer(name: string, version?: string): { startSpan(name: string, options: Record<string, unknown>, context?: unknown): Span };
    setSpan(context: unknown, span: Span): unknown;
  };
  context: { active(): unknown; with<T>(context: unknown, fn: () => T): T };
  propagation: {
    inject(context: unknown, carrier: Record<string, string>): void;
    extract(context: unknown, carrier: Record<string, string>): unknown;
  };
  ROOT_CONTEXT: unknown;
  SpanKind: { PRODUCER: number; CONSUMER: number };
  SpanStatusCode: { ERROR: number };
}

const SYSTEM = 'auto-job-queue';

/**
 * OpenTelemetry spans through the app's own @opentelemetry/api (an optional peer): with no tracer
 * provider registered the API's tracer is a no-op, and a job stores a context only when there is
 * one to continue (an active trace, or a recording span).
 */
export class OpenTelemetryTracing implements JobTracing {
  private readonly tracer: ReturnType<OtelApi['trace']['getTracer']>;

  private constructor(private readonly api: OtelApi) {
    this.tracer = api.trace.getTracer(SYSTEM);
  }

  /** The API if the app has it, else null: tracing then costs nothing. */
  static async load(): Promise<OpenTelemetryTracing | null> {
    try {
      // A name the compiler does not resolve: @opentelemetry/api is the app's dependency, not ours.
      const name = '@opentelemetry/api';
      const loaded = (await import(name)) as OtelApi & { default?: OtelApi };
      return new OpenTelemetryTracing(loaded.trace ? loaded : loaded.default!);
    } catch {
      return null;
    }
  }

  async traceEnqueue<R>(types: readonly string[], insert: (contexts: Array<string | null>) => Promise<R>, ids: (result: R) => string[]): Promise<R> {
    const { api } = this;
    const parent = api.context.active();
    const spans = new Map<string, { span: Span; carrier: string | null }>();
    for (const type of types) {
      if (spans.has(type)) continue;
      const span = this.tracer.startSpan(
        `send ${type}`,
        { kind: api.SpanKind.PRODUCER, attributes: { 'messaging.system': SYSTEM, 'messaging.operation.type': 'send', 'messaging.destination.name': type } },
        parent,
      );
      const carrier: Record<string, string> = {};
      api.propagation.inject(api.trace.setSpan(parent, span), carrier);
      spans.set(type, { span, carrier: carrier.traceparent ? JSON.stringify(carrier) : null });
    }
    // The insert runs in the (first) send span, so the database client's own spans nest under it.
    const first = spans.values().next().value!;
    try {
      const result = await api.context.with(api.trace.setSpan(parent, first.span), () => insert(types.map((type) => spans.get(type)!.carrier)));
      const jobIds = ids(result);
      types.forEach((type, i) => {
        if (jobIds[i] !== undefined && types.indexOf(type) === i) spans.get(type)!.span.setAttribute('messaging.message.id', jobIds[i]);
      });
      return result;
    } catch (error) {
      for (const { span } of spans.values()) this.fail(span, (error as Error)?.message ?? String(error), (error as Error)?.name);
      throw error;
    } finally {
      for (const { span } of spans.values()) span.end();
    }
  }

  traceAttempt<O>(
    job: { id: string; type: string; attempt: number; traceContext?: string | null },
    run: () => O | PromiseLike<O>,
    failure: (outcome: O) => string | null,
  ): O | PromiseLike<O> {
    const { api } = this;
    const parent = job.traceContext ? api.propagation.extract(api.ROOT_CONTEXT, parseCarrier(job.traceContext)) : api.context.active();
    const span = this.tracer.startSpan(
      `process ${job.type}`,
      {
        kind: api.SpanKind.CONSUMER,
        attributes: {
          'messaging.system': SYSTEM,
          'messaging.operation.type': 'process',
          'messaging.destination.name': job.type,
          'messaging.message.id': job.id,
          'auto_job_queue.attempt': job.attempt,
        },
      },
      parent,
    );
    const settle = (outcome: O): O => {
      const error = failure(outcome);
      if (error !== null) this.fail(span, error);
      span.end();
      return outcome;
    };
    let outcome: O | PromiseLike<O>;
    try {
      outcome = api.context.with(api.trace.setSpan(parent, span), run);
    } catch (error) {
      this.fail(span, (error as Error)?.message ?? String(error));
      span.end();
      throw error;
    }
    if (!isThenable(outcome)) return settle(outcome);
    return outcome.then(settle, (error: unknown) => {
      this.fail(span, (error as Error)?.message ?? String(error));
      span.end();
      throw error;
    });
  }

  private fail(span: Span, message: string, name = 'JobFailed'): void {
    span.recordException({ name, message });
    span.setStatus({ code: this.api.SpanStatusCode.ERROR, message });
  }
}

function parseCarrier(text: string): Record<string, string> {
  try {
    const carrier = JSON.parse(text) as unknown;
    return carrier && typeof carrier === 'object' ? (carrier as Record<string, string>) : {};
  } catch {
    return {};
  }
}
