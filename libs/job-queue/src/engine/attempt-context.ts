import type { EntityManager } from 'typeorm';
import type { EngineLogger } from '../base/logger.js';
import type { JobDependency, JobProgress } from '../base/job-context.js';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import type { ClaimedJob, JobStore } from '../persistence/job.store.js';
import { JobLogWriter } from './job-log-writer.js';
import { ProgressReporter } from './progress-reporter.js';
import type { EnqueueOptions, EnqueueResult } from '../base/enqueue-options.js';
import type { EnqueuedPayload } from '../base/job-types.js';
import type { AttemptControl } from './attempt-control.js';
import type { EffectLedger } from './effect-ledger.js';
import type { JobContext } from '../base/job-context.js';

/** Enqueues on behalf of a running handler (the producer, with its validation and backpressure). */
export type HandlerEnqueue = (type: string, payload: unknown, options?: EnqueueOptions) => Promise<EnqueueResult>;

/**
 * The JobContext a handler receives for one attempt. A class rather than an object literal: one
 * is made per job, and its methods and the lazy `signal` live on the prototype.
 */
export class AttemptContext implements JobContext {
  readonly id: string;
  readonly type: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  readonly manager?: EntityManager;
  // ES private: a handler that logs its context sees only the job's fields.
  readonly #job: ClaimedJob;
  readonly #control: AttemptControl;
  readonly #ledger: EffectLedger;
  readonly #enqueue: HandlerEnqueue;
  readonly #writes: AttemptWrites;
  #progress: ProgressReporter | null = null;
  #log: JobLogWriter | null = null;

  constructor(
    job: ClaimedJob,
    control: AttemptControl,
    ledger: EffectLedger,
    enqueue: HandlerEnqueue,
    manager: EntityManager | null,
    writes: AttemptWrites,
  ) {
    this.#job = job;
    this.#writes = writes;
    this.#control = control;
    this.#ledger = ledger;
    this.#enqueue = enqueue;
    this.id = job.id;
    this.type = job.type;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.idempotencyKey = job.idempotencyKey;
    if (manager) this.manager = manager;
  }

  /** Made on first read: most handlers never look at it. */
  get signal(): AbortSignal {
    return this.#control.signal;
  }

  once<T>(key: string, fn: () => T | Promise<T>): Promise<T> {
    return this.#ledger.once(this.#job, key, fn);
  }

  /** Made on first use: most handlers never report progress. */
  progress(value: JobProgress): Promise<void> {
    const json = progressJson(value);
    this.#progress ??= new ProgressReporter(this.#writes.store, this.#job, this.#writes.logger);
    return this.#progress.report(json);
  }

  /** Made on first use, like progress; never throws into the handler. */
  log(...args: unknown[]): void {
    try {
      this.#log ??= new JobLogWriter(this.#writes.store, this.#job, this.#writes.workerId, this.#writes.logger);
      this.#log.log(args);
    } catch (error) {
      this.#writes.logger?.warn(`job.log failed for job ${this.#job.id}: ${(error as Error)?.message ?? error}`);
    }
  }

  dependencies<R = unknown>(): Promise<Array<JobDependency<R>>> {
    return this.#writes.store.listDependencies(this.#job.id) as Promise<Array<JobDependency<R>>>;
  }

  /** In a transactional handler, the follow-up joins the handler's transaction unless told otherwise. */
  enqueue<P = never, T extends string = string>(type: T, payload: EnqueuedPayload<P, T>, options?: EnqueueOptions): Promise<EnqueueResult> {
    return this.#enqueue(type, payload, this.manager && !options?.manager ? { ...options, manager: this.manager } : options);
  }
}

/** Where an attempt's progress and log lines go, and the worker that writes them. */
export interface AttemptWrites {
  readonly store: Pick<JobStore, 'reportProgress' | 'appendJobLogs' | 'listDependencies'>;
  readonly workerId: string;
  readonly logger?: EngineLogger;
}

/** Progress JSON at most this long: the dashboard shows it, it is not a result. */
const MAX_PROGRESS_JSON = 16_384;

/** A percentage or a JSON object, as JSON text; anything else is the handler's mistake, thrown at the call. */
function progressJson(value: unknown): string {
  const spared = 'No progress was stored.';
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0 || value > 100) throw new InvalidJobError('progress', `must be a number from 0 to 100 (got ${value})`, spared);
    return JSON.stringify(value);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidJobError('progress', 'must be a number from 0 to 100 or a JSON object', spared);
  }
  let json: string;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new InvalidJobError('progress', `could not be serialised to JSON: ${(error as Error).message}`, spared);
  }
  if (json.length > MAX_PROGRESS_JSON) throw new InvalidJobError('progress', `is ${json.length} characters of JSON, more than ${MAX_PROGRESS_JSON}`, spared);
  return json;
}
