import type { ClaimRequest, TypeClaim } from '../persistence/job.store.js';

export interface TypeCapacity {
  type: string;
  concurrency: number;
  maxAttempts: number;
  /** Transactional handlers hold a pooled connection for their whole run. */
  transactional?: boolean;
  rateLimit?: { max: number; perMs: number } | null;
  globalConcurrency?: number | null;
}

/**
 * Rate windows are checked a little wider than configured, so handler starts (a few ms after
 * their claim, in another process) never crowd more than `max` into any `perMs` window.
 */
export function rateWindowMs(perMs: number): number {
  return perMs + Math.min(100, Math.ceil(perMs / 10));
}

/**
 * Turns free slots into a claim request: the global free capacity, each type's own free capacity
 * under its per-type limit, and, for transactional types together, the connections the pool can
 * spare. Types with no free slot are not asked for at all.
 */
export class ClaimPlanner {
  private rotation = 0;

  constructor(
    private readonly concurrency: number,
    private readonly types: readonly TypeCapacity[],
    private readonly workerId: string,
    private readonly leaseMs: number,
    /** Transactional jobs in flight at once, at most; Infinity when no limit applies. */
    private readonly transactionalCapacity: number = Infinity,
  ) {}

  plan(inFlightTotal: number, inFlightByType: ReadonlyMap<string, number>, inFlightTransactional = 0): ClaimRequest | null {
    const free = this.concurrency - inFlightTotal;
    if (free <= 0) return null;
    let transactionalFree = this.transactionalCapacity - inFlightTransactional;
    // Rotate which transactional type gets the shared connections first, so none starves.
    const offset = this.types.length > 0 ? this.rotation++ % this.types.length : 0;
    const ordered = [...this.types.slice(offset), ...this.types.slice(0, offset)];
    const perType: TypeClaim[] = [];
    for (const { type, concurrency, maxAttempts, transactional, rateLimit, globalConcurrency } of ordered) {
      let limit = Math.min(free, concurrency - (inFlightByType.get(type) ?? 0));
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
        });
      }
    }
    if (perType.length === 0) return null;
    return { workerId: this.workerId, leaseMs: this.leaseMs, limit: free, perType };
  }
}
