import { monotonicNow } from '../base/monotonic-clock.js';
import { LARGE_TABLE_PAGES } from './claim-query.js';

/**
 * Claims above this many jobs are planned each time. The cap keeps a generic plan's cost far below
 * `jit_above_cost` on any backlog.
 */
const MAX_CAP = 4_096;
/** How often the table's size is read again while claims run (in the background). */
const RESIZE_EVERY_MS = 1_000;
/** Shrinks past which the large form is given up for good, so statement names stay few. */
const MAX_GENERATIONS = 20;
/**
 * The guarded form needs this much hash memory (work_mem × hash_mem_multiplier, in kB): its
 * ordering-key set, from a table under 64 pages, is then always hashed, whatever the block size.
 * With less, PostgreSQL may compare each keyed job with the whole set.
 */
const MIN_HASH_MEM_KB = 4_096;

/** What a size read returns. */
export interface JobsTableSize {
  pages: number;
  /** work_mem × hash_mem_multiplier, in kB, on the connection that read the size. */
  hashMemKb: number;
}

export interface OneTypeClaimPlan {
  /** The literal cap: a power of 4, at least 16 and at least the claim's limit. */
  cap: number;
  /** The table had fewer than LARGE_TABLE_PAGES pages when last read: the guarded form. */
  smallTable: boolean;
  /** Part of the large form's name: a new one after each shrink below the threshold (see below). */
  generation: number;
}

/**
 * Chooses the form of a one-type claim (ClaimQuery.oneType). PostgreSQL gives a named statement a
 * generic plan after a few executions and keeps it until the table's statistics change, so a plan
 * made on a table of a few pages may still be in use when the table holds millions of rows. Made
 * on LARGE_TABLE_PAGES or more, the plan suits any larger table; made on fewer, it may not, so
 * small tables get the guarded form, which claims nothing once the table is large and says so
 * (sawLargeTable). The size is read about once a second in the background; a read that comes late
 * costs at most one turned-away claim.
 *
 * When the table shrinks (a VACUUM that truncates it, a TRUNCATE), PostgreSQL drops the large
 * form's kept plan and makes a new one at its next claim, which may come before the size is read
 * again: a plan made on a few pages. So a read that finds the table has fallen below the threshold
 * starts a new generation of large-form names, and a plan made in that second is never used
 * again. The guarded form needs no such care: any plan of it is safe at any size.
 */
export class OneTypeClaimPlans {
  private pages: number | null = null;
  private hashMemKb = 0;
  /** Counts turned-away claims: a read sent before the latest one is older news than it. */
  private turnAways = 0;
  private generation = 0;
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly readSize: () => Promise<JobsTableSize>,
    private readonly now: () => number = monotonicNow,
  ) {}

  /**
   * The form for a one-type claim of up to `limit` jobs; null: use the claim planned each time
   * (the claim is too large to cap, the table's size could not be read yet, the table is small
   * and the server gives hashes too little memory, or the table has shrunk too often for the
   * large form to be kept).
   */
  async planFor(limit: number): Promise<OneTypeClaimPlan | null> {
    if (limit > MAX_CAP) return null;
    // The first claim waits for the size; a failed read is tried again a second later, not per claim.
    const due = this.now() - this.readAt > RESIZE_EVERY_MS;
    if (due && this.pages === null) await this.refresh();
    else if (due) void this.refresh();
    if (this.pages === null) return null;
    const smallTable = this.pages < LARGE_TABLE_PAGES;
    if (smallTable ? this.hashMemKb < MIN_HASH_MEM_KB : this.generation >= MAX_GENERATIONS) return null;
    let cap = 16;
    while (cap < limit) cap *= 4;
    return { cap, smallTable, generation: this.generation };
  }

  /** A guarded claim was turned away: the table has LARGE_TABLE_PAGES pages or more. */
  sawLargeTable(): void {
    this.turnAways++;
    if (this.pages !== null && this.pages < LARGE_TABLE_PAGES) this.pages = LARGE_TABLE_PAGES;
  }

  /** One read at a time; after a failed read the last size known stands until one succeeds. */
  private refresh(): Promise<void> {
    const turnAways = this.turnAways;
    this.reading ??= this.readSize()
      .then(
        ({ pages, hashMemKb }) => {
          // Sent before a claim was turned away: it may predate the growth, and is no shrink.
          if (turnAways !== this.turnAways) return;
          if (this.pages !== null && this.pages >= LARGE_TABLE_PAGES && pages < LARGE_TABLE_PAGES) this.generation++;
          this.pages = pages;
          this.hashMemKb = hashMemKb;
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
