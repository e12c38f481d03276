import type { RegisteredHandler } from '../base/registered-handler.js';
import { JobTimeoutError } from '../errors/job-timeout.error.js';
import { PermanentJobError } from '../errors/permanent-job.error.js';
import type { ClaimedJob, JobStore, JobTransaction } from '../persistence/job.store.js';
import { AttemptContext, type AttemptWrites, type HandlerEnqueue } from './attempt-context.js';
import type { AttemptControl } from './attempt-control.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import { describeError } from './describe-error.js';
import type { EffectLedger } from './effect-ledger.js';
import { jsonbRefusal } from '../persistence/json-text.js';
import { isThenable } from '../base/thenable.js';

export type { HandlerEnqueue } from './attempt-context.js';

type Race =
  | { kind: 'returned'; value: unknown }
  | { kind: 'threw'; error: unknown }
  | { kind: 'timed-out' }
  | { kind: 'interrupted' };

const INTERRUPTED: Race = { kind: 'interrupted' };
const TIMED_OUT: Race = { kind: 'timed-out' };

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
    private readonly writes: AttemptWrites = { store, workerId: '' },
  ) {}

  /**
   * The outcome of one attempt. It comes back synchronously when nothing in the attempt was
   * asynchronous (a handler that returned a plain value or threw, no async schema, not
   * transactional): a worker then records it without a promise turn per layer.
   */
  run(job: ClaimedJob, handler: RegisteredHandler, control: AttemptControl): AttemptOutcome | Promise<AttemptOutcome> {
    let parsed: unknown;
    try {
      parsed = handler.schema ? handler.schema.parse(job.payload) : job.payload;
    } catch (error) {
      return invalidPayload(error);
    }
    if (handler.schema && isThenable(parsed)) return this.runAfterAsyncParse(job, handler, parsed, control);
    return this.runParsed(job, handler, parsed, control);
  }

  /**
   * An async schema races the interruption and the timeout as a handler does (each with its own
   * timeoutMs): one that never settles must not hold the worker's slot, nor a drain, forever.
   */
  private async runAfterAsyncParse(
    job: ClaimedJob,
    handler: RegisteredHandler,
    parsing: PromiseLike<unknown>,
    control: AttemptControl,
  ): Promise<AttemptOutcome> {
    const race = await this.race(parsing, handler, control);
    if (race.kind === 'returned') return this.runParsed(job, handler, race.value, control);
    return race.kind === 'threw' ? invalidPayload(race.error) : this.toFailure(race, handler, control);
  }

  private runParsed(
    job: ClaimedJob,
    handler: RegisteredHandler,
    payload: unknown,
    control: AttemptControl,
  ): AttemptOutcome | Promise<AttemptOutcome> {
    if (handler.transactional) return this.runInTransaction(job, handler, payload, control);
    const race = this.invoke(job, handler, payload, control, null);
    if (isThenable(race)) return race.then((settled) => this.outcomeOf(settled, handler, control));
    return this.outcomeOf(race, handler, control);
  }

  private outcomeOf(race: Race, handler: RegisteredHandler, control: AttemptControl): AttemptOutcome {
    return race.kind === 'returned' ? serialiseResult(race.value) : this.toFailure(race, handler, control);
  }

  private async runInTransaction(
    job: ClaimedJob,
    handler: RegisteredHandler,
    payload: unknown,
    control: AttemptControl,
  ): Promise<AttemptOutcome> {
    let tx: JobTransaction;
    try {
      tx = await this.store.beginJobTransaction();
    } catch (error) {
      return { kind: 'failed', error: `could not open the job's transaction: ${describeError(error)}`, permanent: false };
    }
    // Interrupted while the transaction was being opened: the handler must not run.
    if (control.interruption) {
      await tx.rollback().catch(() => undefined);
      return { kind: 'interrupted', reason: control.interruption };
    }
    const race = await this.invoke(job, handler, payload, control, tx);
    if (race.kind === 'threw') {
      await tx.rollback().catch(() => undefined);
      return this.toFailure(race, handler, control);
    }
    if (race.kind !== 'returned') {
      // Timed out or interrupted: the handler may still be running, and writing.
      tx.abandon();
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

  /** The handler's call; a promise only when the handler returned one. */
  private invoke(
    job: ClaimedJob,
    handler: RegisteredHandler,
    payload: unknown,
    control: AttemptControl,
    tx: JobTransaction | null,
  ): Race | Promise<Race> {
    const context = new AttemptContext(job, control, this.ledger, this.enqueue, tx?.manager ?? null, this.writes);
    let returned: unknown;
    try {
      returned = handler.invoke(payload, context);
    } catch (error) {
      return control.interruption ? INTERRUPTED : { kind: 'threw', error };
    }
    // A handler that finished without a promise needs no race (nor the allocations of one).
    if (!isThenable(returned)) return control.interruption ? INTERRUPTED : { kind: 'returned', value: returned };
    return this.race(returned, handler, control);
  }

  /** A race of the handler's promise, the interruption and the timeout; the first to settle wins. */
  private async race(pending: PromiseLike<unknown>, handler: RegisteredHandler, control: AttemptControl): Promise<Race> {
    const first = await new Promise<Race>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = (race: Race) => {
        clearTimeout(timer);
        resolve(race);
      };
      control.onInterrupt(() => settle(INTERRUPTED));
      if (handler.timeoutMs !== null) timer = setTimeout(() => settle(TIMED_OUT), handler.timeoutMs);
      pending.then(
        (value) => settle({ kind: 'returned', value }),
        (error: unknown) => settle({ kind: 'threw', error }),
      );
    });
    // An interruption that raced a late result still wins: that attempt is over.
    return control.interruption ? INTERRUPTED : first;
  }

  private toFailure(race: Exclude<Race, { kind: 'returned' }>, handler: RegisteredHandler, control: AttemptControl): AttemptOutcome {
    switch (race.kind) {
      case 'threw':
        return {
          kind: 'failed',
          error: describeError(race.error),
          permanent: isPermanent(race.error),
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

/** PermanentJobError, also from another copy of the package (by its code). False for a value that throws when read. */
function isPermanent(error: unknown): boolean {
  try {
    return error instanceof PermanentJobError || (error as { code?: unknown })?.code === 'JOB_PERMANENT_FAILURE';
  } catch {
    return false;
  }
}

function invalidPayload(error: unknown): AttemptOutcome {
  return { kind: 'failed', error: `invalid payload: ${describeError(error)}`, permanent: true };
}

/** The outcome of every handler that returns nothing: one shared object, not one per job. */
const SUCCEEDED_WITHOUT_RESULT: AttemptOutcome = Object.freeze({ kind: 'succeeded', resultJson: 'null' });

function serialiseResult(value: unknown): AttemptOutcome {
  if (value === undefined || value === null) return SUCCEEDED_WITHOUT_RESULT;
  let json: string | undefined;
  try {
    json = JSON.stringify(value ?? null);
  } catch (error) {
    return { kind: 'failed', error: `handler result is not JSON-serialisable: ${describeError(error)}`, permanent: false };
  }
  if (json === undefined) json = 'null';
  const refusal = jsonbRefusal(json);
  if (refusal) return { kind: 'failed', error: `handler result contains ${refusal}`, permanent: false };
  return { kind: 'succeeded', resultJson: json };
}
