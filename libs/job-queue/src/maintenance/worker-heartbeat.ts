import os from 'node:os';
import type { EngineLogger } from '../base/logger.js';
import { withTimeout } from '../base/with-timeout.js';
import type { JobStore, WorkerBeat } from '../persistence/job.store.js';
import type { ThroughputTally } from './throughput-tally.js';

/** What a worker reports of itself at each beat. */
export interface WorkerSelf {
  readonly id: string;
  readonly types: readonly string[];
  readonly concurrency: number;
  status(): { inFlight: number; draining: boolean };
}

/** A worker row lives this many heartbeat intervals: one slow or failed beat does not drop it. */
const MISSED_BEATS = 3;
/** The last beat must not hold a shutdown on a database that does not answer (a partition). */
const LAST_BEAT_TIMEOUT_MS = 2_000;

/**
 * One process's heartbeat: its worker row (none for a producer-only process) and its outcome
 * tally, in one statement per interval. On shutdown, a last tally and the row removed.
 */
export class WorkerHeartbeat {
  private readonly startedAt = new Date();

  constructor(
    private readonly store: Pick<JobStore, 'heartbeat' | 'removeWorker'>,
    private readonly tally: ThroughputTally,
    private readonly self: WorkerSelf | null,
    private readonly intervalMs: number,
    private readonly logger: EngineLogger,
  ) {}

  /** Beats still in flight: the last beat waits for them (see stop). */
  private readonly inFlight = new Set<Promise<unknown>>();

  async runOnce(): Promise<void> {
    const rows = this.tally.take();
    const beat = this.store.heartbeat(this.beat(), rows);
    this.inFlight.add(beat);
    try {
      await beat;
    } catch (error) {
      this.tally.putBack(rows);
      throw error;
    } finally {
      this.inFlight.delete(beat);
    }
  }

  /** The last beat's tally, and the worker off the list. Never throws: shutdown goes on. */
  async stop(): Promise<void> {
    try {
      await withTimeout(
        (async () => {
          // A beat still in flight (the one that says "draining") would list the worker again
          // if its upsert landed after the row's removal.
          await Promise.allSettled([...this.inFlight]);
          await this.store.heartbeat(null, this.tally.take());
          if (this.self) await this.store.removeWorker(this.self.id);
        })(),
        LAST_BEAT_TIMEOUT_MS,
      );
    } catch (error) {
      this.logger.warn(`Could not write the last heartbeat: ${(error as Error)?.message ?? error}. The worker drops off the list when its heartbeat expires.`);
    }
  }

  private beat(): WorkerBeat | null {
    if (!this.self) return null;
    const { inFlight, draining } = this.self.status();
    return {
      id: this.self.id,
      host: os.hostname(),
      pid: process.pid,
      startedAt: this.startedAt,
      expiresInMs: this.intervalMs * MISSED_BEATS,
      types: [...this.self.types],
      concurrency: this.self.concurrency,
      inFlight,
      draining,
    };
  }
}
