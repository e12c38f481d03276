/**
 * Pickup latencies counted in buckets about 2 % wide (bucket = round(50 · ln µs)), so a worker
 * process doing tens of thousands of jobs a second keeps a minute of them in a few KB and sends
 * them over IPC as [bucket, count] pairs. Percentiles come back as the bucket's value: within 1 %.
 */
const PER_E = 50;
const BUCKETS = 1_024;

export type Buckets = Array<[number, number]>;

export class PickupHistogram {
  private counts = new Uint32Array(BUCKETS);

  record(latencyUs: number): void {
    const bucket = latencyUs <= 1 ? 0 : Math.min(BUCKETS - 1, Math.round(PER_E * Math.log(latencyUs)));
    this.counts[bucket]++;
  }

  /** The buckets counted since the last call, and a fresh start. */
  take(): Buckets {
    const taken: Buckets = [];
    for (let i = 0; i < BUCKETS; i++) if (this.counts[i] > 0) taken.push([i, this.counts[i]]);
    this.counts = new Uint32Array(BUCKETS);
    return taken;
  }
}

/** Nearest-rank percentile (p in 0 … 100) of merged buckets, in ms; NaN when empty. */
export function bucketPercentile(merged: readonly Buckets[], p: number): number {
  const counts = new Map<number, number>();
  for (const buckets of merged) for (const [bucket, n] of buckets) counts.set(bucket, (counts.get(bucket) ?? 0) + n);
  const sorted = [...counts].sort((a, b) => a[0] - b[0]);
  const total = sorted.reduce((sum, [, n]) => sum + n, 0);
  if (total === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * total));
  let seen = 0;
  for (const [bucket, n] of sorted) {
    seen += n;
    if (seen >= rank) return Math.exp(bucket / PER_E) / 1000;
  }
  return Number.NaN;
}

/** Jobs counted in merged buckets. */
export function bucketTotal(merged: readonly Buckets[]): number {
  return merged.reduce((sum, buckets) => sum + buckets.reduce((s, [, n]) => s + n, 0), 0);
}

/** Microseconds on the monotonic clock: the same clock in every process on this machine. */
export const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);
