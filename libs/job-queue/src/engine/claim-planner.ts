import type { ClaimRequest } from '../persistence/job.store.js';

export interface TypeCapacity {
  type: string;
  concurrency: number;
  maxAttempts: number;
}

/**
 * Turns free slots into a claim request: the global free capacity, and each type's own free
 * capacity under its per-type limit. Types with no free slot are not asked for at all.
 */
export class ClaimPlanner {
  constructor(
    private readonly concurrency: number,
    private readonly types: readonly TypeCapacity[],
    private readonly workerId: string,
    private readonly leaseMs: number,
  ) {}

  plan(inFlightTotal: number, inFlightByType: ReadonlyMap<string, number>): ClaimRequest | null {
    const free = this.concurrency - inFlightTotal;
    if (free <= 0) return null;
    const perType = this.types
      .map(({ type, concurrency, maxAttempts }) => ({
        type,
        maxAttempts,
        limit: Math.min(free, concurrency - (inFlightByType.get(type) ?? 0)),
      }))
      .filter((entry) => entry.limit > 0);
    if (perType.length === 0) return null;
    return { workerId: this.workerId, leaseMs: this.leaseMs, limit: free, perType };
  }
}
