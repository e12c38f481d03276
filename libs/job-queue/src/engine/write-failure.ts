/**
 * What a failed write's error says about trying again. PostgreSQL errors carry a SQLSTATE; errors
 * without one come from the connection itself (refused, reset, ended, timed out).
 */
function sqlState(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  // No SQLSTATE class starts with E; Node's system errors do (EPIPE, ECONNRESET).
  return typeof code === 'string' && /^[0-9A-DF-Z][0-9A-Z]{4}$/.test(code) ? code : null;
}

/**
 * The database refused the data itself (SQLSTATE class 22, data exception, or 54, a limit such as
 * nesting too deep): the same write fails the same way every time, so retrying it is pointless.
 */
export function isRefusedData(error: unknown): boolean {
  const state = sqlState(error);
  return state !== null && (state.startsWith('22') || state.startsWith('54'));
}

/**
 * A failure that may pass by itself: the connection (no SQLSTATE, or class 08), the server
 * shutting down or starting (57, but not 57014: a statement cancelled, by statement_timeout say,
 * would be again), out of resources such as connections (53), a system error (58), or a
 * transaction rolled back by a conflict (40).
 */
export function isTransient(error: unknown): boolean {
  const state = sqlState(error);
  return state === null || (['08', '40', '53', '57', '58'].includes(state.slice(0, 2)) && state !== '57014');
}
