import type { EngineLogger } from '../base/logger.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import type { JobStore, Lease } from '../persistence/job.store.js';

/** At most one progress write per job this often: a handler reporting in a tight loop costs a few writes a second. */
export const PROGRESS_WRITE_INTERVAL_MS = 250;

/**
 * One attempt's progress writes, coalesced: the latest value wins, written at once if the last
 * write is old enough, else when it is. Each report resolves once a write holding it (or a later
 * value) has landed; a failed write is logged, never thrown into the handler.
 */
export class ProgressReporter {
  private pending: string | null = null;
  private writing: Promise<void> | null = null;
  private lastWriteAt = -Infinity;

  constructor(
    private readonly store: Pick<JobStore, 'reportProgress'>,
    private readonly lease: Lease & { type: string },
    private readonly logger?: EngineLogger,
    private readonly clock: () => number = monotonicNow,
  ) {}

  report(progressJson: string): Promise<void> {
    this.pending = progressJson;
    this.writing ??= this.writeWhileReported().finally(() => {
      this.writing = null;
    });
    return this.writing;
  }

  private async writeWhileReported(): Promise<void> {
    while (this.pending !== null) {
      const wait = this.lastWriteAt + PROGRESS_WRITE_INTERVAL_MS - this.clock();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const json = this.pending;
      this.pending = null;
      this.lastWriteAt = this.clock();
      try {
        await this.store.reportProgress(this.lease, json);
      } catch (error) {
        this.logger?.warn(`Could not store the progress of job ${this.lease.id} (${this.lease.type}): ${(error as Error)?.message ?? error}`);
      }
    }
  }
}
