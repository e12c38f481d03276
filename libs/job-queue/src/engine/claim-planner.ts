import type { RegisteredHandler } from '../base/registered-handler.js';
import type { ClaimRequest, TypeClaim } from '../persistence/job.store.js';
import type { PausedTypes } from './paused-types.js';

export interface ClaimSettings {
  readonly workerId: string;
  readonly leaseMs: number;
  /** Attempts running at once in this worker, all types together. */
  readonly concurrency: number;
  /** Transactional attempts at once, at most (each holds a pooled connection); Infinity when none is transactional. */
  readonly transactionalCapacity: number;
  /** Claimed jobs held beyond the running ones, at most (0: claim only for free slots). */
  readonly prefetch: number;
}

export interface TypeCapacity {
  type: string;
  concurrency: number;
  maxAttempts: number;
  /** Transactional handlers hold a pooled connection for their whole run. */
  transactional?: boolean;
  rateLimit?: { max: number; perMs: number } | null;
  globalConcurrency?: number | null;
  /** Set: claimed in turn across groups, at most this many of one group running (ClaimQuery.grouped). */
  groupConcurrency?: number | null;
  circuitBreaker?: boolean;
}

/** What the worker holds right now. */
export interface WorkerLoad {
  running: number;
  runningByType: ReadonlyMap<string, number>;
  runningTransactional: number;
  /** Claimed and leased, not started: waiting in the local buffer, or being handed back. */
  buffered: number;
  bufferedByType: ReadonlyMap<string, number>;
  /** How many claimed jobs to keep waiting now (at most the configured prefetch). */
  prefetch?: number;
  /** Each type's share of the buffer now, at most (PrefetchSizer); absent: its share of `prefetch` alone. */
  prefetchByType?: ReadonlyMap<string, number>;
}

/** What the planner needs of a handler. */
export function typeCapacity(handler: RegisteredHandler): TypeCapacity {
  return {
    type: handler.type,
    concurrency: handler.concurrency,
    maxAttempts: handler.maxAttempts,
    transactional: handler.transactional,
    rateLimit: handler.rateLimit,
    globalConcurrency: handler.globalConcurrency,
    groupConcurrency: handler.groupConcurrency,
    circuitBreaker: handler.circuitBreaker !== null,
  };
}

/**
 * Rate windows are checked a quarter wider (at most a second more): a handler starts a little
 * after its claim, and those delays must not crowd more than `max` starts into any `perMs`.
 * See docs/decisions/0012-rate-limit-window.md.
 */
export function rateWindowMs(perMs: number): number {
  return perMs + Math.min(1_000, Math.ceil(perMs / 4));
}

/**
 * Turns free capacity into a claim request: the free slots, each type's under its own limit and,
 * for transactional types together, under the spare connections; plus the buffer's room, shared
 * by the types in proportion to their concurrency and capped by each type's own share
 * (prefetchByType), so a slow type keeps no jobs waiting here that another worker could start.
 */
export class ClaimPlanner {
  private rotation = 0;
  private readonly concurrency: number;
  private readonly maxPrefetch: number;
  private readonly flowControl: boolean;
  private readonly transactionalTypes: readonly string[];

  constructor(
    private readonly settings: ClaimSettings,
    private readonly types: readonly TypeCapacity[],
    /** Types paused by an operator: claimed by no worker. */
    private readonly paused: Pick<PausedTypes, 'has'> = { has: () => false },
  ) {
    this.concurrency = settings.concurrency;
    this.maxPrefetch = settings.prefetch;
    this.flowControl = types.some((t) => t.rateLimit || t.globalConcurrency || t.circuitBreaker || t.groupConcurrency);
    this.transactionalTypes = types.filter((t) => t.transactional).map((t) => t.type);
  }

  plan(load: WorkerLoad): ClaimRequest | null {
    const prefetch = Math.min(load.prefetch ?? this.maxPrefetch, this.maxPrefetch);
    // The worker starts buffered jobs as soon as slots free, so with a slot free, what is left in
    // the buffer is held back (by its type's limit, or for want of a connection): it takes up
    // buffer room, never a free slot.
    const free = this.concurrency - load.running + Math.max(0, prefetch - load.buffered);
    if (free <= 0) return null;
    // Transactional jobs held (running or buffered) stay within the spare connections plus the
    // prefetch: beyond that, a buffered one would wait for a connection, not for a slot.
    let bufferedTransactional = 0;
    for (const type of this.transactionalTypes) bufferedTransactional += load.bufferedByType.get(type) ?? 0;
    let transactionalFree = this.settings.transactionalCapacity - load.runningTransactional - bufferedTransactional + prefetch;
    // Rotate which transactional type gets the shared connections first, so none starves.
    const offset = this.types.length > 0 ? this.rotation++ % this.types.length : 0;
    const ordered = [...this.types.slice(offset), ...this.types.slice(0, offset)];
    const perType: TypeClaim[] = [];
    for (const { type, concurrency, maxAttempts, transactional, rateLimit, globalConcurrency, groupConcurrency } of ordered) {
      if (this.paused.has(type)) continue;
      const share = Math.min(Math.ceil((prefetch * concurrency) / this.concurrency), load.prefetchByType?.get(type) ?? Infinity);
      let limit = Math.min(
        free,
        concurrency + share - (load.runningByType.get(type) ?? 0) - (load.bufferedByType.get(type) ?? 0),
      );
      if (transactional) {
        limit = Math.min(limit, transactionalFree);
        transactionalFree -= Math.max(limit, 0);
      }
      if (limit > 0) {
        perType.push({
          type,
          limit,
          maxAttempts,
          rateMax: rateLimit?.max ?? null,
          rateWindowMs: rateLimit ? rateWindowMs(rateLimit.perMs) : null,
          globalMax: globalConcurrency ?? null,
          ...(groupConcurrency ? { groupMax: groupConcurrency } : {}),
        });
      }
    }
    if (perType.length === 0) return null;
    // The free slots take the claim's first jobs at once: the claim charges their attempts.
    const startNow = Math.max(0, this.concurrency - load.running);
    return { workerId: this.settings.workerId, leaseMs: this.settings.leaseMs, limit: free, perType, flowControl: this.flowControl, startNow };
  }
}
