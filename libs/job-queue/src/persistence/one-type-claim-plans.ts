/** Jobs-table sizes (pages) between size classes; from the last one on, plans keep their shape. */
const SIZE_CLASS_BOUNDS = [16, 64, 256];
/**
 * Claims above this many jobs use the multi-type statement, planned for each claim. The cap keeps
 * a generic plan cheap: a 4,096 cap costs about a thirtieth of `jit_above_cost` on a long backlog.
 */
const MAX_CAP = 4_096;
/** How often the table's size is read again while claims run (in the background). */
const RESIZE_EVERY_MS = 1_000;
/** A size older than this (the worker was idle) is read again before the claim. */
const STALE_AFTER_MS = 10_000;

export interface OneTypeClaimPlan {
  /** The claim's literal cap: a power of 4, at least 16 and at least the claim's limit. */
  cap: number;
  /** The jobs table's size class when the claim runs: part of the statement's name. */
  sizeClass: number;
}

/**
 * Names the cached plans of the one-type claim (ClaimQuery.oneType). PostgreSQL gives a named
 * statement a generic plan and keeps it until the table's statistics change. A plan made while
 * the jobs table is a few pages reads it by sequential scan (cheapest there), and with autovacuum
 * off nothing would replace it as the table grows. So the statement's name carries the table's
 * size class, read from the file size about once a second: a claim on a table that has left its
 * class runs under another name, planned for the size it has now. From 256 pages on, the plan is
 * the one every larger table gets (index and tuple-id scans), so the names stay few.
 */
export class OneTypeClaimPlans {
  private pages: number | null = null;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly readPages: () => Promise<number>,
    private readonly now: () => number = Date.now,
  ) {}

  /** The plan for a one-type claim of up to `limit` jobs; null: use the claim planned each time. */
  async planFor(limit: number): Promise<OneTypeClaimPlan | null> {
    if (limit > MAX_CAP) return null;
    const age = this.now() - this.readAt;
    if (this.pages === null || age > STALE_AFTER_MS) await this.refresh();
    else if (age > RESIZE_EVERY_MS) void this.refresh();
    if (this.pages === null) return null;
    let cap = 16;
    while (cap < limit) cap *= 4;
    let sizeClass = 0;
    while (sizeClass < SIZE_CLASS_BOUNDS.length && this.pages >= SIZE_CLASS_BOUNDS[sizeClass]) sizeClass++;
    return { cap, sizeClass };
  }

  /** One read at a time; a failed read forgets the size, so claims fall back until a read succeeds. */
  private refresh(): Promise<void> {
    this.reading ??= this.readPages()
      .then(
        (pages) => {
          this.pages = pages;
        },
        () => {
          this.pages = null;
        },
      )
      .finally(() => {
        this.readAt = this.now();
        this.reading = null;
      });
    return this.reading;
  }
}
