import { ThroughputMeter } from './throughput-meter.js';

/** The buffer holds about this much work: enough to cover a claim's round trip under load. */
const BUFFER_MS = 100;
/** Jobs per second ÷ this = jobs in BUFFER_MS. */
const PER_BUFFER = 1_000 / BUFFER_MS;
/**
 * A type's own rate is read over its burst's age only from this many finished jobs: one job that
 * just finished would read as 20 jobs/s (the meter's 50 ms floor), and give a slow type a buffer
 * share right after each of its finishes.
 */
const TYPE_BURST_JOBS = 3;

/**
 * How many claimed jobs a worker keeps waiting to start: about 100 ms of work at its recent
 * completion rate, within the configured ceiling, and none while no job has finished lately. In a
 * worker that handles several types, each type's part is also held to about 100 ms of that type's
 * own work, so the jobs of a slow type beside fast ones are not kept waiting behind its running
 * ones, leased, while another worker could start them.
 */
export class PrefetchSizer {
  private readonly all: ThroughputMeter;
  /** Empty with one type (the worker's rate is its rate) or with prefetch off. */
  private readonly byType = new Map<string, ThroughputMeter>();
  /** Reused by each reading of perType(). */
  private readonly sizes = new Map<string, number>();

  constructor(
    private readonly ceiling: number,
    types: readonly string[],
    now: () => number = Date.now,
  ) {
    this.all = new ThroughputMeter(now);
    if (ceiling > 0 && types.length > 1) for (const type of types) this.byType.set(type, new ThroughputMeter(now, TYPE_BURST_JOBS));
  }

  /** A job of `type` has finished. */
  record(type: string): void {
    this.all.record();
    this.byType.get(type)?.record();
  }

  /** The whole buffer's size now. */
  total(): number {
    return Math.min(this.ceiling, Math.round(this.all.perSecond() / PER_BUFFER));
  }

  /** Each type's part now, at most; undefined when the worker handles one type. */
  perType(): ReadonlyMap<string, number> | undefined {
    if (this.byType.size === 0) return undefined;
    for (const [type, meter] of this.byType) this.sizes.set(type, this.part(meter));
    return this.sizes;
  }

  /** What the buffer can fill to now: the total, or the types' parts together if less. */
  reachable(): number {
    const total = this.total();
    if (this.byType.size === 0 || total === 0) return total;
    let parts = 0;
    for (const meter of this.byType.values()) parts += this.part(meter);
    return Math.min(total, parts);
  }

  /** Rounded down: a type's job is kept waiting only if one of its slots frees within about 100 ms. */
  private part(meter: ThroughputMeter): number {
    return Math.min(this.ceiling, Math.floor(meter.perSecond() / PER_BUFFER));
  }
}
