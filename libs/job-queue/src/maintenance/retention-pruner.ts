import { monotonicNow } from '../base/monotonic-clock.js';
import type { JobStore } from '../persistence/job.store.js';

/** Jobs looked at per statement by the walk over completed and cancelled jobs. */
const CHUNK = 1_000;
/** Throughput minutes kept: the contract promises a day; two cover a day's comparison with the one before. */
const THROUGHPUT_KEPT_MS = 48 * 3_600_000;
/** Dead letters per DELETE. */
const DEAD_BATCH = 1_000;
/**
 * How long a pass goes on deleting while rows remain: chunk after chunk until this much time has
 * passed, so the pruner deletes as fast as jobs finish instead of a fixed number a pass
 * (docs/decisions/0070-retention-at-full-speed.md). A quarter of the default maintenance
 * interval; the pass is one transaction, and a short one holds back no vacuum.
 */
export const DEFAULT_PASS_BUDGET_MS = 250;
/**
 * A pass that ran out of budget amid expired jobs doubles the next pass's budget, up to
 * this; a walk that ends within its budget halves it again, down to the base. Under a load that
 * slows every chunk, a fixed quarter of each second fell behind a queue finishing 29,000 jobs a
 * second; at this ceiling, a pass deletes for 2 s of every 3.
 */
export const MAX_PASS_BUDGET_MS = 2_000;
/**
 * Between two walks, a rest of a tenth of the retention, at most a minute: a table with nothing
 * created before the retention window then costs one chunk a minute.
 */
const MAX_REST_MS = 60_000;
/**
 * With `completedMs` 0, a completed job an enqueueAndWait caller has not read (it timed out, or
 * its process is gone) is kept this long; one that has been read goes on the next walk.
 */
export const UNREAD_RESULT_MS = 3_600_000;

export interface RetentionSettings {
  /** 0: completions delete their jobs; the walk then removes cancelled jobs and read results. */
  completedMs: number;
  deadMs: number;
  /** Rate-limit start records older than this are never read again. */
  startsMs: number;
  /** @default DEFAULT_PASS_BUDGET_MS */
  passBudgetMs?: number;
}

export interface Pruned {
  completed: number;
  cancelled: number;
  dead: number;
}

/**
 * Deletes finished jobs past their retention, and rate-limit starts past every window.
 *
 * Completed and cancelled jobs have no index of their own (a completion would pay for its entry),
 * so they are found by walking the table in id order, a chunk per statement, as many chunks as
 * the pass's time budget allows. Ids grow with creation time, and a job is created before it
 * finishes, so the walk starts over from the beginning once a chunk ends in jobs created within
 * the retention window, and rests a while first. Where the walk is and when it may go on are kept
 * in the database and written in the pass's transaction: every process that leads a pass carries
 * on the same walk, and a pass that fails leaves the walk where it was.
 */
export class RetentionPruner {
  private readonly passBudgetMs: number;
  /** This pass's budget: the base, or more while the walk is behind. */
  private budgetMs: number;
  private readonly restMs: number;
  private readonly unreadResultMs: number;

  constructor(
    private readonly settings: RetentionSettings,
    private readonly clock: () => number = monotonicNow,
  ) {
    this.passBudgetMs = settings.passBudgetMs ?? DEFAULT_PASS_BUDGET_MS;
    this.budgetMs = this.passBudgetMs;
    // With completedMs 0 nothing is ever "recent": each walk reads the whole table, so it rests
    // the longest (completions delete their own jobs; only cancelled jobs and read results wait).
    this.restMs = settings.completedMs === 0 ? MAX_REST_MS : Math.min(MAX_REST_MS, Math.ceil(settings.completedMs / 10));
    this.unreadResultMs = settings.completedMs === 0 ? UNREAD_RESULT_MS : 0;
  }

  async runOnce(store: JobStore): Promise<Pruned> {
    const deadline = this.clock() + this.budgetMs;
    const pruned: Pruned = { completed: 0, cancelled: 0, dead: 0 };
    // Behind: the budget ran out amid expired jobs (a walk through jobs it keeps is not that).
    const behind = (await this.walk(store, pruned, deadline)) && pruned.completed + pruned.cancelled > 0;
    this.budgetMs = behind
      ? Math.min(Math.max(MAX_PASS_BUDGET_MS, this.passBudgetMs), this.budgetMs * 2)
      : Math.max(this.passBudgetMs, this.budgetMs / 2);
    // At least one batch of dead letters each pass, however long the walk took.
    for (;;) {
      const deleted = await store.pruneDead(this.settings.deadMs, DEAD_BATCH);
      pruned.dead += deleted;
      if (deleted < DEAD_BATCH || this.clock() >= deadline) break;
    }
    if (this.settings.startsMs > 0) await store.pruneStarts(this.settings.startsMs);
    await store.pruneOperatorHistory(THROUGHPUT_KEPT_MS);
    return pruned;
  }

  /** Whether the walk stopped at the deadline with more of the table to walk (it is behind). */
  private async walk(store: JobStore, pruned: Pruned, deadline: number): Promise<boolean> {
    const walk = await store.retentionWalk();
    if (!walk.due) return false;
    let walkedTo = walk.walkedTo;
    do {
      const chunk = await store.pruneFinishedChunk(walkedTo, CHUNK, this.settings.completedMs, this.unreadResultMs);
      pruned.completed += chunk.completed;
      pruned.cancelled += chunk.cancelled;
      if (chunk.scanned < CHUNK || chunk.reachedRecent || chunk.lastId === null) {
        await store.saveRetentionWalk('0', this.restMs);
        return false;
      }
      walkedTo = chunk.lastId;
    } while (this.clock() < deadline);
    await store.saveRetentionWalk(walkedTo, 0);
    return true;
  }
}
