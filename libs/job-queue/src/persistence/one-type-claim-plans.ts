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

/**
 * Decides when a one-type claim may run under a cached plan (ClaimQuery.oneType), and with which
 * cap. PostgreSQL gives a named statement a generic plan after a few executions and keeps it
 * until the table's statistics change, so that plan must suit the table at any later size. It
 * does once the table has CACHED_PLAN_MIN_PAGES pages, so until the table's file is that large,
 * claims use the statement planned for each claim. The size is read about once a second, in the
 * background; a size read late is harmless, since either statement is right for any size then.
 */
export class OneTypeClaimPlans {
  private pages: number | null = null;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly readPages: () => Promise<number>,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The literal cap (a power of 4, at least 16 and at least `limit`) for a one-type claim of up
   * to `limit` jobs; null: use the claim planned each time (the table is small, its size is not
   * known yet, or the claim is too large to cap).
   */
  async capFor(limit: number): Promise<number | null> {
    if (limit > MAX_CAP) return null;
    // The first claim waits for the size; a failed read is tried again a second later, not per claim.
    const due = this.now() - this.readAt > RESIZE_EVERY_MS;
    if (due && this.pages === null) await this.refresh();
    else if (due) void this.refresh();
    if (this.pages === null || this.pages < CACHED_PLAN_MIN_PAGES) return null;
    let cap = 16;
    while (cap < limit) cap *= 4;
    return cap;
  }

  /** One read at a time; after a failed read the last size known stands until one succeeds. */
  private refresh(): Promise<void> {
    this.reading ??= this.readPages()
      .then(
        (pages) => {
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
