/** Rows as aligned columns with a header, for people; `--json` prints the data instead. */
export function textTable(header: readonly string[], rows: ReadonlyArray<readonly unknown[]>): string {
  const cells = [header, ...rows.map((row) => row.map(cell))];
  const widths = header.map((_, column) => Math.max(...cells.map((row) => row[column]?.length ?? 0)));
  const line = (row: readonly string[]) =>
    row
      .map((text, column) => (column === row.length - 1 ? text : text.padEnd(widths[column])))
      .join('  ')
      .trimEnd();
  return [line(cells[0]), line(widths.map((width) => '-'.repeat(width))), ...cells.slice(1).map(line)].join('\n');
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (value instanceof Date) return value.toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, 'Z');
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  // One line per row: a multi-line error keeps its first line.
  const first = text.split('\n')[0];
  return first.length > 80 ? `${first.slice(0, 77)}...` : first;
}
