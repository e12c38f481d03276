import pg from 'pg';
import { QueryFailedError, QueryRunnerAlreadyReleasedError } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import { StoreRefusedDataError } from '../errors/store-refused-data.error.js';
import { StoreUnavailableError } from '../errors/store-unavailable.error.js';
import { isReadOnlyServer, isRefusedData, isTransactionConflict, isUnavailable, sqlStateOf, toStoreError } from './driver-errors.js';

/** An error as node-postgres builds it from the server's ErrorResponse. */
const pgError = (code: string, message = `pg ${code}`) => Object.assign(new pg.DatabaseError(message, 0, 'error'), { code, severity: 'ERROR' });
const systemError = (code: string) => Object.assign(new Error(`socket ${code}`), { code });
/** The same errors as TypeORM's query runner throws them. */
const wrapped = (driverError: Error) => new QueryFailedError('SELECT 1', [], driverError);

describe('driver errors', () => {
  it('reads the SQLSTATE from the error, or from the driver error TypeORM wraps', () => {
    expect(sqlStateOf(pgError('22P02'))).toBe('22P02');
    expect(sqlStateOf(wrapped(pgError('22P02')))).toBe('22P02');
    expect(sqlStateOf(Object.assign(new Error('wrapped elsewhere'), { driverError: pgError('08006') }))).toBe('08006');
    for (const error of [systemError('EPIPE'), new Error('no code'), Object.assign(new Error('x'), { code: 42 }), undefined, null]) {
      expect(sqlStateOf(error)).toBeNull();
    }
  });

  it('tells a transaction a conflict rolled back (class 40), bare or inside the store error', () => {
    for (const code of ['40P01', '40001']) {
      expect(isTransactionConflict(pgError(code))).toBe(true);
      expect(isTransactionConflict(toStoreError(pgError(code)))).toBe(true);
    }
    for (const error of [pgError('08006'), pgError('23505'), systemError('ECONNRESET'), toStoreError(pgError('57P01')), new Error('x')]) {
      expect(isTransactionConflict(error)).toBe(false);
    }
  });

  it('counts connection trouble as unavailable: no SQLSTATE, Node socket errors, classes 08, 40, 53, 57 and 58', () => {
    for (const error of [new Error('Connection terminated unexpectedly'), systemError('EPIPE'), systemError('ECONNRESET')]) {
      expect(isUnavailable(error)).toBe(true);
      expect(isUnavailable(wrapped(error))).toBe(true);
    }
    for (const code of ['08006', '40001', '40P01', '53300', '57P01', '57P03', '58030']) {
      expect(isUnavailable(pgError(code))).toBe(true);
      expect(isUnavailable(wrapped(pgError(code)))).toBe(true);
    }
  });

  it('counts a write refused by a server that takes none (25006: a standby, a failover under way) as unavailable, and only that code of its class', () => {
    expect(isUnavailable(pgError('25006'))).toBe(true);
    expect(isUnavailable(wrapped(pgError('25006')))).toBe(true);
    expect(isReadOnlyServer(pgError('25006'))).toBe(true);
    expect(isReadOnlyServer(wrapped(pgError('25006')))).toBe(true);
    for (const error of [pgError('25P02'), pgError('08006'), new Error('no code'), undefined]) expect(isReadOnlyServer(error)).toBe(false);
  });

  it('does not count a cancelled statement (statement_timeout), refused data or a bug as unavailable', () => {
    for (const code of ['57014', '22P02', '54001', '42601', '23505', '25P02']) {
      expect(isUnavailable(pgError(code))).toBe(false);
      expect(isUnavailable(wrapped(pgError(code)))).toBe(false);
    }
  });

  it('calls data exceptions (22) and program limits (54) refused data, and nothing else', () => {
    expect(isRefusedData(pgError('22P05'))).toBe(true);
    expect(isRefusedData(pgError('54001'))).toBe(true);
    expect(isRefusedData(wrapped(pgError('22003')))).toBe(true);
    for (const error of [pgError('08006'), pgError('42601'), pgError('57014'), systemError('EPIPE'), new Error('no code'), undefined, null]) {
      expect(isRefusedData(error)).toBe(false);
    }
  });

  it('translates unavailable and refused data into the typed errors, the driver error as cause and in the message', () => {
    for (const driver of [new Error('Connection terminated unexpectedly'), systemError('ECONNRESET'), pgError('57P01', 'terminating connection due to administrator command')]) {
      for (const error of [driver, wrapped(driver)]) {
        const translated = toStoreError(error);
        expect(translated).toBeInstanceOf(StoreUnavailableError);
        expect((translated as StoreUnavailableError).code).toBe('JOB_STORE_UNAVAILABLE');
        expect((translated as Error).cause).toBe(error);
        expect((translated as Error).message).toContain(driver.message);
      }
    }
    const refused = pgError('22P05', 'unsupported Unicode escape sequence');
    for (const error of [refused, wrapped(refused)]) {
      const translated = toStoreError(error);
      expect(translated).toBeInstanceOf(StoreRefusedDataError);
      expect((translated as StoreRefusedDataError).code).toBe('JOB_STORE_REFUSED_DATA');
      expect((translated as Error).cause).toBe(error);
      expect((translated as Error).message).toContain('unsupported Unicode escape sequence');
    }
  });

  it('leaves every other error as it is: other SQLSTATEs, a cancelled statement, its own errors, TypeORM’s own', () => {
    const unchanged = [
      pgError('23505'),
      wrapped(pgError('42601')),
      pgError('57014'),
      wrapped(pgError('57014')),
      new InvalidJobError('payload', 'is wrong'),
      new StoreUnavailableError(new Error('already translated')),
      new StoreRefusedDataError(pgError('22P02')),
      new QueryRunnerAlreadyReleasedError(),
    ];
    for (const error of unchanged) expect(toStoreError(error)).toBe(error);
  });
});
