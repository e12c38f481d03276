import type { JobStore, Lease } from '../persistence/job.store.js';

/** Completions per statement, at most. */
const MAX_BATCH = 500;

interface Pending {
  lease: Lease;
  resultJson: string;
  resolve(applied: boolean): void;
  reject(error: unknown): void;
}

/**
 * Group commit for completions: when nothing is being written, a completion is written at once
 * (no added latency when idle); completions that arrive while a write is in flight go together
 * in the next statement. Each caller still learns whether its own fenced write applied.
 */
export class CompletionBatcher {
  private queue: Pending[] = [];
  private flushing = false;

  constructor(private readonly store: JobStore) {}

  complete(lease: Lease, resultJson: string): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ lease, resultJson, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.takeBatch();
        try {
          const applied = await this.store.completeMany(batch);
          for (const item of batch) item.resolve(applied.has(item.lease.id));
        } catch (error) {
          for (const item of batch) item.reject(error);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /**
   * The next statement's completions, in arrival order: at most MAX_BATCH, and at most one per
   * job. Two attempts of one job can both be here (its lease lost, the job reclaimed by this same
   * worker, both finishing at once); the later one waits for the next statement, so each is fenced
   * by its own token and learns its own outcome.
   */
  private takeBatch(): Pending[] {
    const batch: Pending[] = [];
    const ids = new Set<string>();
    const later: Pending[] = [];
    for (const item of this.queue) {
      if (batch.length < MAX_BATCH && !ids.has(item.lease.id)) {
        ids.add(item.lease.id);
        batch.push(item);
      } else {
        later.push(item);
      }
    }
    this.queue = later;
    return batch;
  }
}
