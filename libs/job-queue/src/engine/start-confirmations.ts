import type { Lease } from '../persistence/job.store.js';

/**
 * A started prefetched attempt is charged once it has run at least this long, and at most twice
 * this long (plus one statement): most short jobs finish first, and their completion charges them.
 */
export const CONFIRM_AFTER_MS = 5;

/**
 * Prefetched attempts (claimed into the buffer, their attempt not charged by the claim) that have
 * started, until their start is written. A start is due once it has run CONFIRM_AFTER_MS: the
 * completion batcher then writes it with its next statement, or alone if nothing else is being
 * written. An attempt whose handler returns first is forgotten (`ended`): its outcome statement
 * charges it. Nothing here touches the database, and nothing is written per start: the start of a
 * job costs two Set operations, and a few ms later at most one row in a batched statement. See
 * docs/decisions/0090-attempts-charged-at-start.md.
 */
export class StartConfirmations {
  /** Started within the current tick: due after the next one. */
  private fresh = new Set<Lease>();
  /** Started within the previous tick: due at the next one. */
  private older = new Set<Lease>();
  private readonly due = new Set<Lease>();
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    /** Starts have come due: write them (called from a timer). */
    private readonly onDue: () => void,
    private readonly delayMs = CONFIRM_AFTER_MS,
  ) {}

  get hasDue(): boolean {
    return this.due.size > 0;
  }

  /** Starts not yet written, due or not. */
  get pending(): number {
    return this.fresh.size + this.older.size + this.due.size;
  }

  /** A prefetched attempt starts: its attempt is charged a few ms from now unless it ends first. */
  started(lease: Lease): void {
    this.fresh.add(lease);
    this.arm();
  }

  /** Its handler returned: whatever its outcome, the statement writing it charges the attempt. */
  ended(lease: Lease): void {
    if (!this.fresh.delete(lease) && !this.older.delete(lease)) this.due.delete(lease);
  }

  /**
   * The due starts, to write now; those of jobs in `excluded` (completed in the same statement by
   * another attempt of theirs) stay due for the next statement, as a row is not updated twice in one.
   */
  take(excluded: ReadonlySet<string>): Lease[] {
    const taken: Lease[] = [];
    for (const lease of this.due) {
      if (excluded.has(lease.id)) continue;
      taken.push(lease);
      this.due.delete(lease);
    }
    return taken;
  }

  private arm(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => this.tick(), this.delayMs);
    this.timer.unref?.();
  }

  private tick(): void {
    this.timer = null;
    for (const lease of this.older) this.due.add(lease);
    this.older = this.fresh;
    this.fresh = new Set();
    if (this.older.size > 0) this.arm();
    if (this.due.size > 0) this.onDue();
  }
}
