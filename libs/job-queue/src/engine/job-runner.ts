import type { RegisteredHandler } from '../discovery/registered-handler.js';
import { JobTimeoutError } from '../errors/job-timeout.error.js';
import { PermanentJobError } from '../errors/permanent-job.error.js';
import type { ClaimedJob, JobStore, JobTransaction } from '../persistence/job.store.js';
import type { EnqueueOptions, EnqueueResult } from '../producer/enqueue-options.js';
import type { AttemptControl } from './attempt-control.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import { describeError } from './describe-error.js';
import type { EffectLedger } from './effect-ledger.js';
import type { JobContext } from './job-context.js';
import { jsonHasNul } from '../persistence/json-text.js';

/** Enqueues on behalf of a running handler (the producer, with its validation and backpressure). */
export type HandlerEnqueue = (type: string, payload: unknown, options?: EnqueueOptions) => Promise<EnqueueResult>;

type Race =
  | { kind: 'returned'; value: unknown }
  | { kind: 'threw'; error: unknown }
  | { kind: 'timed-out' }
  | { kind: 'interrupted' };

/**
 * Runs one attempt: validates the payload, calls the handler (inside a transaction for
 * transactional handlers), and turns whatever happens (a value, a throw of anything, a timeout,
 * an interruption) into an outcome. It never throws, and it stops waiting for a handler that
 * ignores its signal.
 */
export class JobRunner {
  constructor(
    private readonly store: JobStore,
    private readonly ledger: EffectLedger,
    private readonly enqueue: HandlerEnqueue,
  ) {}

  async run(job: ClaimedJob, handler: RegisteredHandler, control: AttemptControl): Promise<AttemptOutcome> {
    let payload: unknown;
    try {
      payload = handler.schema ? await handler.schema.parse(job.payload) : job.payload;
    } catch (error) {
      return { kind: 'failed', error: `invalid payload: ${describeError(error)}`, permanent: true };
    }
    if (!handler.transactional) {
      const race = await this.invoke(job, handler, payload, control, null);
      return race.kind === 'returned' ? serialiseResult(race.value) : this.toFailure(race, handler, control);
    }

    let tx: JobTransaction;
    try {
      tx = await this.store.beginJobTransaction();
    } catch (error) {
      return { kind: 'failed', error: `could not open the job's transaction: ${describeError(error)}`, permanent: false };
    }
    const race = await this.invoke(job, handler, payload, control, tx);
    if (race.kind !== 'returned') {
      await tx.rollback().catch(() => undefined);
      return this.toFailure(race, handler, control);
    }
    const serialised = serialiseResult(race.value);
    if (serialised.kind !== 'succeeded') {
      await tx.rollback().catch(() => undefined);
      return serialised;
    }
    try {
      // Row-locks the job only now, at the end, and only if this worker still holds the lease.
      if (!(await tx.complete(job, serialised.resultJson))) {
        await tx.rollback();
        return { kind: 'interrupted', reason: 'lease-lost' };
      }
      await tx.commit();
      return { kind: 'committed' };
    } catch (error) {
      await tx.rollback().catch(() => undefined);
      return { kind: 'failed', error: `committing the job's transaction failed: ${describeError(error)}`, permanent: false };
    }
  }

  private async invoke(
    job: ClaimedJob,
    handler: RegisteredHandler,
    payload: unknown,
    control: AttemptControl,
    tx: JobTransaction | null,
  ): Promise<Race> {
    const ledger = this.ledger;
    const enqueue = this.enqueue;
    const context: JobContext = {
      id: job.id,
      type: job.type,
      attempt: job.attempt,
      maxAttempts: job.maxAttempts,
      idempotencyKey: job.idempotencyKey,
      signal: control.signal,
      ...(tx ? { manager: tx.manager } : {}),
      once: (key, fn) => ledger.once(job, key, fn),
      enqueue: (type, childPayload, options) =>
        enqueue(type, childPayload, tx && !options?.manager ? { ...options, manager: tx.manager } : options),
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
    return control.interruption ? { kind: 'interrupted' } : first;
  }

  private toFailure(race: Exclude<Race, { kind: 'returned' }>, handler: RegisteredHandler, control: AttemptControl): AttemptOutcome {
    switch (race.kind) {
      case 'threw':
        return {
          kind: 'failed',
          error: describeError(race.error),
          permanent:
            race.error instanceof PermanentJobError || (race.error as { code?: unknown })?.code === 'JOB_PERMANENT_FAILURE',
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
  if (jsonHasNul(json)) {
    return { kind: 'failed', error: 'handler result contains a NUL character, which PostgreSQL jsonb cannot store', permanent: false };
  }
  return { kind: 'succeeded', resultJson: json };
}
