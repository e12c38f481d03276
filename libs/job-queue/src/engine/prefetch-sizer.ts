import { monotonicNow } from '../base/monotonic-clock.js';
import { ThroughputMeter } from './throughput-meter.js';

/** The buffer holds about this much work: enough to cover a claim's round trip under load. */
const BUFFER_MS = 100;
/** Jobs per second ÷ this = jobs in BUFFER_MS. */
const PER_BUFFER = 1_000 / BUFFER_MS;
/** A type has finished jobs lately if one finished this recently (the rate meter's window). */
const LATELY_MS = 250;
/** The newest run time's weight in a type's average: a few jobs move it. */
const RUN_TIME_WEIGHT = 0.25;

/** What sizes one type's part of the buffer. */
interface TypeTiming {
  readonly concurrency: number;
  /** Average run time of its recent jobs (ms); negative until one has finished. */
  meanMs: number;
  lastFinishedAt: number;
}

/**
 * How many claimed jobs a worker keeps waiting to start: about 100 ms of work at its recent rate,
 * within the ceiling, and none while no job has finished lately. With several types, each type's
 * share is what its own slots start in about 100 ms at its jobs' recent run time (not its rate: a
 * slow type's jobs that started together also finish together). See docs/decisions/0005-adaptive-prefetch.md.
 */
export class PrefetchSizer {
  /** Whether record() needs each job's start: several types, and prefetch on. */
  readonly timesTypes: boolean;
  private readonly all: ThroughputMeter;
  private readonly timings = new Map<string, TypeTiming>();
  /** Reused by each reading of perType(). */
  private readonly parts = new Map<string, number>();

  constructor(
    private readonly ceiling: number,
    types: ReadonlyArray<{ type: string; concurrency: number }>,
    private readonly now: () => number = monotonicNow,
  ) {
    this.all = new ThroughputMeter(now);
    this.timesTypes = ceiling > 0 && types.length > 1;
    if (!this.timesTypes) return;
    for (const { type, concurrency } of types) this.timings.set(type, { concurrency, meanMs: -1, lastFinishedAt: -Infinity });
  }

  /** A job of `type` has finished; `startedAt` (on this sizer's clock) is read only if timesTypes. */
  record(type: string, startedAt: number): void {
    this.all.record();
    if (!this.timesTypes) return;
    const timing = this.timings.get(type);
    if (!timing) return;
    const now = this.now();
    const ms = Math.max(0, now - startedAt);
    timing.meanMs = timing.meanMs < 0 ? ms : timing.meanMs + (ms - timing.meanMs) * RUN_TIME_WEIGHT;
    timing.lastFinishedAt = now;
  }

  /** The whole buffer's size now. */
  total(): number {
    return Math.min(this.ceiling, Math.round(this.all.perSecond() / PER_BUFFER));
  }

  /** Each type's share now, at most; undefined unless timesTypes. */
  perType(): ReadonlyMap<string, number> | undefined {
    if (!this.timesTypes) return undefined;
    const now = this.now();
    for (const [type, timing] of this.timings) this.parts.set(type, this.part(timing, now));
    return this.parts;
  }

  /** Rounded down: a job is kept waiting only if one of its type's slots frees within about 100 ms. */
  private part(timing: TypeTiming, now: number): number {
    if (now - timing.lastFinishedAt >= LATELY_MS) return 0;
    return Math.min(this.ceiling, Math.floor((timing.concurrency * BUFFER_MS) / Math.max(1, timing.meanMs)));
  }
}
