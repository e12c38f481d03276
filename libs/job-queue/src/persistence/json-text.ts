/**
 * True when JSON text holds an escaped NUL (\u0000), which PostgreSQL jsonb refuses. An escape is
 * a backslash run of odd length before "u0000"; "\\u0000" is a literal backslash and is fine.
 */
export function jsonHasNul(json: string): boolean {
  return /(?<!\\)(?:\\\\)*\\u0000/.test(json);
}
