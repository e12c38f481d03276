import { describe, expect, it } from 'vitest';
import { isRefusedData, isTransient } from './write-failure.js';

const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { code, severity: 'ERROR' });
const systemError = (code: string) => Object.assign(new Error(`socket ${code}`), { code });

describe('write failures', () => {
  it('counts connection trouble as transient: no SQLSTATE, Node socket errors, classes 08, 40, 53, 57 and 58', () => {
    for (const error of [new Error('Connection terminated unexpectedly'), systemError('EPIPE'), systemError('ECONNRESET')]) {
      expect(isTransient(error)).toBe(true);
    }
    for (const code of ['08006', '40001', '40P01', '53300', '57P01', '57P03', '58030']) expect(isTransient(pgError(code))).toBe(true);
  });

  it('does not count a cancelled statement (statement_timeout), refused data or a bug as transient', () => {
    for (const code of ['57014', '22P02', '54001', '42601', '23505']) expect(isTransient(pgError(code))).toBe(false);
  });

  it('calls data exceptions (22) and program limits (54) refused data, and nothing else', () => {
    expect(isRefusedData(pgError('22P05'))).toBe(true);
    expect(isRefusedData(pgError('54001'))).toBe(true);
    for (const error of [pgError('08006'), pgError('42601'), systemError('EPIPE'), new Error('no code'), undefined, null]) {
      expect(isRefusedData(error)).toBe(false);
    }
  });
});
