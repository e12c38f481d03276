import type { EntityManager } from 'typeorm';

export interface EnqueueOptions {
  /** Same type and key as an existing row: that row's id is returned, nothing is added. */
  idempotencyKey?: string;
  /**
   * With `idempotencyKey`: the key dedupes only this long after the first job with it was
   * enqueued; a later enqueue with the key makes a new job.
   */
  uniqueForMs?: number;
  /**
   * While a job of this type and key waits (not started), an enqueue replaces its payload and moves
   * its start to `delayMs` from now (`debounced: true`); otherwise it enqueues a new job due then.
   */
  debounce?: { key: string; delayMs: number };
  /**
   * Ids of existing jobs this one waits for: it is `blocked` until every one has completed, then
   * `pending`, in the transaction that completes the last one. Build a workflow in one
   * transaction (`manager`) so it exists whole or not at all. At most 10,000 ids.
   */
  dependsOn?: string[];
  /**
   * When a job it depends on is dead-lettered, cancelled or deleted: `'cancel'` this one too (its
   * `last_error` names that job), or `'run'` it anyway once the others are done. @default 'cancel'
   */
  onDependencyFailure?: 'cancel' | 'run';
  /** Run no earlier than this many milliseconds from now (database clock). */
  delayMs?: number;
  /** Run no earlier than this time. */
  runAt?: Date;
  /** Higher runs first. @default 0 */
  priority?: number;
  /**
   * Jobs with the same key run one at a time, in enqueue order, across all workers; a job waiting
   * for a retry holds back the later ones of its key. Different keys run in parallel.
   */
  orderingKey?: string;
  /**
   * The tenant, customer or account it belongs to. A type whose handler sets `groupConcurrency`
   * starts its jobs in turn across groups (one group's backlog cannot hold back another's jobs)
   * and runs at most that many of one group at once, across all workers. Elsewhere it is
   * recorded and shown, and changes nothing.
   */
  group?: string;
  /** Attempts before dead-lettering, for this job only. */
  maxAttempts?: number;
  /** Enqueue inside the caller's transaction: the job exists only if it commits. */
  manager?: EntityManager;
}

export interface EnqueueAndWaitOptions extends Omit<EnqueueOptions, 'manager'> {
  /** How long to wait for the outcome before rejecting with JobWaitTimeoutError. */
  timeoutMs: number;
}

export interface EnqueueResult {
  id: string;
  /** true when an earlier job with the same type and idempotency key was returned instead. */
  deduplicated: boolean;
  /** true when a waiting job of the same debounce key took this payload instead. */
  debounced?: boolean;
}

export interface EnqueueManyItem<P = unknown> {
  type: string;
  payload: P;
  options?: EnqueueOptions;
}
