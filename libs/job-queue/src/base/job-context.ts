import type { EntityManager } from 'typeorm';
import type { EnqueueOptions, EnqueueResult } from './enqueue-options.js';

/** What a handler learns about the job it runs, and what it can do through it. */
export interface JobContext {
  readonly id: string;
  readonly type: string;
  /** 1 on the first run. */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  /** Aborted on timeout, on lease loss, on cancel, and when a shutdown drain times out. */
  readonly signal: AbortSignal;
  /**
   * Transactional handlers only: the transaction that also marks this job completed. Its writes
   * commit once, and only if this worker still holds the job's lease.
   */
  readonly manager?: EntityManager;
  /**
   * Runs `fn` unless an earlier attempt of this job recorded `key` as done; records it with
   * `fn`'s JSON result before returning. Later attempts get the stored result instead.
   */
  once<T>(key: string, fn: () => T | Promise<T>): Promise<T>;
  /** Enqueues a follow-up job; in a transactional handler, inside the same transaction. */
  enqueue<P = unknown>(type: string, payload: P, options?: EnqueueOptions): Promise<EnqueueResult>;
}
