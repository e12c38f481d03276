/** Did every job run exactly once? Runs counted per seq in the worker processes, plus the database's view. */
export interface ExactlyOnceResult {
  ok: boolean;
  expected: number;
  /** Handler runs seen in total. */
  runs: number;
  /** Jobs that never ran. */
  missing: number;
  /** Jobs that ran more than once. */
  duplicated: number;
  /** Runs of jobs that were not part of this scenario. */
  unexpected: number;
  /** What the database shows wrong, or null. */
  database: string | null;
}

export function checkExactlyOnce(
  expected: number,
  reports: ReadonlyArray<{ counts: Uint8Array; outOfRange: number }>,
  database: string | null,
): ExactlyOnceResult {
  const total = new Uint16Array(expected);
  let unexpected = 0;
  for (const { counts, outOfRange } of reports) {
    unexpected += outOfRange;
    for (let seq = 0; seq < expected; seq++) total[seq] += counts[seq] ?? 0;
  }
  let runs = unexpected;
  let missing = 0;
  let duplicated = 0;
  for (let seq = 0; seq < expected; seq++) {
    runs += total[seq];
    if (total[seq] === 0) missing++;
    else if (total[seq] > 1) duplicated++;
  }
  const ok = missing === 0 && duplicated === 0 && unexpected === 0 && database === null;
  return { ok, expected, runs, missing, duplicated, unexpected, database };
}

export function describeExactlyOnce(result: ExactlyOnceResult): string {
  if (result.ok) return `ok (${result.expected} jobs, each ran once)`;
  const parts = [];
  if (result.missing) parts.push(`${result.missing} never ran`);
  if (result.duplicated) parts.push(`${result.duplicated} ran more than once`);
  if (result.unexpected) parts.push(`${result.unexpected} unexpected runs`);
  if (result.database) parts.push(`database: ${result.database}`);
  return `FAILED: ${parts.join('; ')}`;
}
