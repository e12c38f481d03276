import type { EntityManager } from 'typeorm';
import type { ClaimedJob } from '../persistence/job.store.js';
import type { EnqueueOptions, EnqueueResult } from '../base/enqueue-options.js';
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

  constructor(job: ClaimedJob, control: AttemptControl, ledger: EffectLedger, enqueue: HandlerEnqueue, manager: EntityManager | null) {
    this.#job = job;
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

  /** In a transactional handler, the follow-up joins the handler's transaction unless told otherwise. */
  enqueue<P = unknown>(type: string, payload: P, options?: EnqueueOptions): Promise<EnqueueResult> {
    return this.#enqueue(type, payload, this.manager && !options?.manager ? { ...options, manager: this.manager } : options);
  }
}
