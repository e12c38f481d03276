/**
 * From this size (pages) on, a generic plan of the one-type claim has the shape every larger table
 * gets: the claimed rows updated by tuple id (a TID scan's cost, about 40, is below a sequential
 * scan of 64 pages at any row width) and the ordering-key check on its index. On a smaller table
 * the planner may choose sequential scans for both, which would be ruinous once the table grows.
 */
const CACHED_PLAN_MIN_PAGES = 64;
/**
 * Claims above this many jobs are planned each time. The cap keeps a generic plan cheap: a 4,096
 * cap costs about a thirtieth of `jit_above_cost` on a long backlog.
 */
const MAX_CAP = 4_096;
/** How often the table's size is read again while claims run (in the background). */
const RESIZE_EVERY_MS = 1_000;
/** Shrinks past which kept plans are given up for good, so statement names stay few. */
const MAX_GENERATIONS = 20;

export interface OneTypeClaimPlan {
  /** The literal cap: a power of 4, at least 16 and at least the claim's limit. */
  cap: number;
  /** Part of the statement's name: a new one after each shrink below the threshold (see below). */
  generation: number;
}

/**
 * Decides when a one-type claim may run under a cached plan (ClaimQuery.oneType), and with which
 * cap. PostgreSQL gives a named statement a generic plan after a few executions and keeps it
 * until the table's statistics change, so that plan must suit the table at any later size. It
 * does when made on CACHED_PLAN_MIN_PAGES pages or more, so until the table's file is that large,
 * claims use the statement planned for each claim. The size is read about once a second, in the
 * background. A read that comes late is harmless while the table grows. When the table shrinks
 * (a VACUUM that truncates it, a TRUNCATE), PostgreSQL drops the kept plan and makes a new one at
 * the next claim, which may come before the size is read again: a plan made on a few pages. So a
 * read that finds the table has fallen below the threshold starts a new generation of statement
 * names, and a plan made in that second is never used again.
 */
export class OneTypeClaimPlans {
  private pages: number | null = null;
  private generation = 0;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly readPages: () => Promise<number>,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The plan for a one-type claim of up to `limit` jobs; null: use the claim planned each time
   * (the table is small, its size is not known yet, or the claim is too large to cap).
   */
  async planFor(limit: number): Promise<OneTypeClaimPlan | null> {
    if (limit > MAX_CAP || this.generation >= MAX_GENERATIONS) return null;
    // The first claim waits for the size; a failed read is tried again a second later, not per claim.
    const due = this.now() - this.readAt > RESIZE_EVERY_MS;
    if (due && this.pages === null) await this.refresh();
    else if (due) void this.refresh();
    if (this.pages === null || this.pages < CACHED_PLAN_MIN_PAGES) return null;
    let cap = 16;
    while (cap < limit) cap *= 4;
    return { cap, generation: this.generation };
  }

  /** One read at a time; after a failed read the last size known stands until one succeeds. */
  private refresh(): Promise<void> {
    this.reading ??= this.readPages()
      .then(
        (pages) => {
          if (this.pages !== null && this.pages >= CACHED_PLAN_MIN_PAGES && pages < CACHED_PLAN_MIN_PAGES) this.generation++;
          this.pages = pages;
        },
        () => undefined,
      )
      .finally(() => {
        this.readAt = this.now();
        this.reading = null;
      });
    return this.reading;
  }
}
