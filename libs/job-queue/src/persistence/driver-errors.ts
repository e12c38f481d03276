import { QueryFailedError, TypeORMError } from 'typeorm';
import { JobQueueError } from '../errors/job-queue.error.js';
import { StoreRefusedDataError } from '../errors/store-refused-data.error.js';
import { StoreUnavailableError } from '../errors/store-unavailable.error.js';

/** A five-character SQLSTATE. No class starts with E, which Node's system errors do (EPIPE, ECONNRESET). */
const SQLSTATE = /^[0-9A-DF-Z][0-9A-Z]{4}$/;

/** Classes of a failure that may pass by itself (see isUnavailable). */
const PASSING_CLASSES = ['08', '40', '53', '57', '58'];

/** A statement cancelled (statement_timeout, a cancel request): it would be cancelled again. */
const QUERY_CANCELED = '57014';

/** A write on a server that takes none: a standby (before or without promotion), or a primary set read-only. */
const READ_ONLY_SQL_TRANSACTION = '25006';

/**
 * The SQLSTATE of a driver error, or null when it has none (the connection itself failed). TypeORM
 * wraps the driver's error in a QueryFailedError, which copies its `code` and keeps it as
 * `driverError`.
 */
export function sqlStateOf(error: unknown): string | null {
  for (const candidate of [error, (error as { driverError?: unknown } | null)?.driverError]) {
    const code = (candidate as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && SQLSTATE.test(code)) return code;
  }
  return null;
}

/**
 * The database refused the data itself (class 22, data exception, or 54, a limit such as nesting
 * too deep): the same write fails the same way every time.
 */
export function isRefusedData(error: unknown): boolean {
  const state = sqlStateOf(error);
  return state !== null && (state.startsWith('22') || state.startsWith('54'));
}

/**
 * A driver error that may pass by itself: the connection (no SQLSTATE: refused, reset, ended, timed
 * out; or class 08), the server shutting down or starting (57, but not a cancelled statement), out
 * of resources such as connections (53), a system error (58), a transaction rolled back by a
 * conflict (40), or a server that takes no writes (25006, as during a failover; see isReadOnlyServer).
 * Only for errors that came out of the driver: any other error has no SQLSTATE either.
 */
export function isUnavailable(error: unknown): boolean {
  const state = sqlStateOf(error);
  return state === null || state === READ_ONLY_SQL_TRANSACTION || (PASSING_CLASSES.includes(state.slice(0, 2)) && state !== QUERY_CANCELED);
}

/**
 * The transaction was rolled back by a conflict with another (class 40: a deadlock, a
 * serialization failure): run again, it usually goes through. `error` is the driver's error or
 * the store error wrapping it (`cause`).
 */
export function isTransactionConflict(error: unknown): boolean {
  const state = sqlStateOf(error) ?? sqlStateOf((error as { cause?: unknown } | null)?.cause);
  return state !== null && state.startsWith('40');
}

/**
 * The server refused a write because it takes none (25006): the driver's error, or a server
 * message (ErrorResponse) as node-postgres reports it. Such a connection stays on that server, so
 * it is closed rather than pooled: a new one goes where the address now leads (the new primary).
 */
export function isReadOnlyServer(error: unknown): boolean {
  return sqlStateOf(error) === READ_ONLY_SQL_TRANSACTION;
}

/**
 * An error that came out of a pg or TypeORM call, as the store reports it: StoreUnavailableError
 * or StoreRefusedDataError (the driver's error as `cause`), or the error unchanged when it is
 * neither (a constraint violated, a syntax error). Our own errors pass unchanged, and so do
 * TypeORM's own (a query runner already released, say), which say nothing about the database.
 * Where the store calls it: docs/decisions/0040-store-typed-errors.md.
 */
export function toStoreError(error: unknown): unknown {
  if (error instanceof JobQueueError || (error instanceof TypeORMError && !(error instanceof QueryFailedError))) return error;
  if (isRefusedData(error)) return new StoreRefusedDataError(error);
  if (isUnavailable(error)) return new StoreUnavailableError(error);
  return error;
}
