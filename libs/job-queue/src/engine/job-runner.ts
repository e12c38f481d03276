import type { RegisteredHandler } from '../discovery/registered-handler.js';
import { JobTimeoutError } from '../errors/job-timeout.error.js';
import { PermanentJobError } from '../errors/permanent-job.error.js';
import type { ClaimedJob } from '../persistence/job.store.js';
import type { AttemptControl } from './attempt-control.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import { describeError } from './describe-error.js';
import type { JobContext } from './job-context.js';

type Race =
  | { kind: 'returned'; value: unknown }
  | { kind: 'threw'; error: unknown }
  | { kind: 'timed-out' }
  | { kind: 'interrupted' };

/**
 * Runs one attempt: validates the payload, calls the handler, and turns whatever happens (a
 * value, a throw of anything, a timeout, an interruption) into an outcome. It never throws, and
 * it stops waiting for a handler that ignores its signal.
 */
export class JobRunner {
  async run(job: ClaimedJob, handler: RegisteredHandler, control: AttemptControl): Promise<AttemptOutcome> {
    let payload: unknown;
    try {
      payload = handler.schema ? await handler.schema.parse(job.payload) : job.payload;
    } catch (error) {
      return { kind: 'failed', error: `invalid payload: ${describeError(error)}`, permanent: true };
    }
    const context: JobContext = {
      id: job.id,
      type: job.type,
      attempt: job.attempt,
      maxAttempts: job.maxAttempts,
      idempotencyKey: job.idempotencyKey,
      signal: control.signal,
    };
    let timer: NodeJS.Timeout | undefined;
    const racers: Array<Promise<Race>> = [
      Promise.resolve()
        .then(() => handler.invoke(payload, context))
        .then(
          (value): Race => ({ kind: 'returned', value }),
          (error): Race => ({ kind: 'threw', error }),
        ),
      control.interrupted.then((): Race => ({ kind: 'interrupted' })),
    ];
    if (handler.timeoutMs !== null) {
      racers.push(new Promise<Race>((resolve) => (timer = setTimeout(() => resolve({ kind: 'timed-out' }), handler.timeoutMs!))));
    }
    const first = await Promise.race(racers);
    clearTimeout(timer);
    // An interruption that raced a late result still wins: that attempt is over.
    if (control.interruption) return { kind: 'interrupted', reason: control.interruption };
    switch (first.kind) {
      case 'returned':
        return serialiseResult(first.value);
      case 'threw':
        return {
          kind: 'failed',
          error: describeError(first.error),
          permanent: first.error instanceof PermanentJobError || (first.error as { code?: unknown })?.code === 'JOB_PERMANENT_FAILURE',
        };
      case 'timed-out': {
        const error = new JobTimeoutError(handler.timeoutMs!);
        control.abort(error);
        return { kind: 'failed', error: error.message, permanent: false };
      }
      case 'interrupted':
        return { kind: 'interrupted', reason: control.interruption ?? 'lease-lost' };
    }
  }
}

function serialiseResult(value: unknown): AttemptOutcome {
  let json: string | undefined;
  try {
    json = JSON.stringify(value ?? null);
  } catch (error) {
    return { kind: 'failed', error: `handler result is not JSON-serialisable: ${describeError(error)}`, permanent: false };
  }
  if (json === undefined) json = 'null';
  if (json.includes('\\u0000')) {
    return { kind: 'failed', error: 'handler result contains a NUL character, which PostgreSQL jsonb cannot store', permanent: false };
  }
  return { kind: 'succeeded', resultJson: json };
}
