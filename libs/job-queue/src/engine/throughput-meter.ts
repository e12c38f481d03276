/** Buckets and their width: the rate is read over the last quarter second, so it reacts fast. */
const BUCKETS = 5;
const BUCKET_MS = 50;

/**
 * Jobs finished per second, measured over the last 250 ms: what the worker uses to size its
 * prefetch to about 100 ms of work, so a backlog is worked in big batches while slow jobs are not
 * hoarded by one worker.
 */
export class ThroughputMeter {
  private readonly buckets = new Array<number>(BUCKETS).fill(0);
  private bucketStart = 0;
  private current = 0;

  constructor(private readonly now: () => number = Date.now) {}

  record(): void {
    this.advance();
    this.buckets[this.current]++;
  }

  perSecond(): number {
    this.advance();
    return (this.buckets.reduce((sum, n) => sum + n, 0) * 1_000) / (BUCKETS * BUCKET_MS);
  }

  private advance(): void {
    const now = this.now();
    if (this.bucketStart === 0) this.bucketStart = now;
    let steps = Math.floor((now - this.bucketStart) / BUCKET_MS);
    if (steps <= 0) return;
    this.bucketStart += steps * BUCKET_MS;
    steps = Math.min(steps, BUCKETS);
    for (let i = 0; i < steps; i++) {
      this.current = (this.current + 1) % BUCKETS;
      this.buckets[this.current] = 0;
    }
  }
}
