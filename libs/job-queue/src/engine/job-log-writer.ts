import { formatWithOptions } from 'node:util';
import type { EngineLogger } from '../base/logger.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import type { JobLogLine, JobStore, Lease } from '../persistence/job.store.js';

/** The job's log keeps this many lines (the latest); the contract's bound. */
export const JOB_LOG_LINES = 100;
/** Each line is cut at this many bytes of UTF-8. */
export const JOB_LOG_LINE_BYTES = 2_048;
/** At most one log write per attempt this often; lines logged meanwhile go together. */
export const JOB_LOG_WRITE_INTERVAL_MS = 250;

/**
 * One attempt's `job.log()` lines: formatted as console.log would, cut, and appended in batches,
 * at once when the last write is old enough, else when it is. Never throws into the handler; a
 * failed write is logged. Lines still waiting when the handler returns are written after it (the
 * statement accepts this worker's writes once the job has finished).
 */
export class JobLogWriter {
  private pending: JobLogLine[] = [];
  private writing: Promise<void> | null = null;
  private lastWriteAt = -Infinity;

  constructor(
    private readonly store: Pick<JobStore, 'appendJobLogs'>,
    private readonly lease: Lease & { type: string; attempt: number },
    private readonly workerId: string,
    private readonly logger?: EngineLogger,
    private readonly clock: () => number = monotonicNow,
  ) {}

  log(args: readonly unknown[]): void {
    let message: string;
    try {
      message = formatWithOptions({ colors: false }, ...args);
    } catch (error) {
      message = `(job.log could not format its arguments: ${(error as Error)?.message ?? error})`;
    }
    this.pending.push({ at: new Date().toISOString(), attempt: this.lease.attempt, message: cut(message) });
    // Only the latest lines are kept in the end: older ones need not wait in memory either.
    if (this.pending.length > JOB_LOG_LINES) this.pending.splice(0, this.pending.length - JOB_LOG_LINES);
    this.writing ??= this.writeWhilePending().finally(() => {
      this.writing = null;
    });
  }

  /** Resolves once every line logged so far has been written (or given up on). */
  flushed(): Promise<void> {
    return this.writing ?? Promise.resolve();
  }

  private async writeWhilePending(): Promise<void> {
    while (this.pending.length > 0) {
      const wait = this.lastWriteAt + JOB_LOG_WRITE_INTERVAL_MS - this.clock();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const lines = this.pending;
      this.pending = [];
      this.lastWriteAt = this.clock();
      try {
        await this.store.appendJobLogs(this.lease, this.workerId, lines, JOB_LOG_LINES);
      } catch (error) {
        this.logger?.warn(`Could not store ${lines.length} log line(s) of job ${this.lease.id} (${this.lease.type}): ${(error as Error)?.message ?? error}`);
      }
    }
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** At most JOB_LOG_LINE_BYTES of UTF-8, never half a character, and no lone surrogate (jsonb refuses one). */
function cut(message: string): string {
  const whole = message.replace(LONE_SURROGATE, '\uFFFD');
  if (whole.length * 3 <= JOB_LOG_LINE_BYTES) return whole;
  const bytes = Buffer.from(whole, 'utf8');
  if (bytes.length <= JOB_LOG_LINE_BYTES) return whole;
  // Decoding a cut in the middle of a character ends in U+FFFD: drop that.
  return bytes.subarray(0, JOB_LOG_LINE_BYTES).toString('utf8').replace(/\uFFFD$/, '');
}
