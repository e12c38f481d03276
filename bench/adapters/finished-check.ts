/** null when the only status present is `status`, with exactly `count` rows; else what was found. */
export function expectOnlyStatus(rows: ReadonlyArray<{ status: string; n: number }>, status: string, count: number): string | null {
  const found = rows.find((row) => row.status === status)?.n ?? 0;
  const others = rows.filter((row) => row.status !== status && row.n > 0);
  if (found === count && others.length === 0) return null;
  const seen = rows.map((row) => `${row.status}=${row.n}`).join(', ') || 'no rows';
  return `expected ${count} rows '${status}' and nothing else, found ${seen}`;
}
