import { Inject, Injectable, Logger } from '@nestjs/common';
import { JOB_QUEUE_OPTIONS, JOB_STORE } from '../base/job-queue.constants.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import { withTimeout } from '../base/with-timeout.js';
import { QueueSaturatedError } from '../errors/queue-saturated.error.js';
import { StoreUnavailableError } from '../errors/store-unavailable.error.js';
import { JobQueueEvents } from '../events/job-queue.events.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore } from '../persistence/job.store.js';

export interface QueueSnapshot {
  /** Monotonic ms (not an epoch time): a wall-clock step back must not keep an old count fresh. */
  takenAt: number;
  databaseReachable: boolean;
  error: string | null;
  /** Waiting jobs (pending or failed), counted up to a cap. */
  depth: number;
  deadLastHour: number;
  limit: number | null;
  saturated: boolean;
  /** Types whose circuit is open or half-open, cluster-wide. */
  openCircuits: string[];
}

/** A readiness probe must answer; a database that does not answer within this is unreachable. */
const SNAPSHOT_TIMEOUT_MS = 3_000;

/** A read still out after this many timeouts is given up on, and a new one may start. */
const STALLED_READ_ABANDON_FACTOR = 10;

/** Depth is counted up to this many rows when no limit is set, so a huge backlog stays cheap. */
const UNBOUNDED_COUNT_CAP = 100_000;

/**
 * Admission control: refuses enqueues that would pass `maxQueueDepth` (or a type's own limit)
 * with QueueSaturatedError. It keeps the queue's numbers cached, read at most once per
 * `depthRefreshMs` per process and shared by concurrent callers (readiness reads them too).
 * Enqueues made here since the last read are added to the cached depth, so one producer never
 * overshoots; across processes the overshoot is bounded by what they enqueue within one refresh.
 */
@Injectable()
export class Backpressure {
  private readonly logger = new Logger('JobQueue');
  private last: QueueSnapshot | null = null;
  private refreshing: Promise<QueueSnapshot> | null = null;
  private enqueuedSince = 0;
  private enqueuedSinceByType = new Map<string, number>();
  private typeDepths = new Map<string, number>();
  private wasSaturated = false;
  /** The reads of the last refresh, until they settle: ones that outlived their timeout included. */
  private reading: Promise<unknown> | null = null;
  private readingSince = 0;
  private readonly refreshListeners: Array<(snapshot: QueueSnapshot) => Promise<void>> = [];
  /** How long a refresh waits for its reads (a field, so a test can shorten it). */
  snapshotTimeoutMs = SNAPSHOT_TIMEOUT_MS;

  constructor(
    @Inject(JOB_STORE) private readonly store: JobStore,
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    private readonly events: JobQueueEvents,
  ) {}

  /** Called with every snapshot freshly read from the database, before callers get it. */
  onRefresh(listener: (snapshot: QueueSnapshot) => Promise<void>): void {
    this.refreshListeners.push(listener);
  }

  async snapshot(): Promise<QueueSnapshot> {
    if (this.last && monotonicNow() - this.last.takenAt < this.options.depthRefreshMs) return this.withLocalEnqueues(this.last);
    this.refreshing ??= this.refresh().finally(() => (this.refreshing = null));
    return this.withLocalEnqueues(await this.refreshing);
  }

  /**
   * Throws QueueSaturatedError when adding these jobs would pass a configured limit. Admitted jobs
   * are reserved at once (check and reserve run without an await between them), so concurrent
   * enqueues in one process cannot all squeeze through the last free place. Call the returned
   * function with the types that were not inserted after all (deduplicated, or the insert failed).
   */
  async admit(types: readonly string[]): Promise<(notInserted: readonly string[]) => void> {
    const limit = this.options.maxQueueDepth;
    const byType = this.options.maxQueueDepthByType;
    const limitedTypes = types.filter((type) => byType[type] !== undefined);
    if (limit === null && limitedTypes.length === 0) {
      this.count(types, 1);
      return (notInserted) => this.count(notInserted, -1);
    }
    await this.snapshot();
    // Re-read after the await: other enqueues may have reserved places meanwhile.
    const snapshot = this.withLocalEnqueues(this.last!);
    if (snapshot.databaseReachable) {
      // Unreachable: let the insert itself report the outage.
      if (limit !== null && snapshot.depth + types.length > limit) this.reject(snapshot.depth, limit);
      for (const type of new Set(limitedTypes)) {
        const depth = (this.typeDepths.get(type) ?? 0) + (this.enqueuedSinceByType.get(type) ?? 0);
        const adding = types.filter((t) => t === type).length;
        if (depth + adding > byType[type]) this.reject(depth, byType[type], type);
      }
    }
    this.count(types, 1);
    const counted = this.last;
    // After a refresh the database counts the rows itself; only undo reservations it cannot see.
    return (notInserted) => {
      if (this.last === counted) this.count(notInserted, -1);
    };
  }

  private count(types: readonly string[], sign: 1 | -1): void {
    this.enqueuedSince = Math.max(0, this.enqueuedSince + sign * types.length);
    for (const type of types) this.enqueuedSinceByType.set(type, Math.max(0, (this.enqueuedSinceByType.get(type) ?? 0) + sign));
  }

  private reject(depth: number, limit: number, type?: string): never {
    if (!this.wasSaturated) {
      this.wasSaturated = true;
      this.logger.warn(`Queue saturated${type ? ` for type ${type}` : ''}: ${depth} waiting, limit ${limit}; enqueues are refused.`);
      this.events.emit({ kind: 'saturated', depth, limit, ...(type ? { type } : {}) });
    }
    throw new QueueSaturatedError(depth, limit);
  }

  private withLocalEnqueues(snapshot: QueueSnapshot): QueueSnapshot {
    const depth = snapshot.depth + this.enqueuedSince;
    const saturated = snapshot.limit !== null && depth >= snapshot.limit;
    return { ...snapshot, depth, saturated };
  }

  private async refresh(): Promise<QueueSnapshot> {
    const limit = this.options.maxQueueDepth;
    const limitedTypes = Object.keys(this.options.maxQueueDepthByType);
    const countUpTo = Math.max(limit ?? 0, ...Object.values(this.options.maxQueueDepthByType), UNBOUNDED_COUNT_CAP) + 1;
    const takenAt = monotonicNow();
    // Reservations made while the count runs may not be in it: keep those, drop the older ones.
    const reservedBefore = this.enqueuedSince;
    const reservedBeforeByType = new Map(this.enqueuedSinceByType);
    try {
      const [{ depth, deadLastHour }, typeDepths, circuits] = await withTimeout(this.startReads(limitedTypes, countUpTo), this.snapshotTimeoutMs);
      this.enqueuedSince = Math.max(0, this.enqueuedSince - reservedBefore);
      for (const [type, n] of reservedBeforeByType) {
        this.enqueuedSinceByType.set(type, Math.max(0, (this.enqueuedSinceByType.get(type) ?? 0) - n));
      }
      this.typeDepths = typeDepths;
      const snapshot: QueueSnapshot = {
        takenAt,
        databaseReachable: true,
        error: null,
        depth,
        deadLastHour,
        limit,
        saturated: limit !== null && depth >= limit,
        openCircuits: circuits.map((circuit) => circuit.type),
      };
      if (!snapshot.saturated) this.wasSaturated = false;
      for (const listener of this.refreshListeners) await listener(snapshot);
      this.last = snapshot;
      return snapshot;
    } catch (error) {
      const snapshot: QueueSnapshot = {
        ...(this.last ?? { depth: 0, deadLastHour: 0, saturated: false, openCircuits: [] }),
        takenAt,
        limit,
        databaseReachable: false,
        error: reasonOf(error),
      };
      this.last = snapshot;
      return snapshot;
    }
  }

  /**
   * Reads that timed out keep running, each on a pooled connection: on a database that is slow
   * rather than away, starting more at every probe would pile them up until the pool (and the
   * lease renewals with it) was gone. So one set at a time; but a set still out after ten timeouts
   * is given up on (its connection may have died without a word), so readiness can come back.
   */
  private startReads(limitedTypes: string[], countUpTo: number) {
    if (this.reading && monotonicNow() - this.readingSince < STALLED_READ_ABANDON_FACTOR * this.snapshotTimeoutMs) {
      return Promise.reject(new Error(`the last read of the queue has not answered yet (it gets ${this.snapshotTimeoutMs} ms)`));
    }
    const reads = Promise.all([
      this.store.queueSnapshot(countUpTo),
      this.store.depthByType(limitedTypes, countUpTo),
      this.store.openCircuits(),
    ]);
    this.reading = reads;
    this.readingSince = monotonicNow();
    const settled = () => {
      if (this.reading === reads) this.reading = null;
    };
    reads.then(settled, settled);
    return reads;
  }
}

/** Why the read failed, in a few words: readiness says "database unreachable: <this>". */
function reasonOf(error: unknown): string {
  const cause = error instanceof StoreUnavailableError ? error.cause : error;
  return (cause as Error)?.message ?? String(cause);
}
