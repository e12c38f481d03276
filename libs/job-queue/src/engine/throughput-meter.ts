import { monotonicNow } from '../base/monotonic-clock.js';

/** Buckets and their width: the rate is read over the last quarter second, so it reacts fast. */
const BUCKETS = 5;
const BUCKET_MS = 50;
const WINDOW_MS = BUCKETS * BUCKET_MS;

/**
 * Jobs finished per second over the last quarter second, which sizes the prefetch. A burst younger
 * than the window is measured over its own age (at least one bucket), so the buffer grows with it
 * at once. See docs/decisions/0005-adaptive-prefetch.md.
 */
export class ThroughputMeter {
  private readonly buckets = new Array<number>(BUCKETS).fill(0);
  private bucketStart = 0;
  private current = 0;
  /** Jobs in the buckets. */
  private total = 0;
  /** When the first job went into an empty window. */
  private activeSince = 0;

  constructor(private readonly now: () => number = monotonicNow) {}

  record(): void {
    const now = this.advance();
    if (this.total === 0) this.activeSince = now;
    this.buckets[this.current]++;
    this.total++;
  }

  perSecond(): number {
    const now = this.advance();
    if (this.total === 0) return 0;
    // The buckets cover the four whole ones behind the current one, plus the current one so far.
    const covered = WINDOW_MS - BUCKET_MS + (now - this.bucketStart);
    return (this.total * 1_000) / Math.max(BUCKET_MS, Math.min(covered, now - this.activeSince));
  }

  /** Moves the window to now, emptying the buckets it leaves behind; returns now. */
  private advance(): number {
    const now = this.now();
    if (this.bucketStart === 0) this.bucketStart = now;
    let steps = Math.floor((now - this.bucketStart) / BUCKET_MS);
    if (steps <= 0) return now;
    this.bucketStart += steps * BUCKET_MS;
    steps = Math.min(steps, BUCKETS);
    for (let i = 0; i < steps; i++) {
      this.current = (this.current + 1) % BUCKETS;
      this.total -= this.buckets[this.current];
      this.buckets[this.current] = 0;
    }
    return now;
  }
}
