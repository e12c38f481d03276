import type { JobStore, Lease } from '../persistence/job.store.js';
import { StoreRefusedDataError } from '../errors/store-refused-data.error.js';
import { StartConfirmations } from './start-confirmations.js';

/**
 * Completions per statement, at most: above a claim's worth (the prefetch ceiling plus the free
 * slots), so each claimed batch completes in one commit. See docs/decisions/0007-completion-batching.md.
 */
export const MAX_COMPLETION_BATCH = 2_000;
/**
 * Result text per statement, at most: results travel as one jsonb value, which PostgreSQL caps, so
 * a batch of large results is split before it could fail as a whole. A larger result goes alone.
 */
export const MAX_COMPLETION_RESULT_CHARS = 32 * 1024 * 1024;

/** A completion waiting for its statement; it hears the outcome of its own fenced write. */
export interface PendingCompletion {
  readonly lease: Lease;
  readonly resultJson: string;
  /** Whether the fenced write applied (false: the lease is gone). Must not throw. */
  settled(applied: boolean): void;
  /** The statement failed (the database away); nothing was written. Must not throw. */
  failed(error: unknown): void;
}

/**
 * Group commit for completions: when nothing is being written, a completion is written at once
 * (no added latency when idle); completions that arrive while a write is in flight go together
 * in the next statement. Each caller still learns whether its own fenced write applied. The
 * statements also carry the starts of prefetched attempts that have come due (StartConfirmations),
 * and a start that comes due while nothing else is written goes alone.
 */
export class CompletionBatcher {
  private queue: PendingCompletion[] = [];
  private flushing = false;
  /** Started prefetched attempts whose attempt is still to be charged. */
  readonly starts: StartConfirmations;

  constructor(
    private readonly store: Pick<JobStore, 'completeMany' | 'confirmStarts'>,
    confirmAfterMs?: number,
  ) {
    this.starts = new StartConfirmations(() => this.startFlush(), confirmAfterMs);
  }

  /** A prefetched attempt starts: its attempt is charged with a statement a few ms from now, unless it ends first. */
  confirmStart(lease: Lease): void {
    this.starts.started(lease);
  }

  /** Its handler returned: the outcome's statement charges it. */
  startEnded(lease: Lease): void {
    this.starts.ended(lease);
  }

  complete(lease: Lease, resultJson: string): Promise<boolean> {
    return new Promise((resolve, reject) => this.add({ lease, resultJson, settled: resolve, failed: reject }));
  }

  /** Queues a completion that is told its outcome through its own methods: no promise per job. */
  add(completion: PendingCompletion): void {
    this.queue.push(completion);
    if (this.flushing) return;
    // The write starts once the current synchronous run is over (a microtask, no timer): a batch
    // of short jobs run back to back completes in one statement.
    this.flushing = true;
    queueMicrotask(() => void this.flush());
  }

  /** Starts came due: written now unless a write is in flight (the loop takes them next). */
  private startFlush(): void {
    if (this.flushing) return;
    this.flushing = true;
    void this.flush();
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length > 0 || this.starts.hasDue) {
        const ids = new Set<string>();
        const batch = this.takeBatch(ids);
        const confirms = this.starts.take(ids);
        if (batch.length === 0) {
          await this.confirmAlone(confirms);
          continue;
        }
        let missed: ReadonlySet<string> | null = null;
        let failure: unknown;
        try {
          missed = await this.store.completeMany(batch, confirms);
        } catch (error) {
          // The starts it carried are not written: each is charged by its outcome's statement
          // instead (only a worker lost meanwhile leaves that run uncounted).
          failure = error;
        }
        if (!missed && batch.length > 1 && failure instanceof StoreRefusedDataError) {
          // One result the database refuses (nested too deep for jsonb, say) fails the statement
          // for all: each is written alone, so only its own completion hears the refusal.
          await this.completeOneByOne(batch);
          continue;
        }
        // Each completion hears back on its own: one that throws (it must not) cannot keep the
        // rest of its batch from hearing theirs.
        for (let i = 0; i < batch.length; i++) {
          try {
            if (missed) batch[i].settled(!missed.has(batch[i].lease.id));
            else batch[i].failed(failure);
          } catch {
            // Swallowed by contract: PendingCompletion's methods must not throw.
          }
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /** A failed confirm is not retried: the attempt's outcome statement charges it in any case. */
  private async confirmAlone(confirms: readonly Lease[]): Promise<void> {
    if (confirms.length === 0) return;
    try {
      await this.store.confirmStarts(confirms);
    } catch {
      // See above: nothing is lost but the charge of a run whose worker dies before its outcome.
    }
  }

  private async completeOneByOne(batch: readonly PendingCompletion[]): Promise<void> {
    // A failure for another reason (the database gone meanwhile) is every remaining item's: they
    // hear it at once rather than wait out a failing write each, the batcher held meanwhile.
    let sharedFailure: unknown;
    for (const item of batch) {
      let missed: ReadonlySet<string> | null = null;
      let failure: unknown = sharedFailure;
      if (sharedFailure === undefined) {
        try {
          missed = await this.store.completeMany([item]);
        } catch (error) {
          failure = error;
          if (!(error instanceof StoreRefusedDataError)) sharedFailure = error;
        }
      }
      try {
        if (missed) item.settled(!missed.has(item.lease.id));
        else item.failed(failure);
      } catch {
        // Swallowed by contract, as in flush.
      }
    }
  }

  /**
   * The next statement's completions, in arrival order, within the caps, and one per job: a stale
   * attempt of a job this worker claimed again waits for the next statement, fenced by its own token.
   */
  private takeBatch(ids: Set<string>): PendingCompletion[] {
    const batch: PendingCompletion[] = [];
    const later: PendingCompletion[] = [];
    let resultChars = 0;
    for (const item of this.queue) {
      // A job that returned nothing sends no result ('null' is left out of the statement).
      const chars = item.resultJson === 'null' ? 0 : item.resultJson.length;
      const fits =
        batch.length < MAX_COMPLETION_BATCH && (batch.length === 0 || resultChars + chars <= MAX_COMPLETION_RESULT_CHARS);
      if (fits && !ids.has(item.lease.id)) {
        ids.add(item.lease.id);
        batch.push(item);
        resultChars += chars;
      } else {
        later.push(item);
      }
    }
    this.queue = later;
    return batch;
  }
}
