import { LARGE_TABLE_PAGES } from './claim-query.js';

/**
 * Claims above this many jobs are planned each time. The cap keeps a generic plan cheap: a 4,096
 * cap costs about a thirtieth of `jit_above_cost` on a long backlog.
 */
const MAX_CAP = 4_096;
/** How often the table's size is read again while claims run (in the background). */
const RESIZE_EVERY_MS = 1_000;

export interface OneTypeClaimPlan {
  /** The literal cap: a power of 4, at least 16 and at least the claim's limit. */
  cap: number;
  /** The jobs table had fewer than LARGE_TABLE_PAGES pages when last read: the guarded form. */
  smallTable: boolean;
}

/**
 * Chooses the form of a one-type claim (ClaimQuery.oneType). PostgreSQL gives a named statement a
 * generic plan after a few executions and keeps it until the table's statistics change, so a plan
 * made on a table of a few pages may still be in use when the table holds millions of rows. Made
 * on LARGE_TABLE_PAGES or more, the plan suits any larger table; made on fewer, it may not, so
 * small tables get the guarded form, which claims nothing once the table is large. The size is
 * read about once a second in the background, and again whenever a guarded claim found nothing
 * (it may have been turned away): a size read late then costs at most that one empty claim.
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
   * The form for a one-type claim of up to `limit` jobs; null: use the claim planned each time
   * (the claim is too large to cap, or the table's size could not be read yet).
   */
  async planFor(limit: number): Promise<OneTypeClaimPlan | null> {
    if (limit > MAX_CAP) return null;
    // The first claim waits for the size; a failed read is tried again a second later, not per claim.
    const due = this.now() - this.readAt > RESIZE_EVERY_MS;
    if (due && this.pages === null) await this.refresh();
    else if (due) void this.refresh();
    if (this.pages === null) return null;
    let cap = 16;
    while (cap < limit) cap *= 4;
    return { cap, smallTable: this.pages < LARGE_TABLE_PAGES };
  }

  /** After a guarded claim found nothing: reads the size now; true if the table has become large. */
  async grewLarge(): Promise<boolean> {
    await this.refresh();
    return this.pages !== null && this.pages >= LARGE_TABLE_PAGES;
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
