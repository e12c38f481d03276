/**
 * Jobs finished per second over the last second, in ten 100 ms buckets: what the worker uses to
 * size its prefetch to about 100 ms of work, so slow jobs are not hoarded by one worker.
 */
export class ThroughputMeter {
  private readonly buckets = new Array<number>(10).fill(0);
  private bucketStart = 0;
  private current = 0;

  constructor(private readonly now: () => number = Date.now) {}

  record(): void {
    this.advance();
    this.buckets[this.current]++;
  }

  perSecond(): number {
    this.advance();
    return this.buckets.reduce((sum, n) => sum + n, 0);
  }

  private advance(): void {
    const now = this.now();
    if (this.bucketStart === 0) this.bucketStart = now;
    let steps = Math.floor((now - this.bucketStart) / 100);
    if (steps <= 0) return;
    this.bucketStart += steps * 100;
    steps = Math.min(steps, this.buckets.length);
    for (let i = 0; i < steps; i++) {
      this.current = (this.current + 1) % this.buckets.length;
      this.buckets[this.current] = 0;
    }
  }
}
