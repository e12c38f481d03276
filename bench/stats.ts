/** Nearest-rank percentile of an unsorted sample (p in 0 … 100). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export interface LatencySummary {
  samples: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Milliseconds in, milliseconds out. */
export function summarise(values: readonly number[]): LatencySummary {
  return {
    samples: values.length,
    p50: percentile(values, 50),
    p95: percentile(values, 95),
    p99: percentile(values, 99),
    max: values.length ? Math.max(...values) : Number.NaN,
    mean: values.length ? values.reduce((sum, v) => sum + v, 0) / values.length : Number.NaN,
  };
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}
