import { describe, expect, it } from 'vitest';
import { idArray, leaseTokens, resultsById } from './fenced-batch.js';
import type { Lease } from './job.store.js';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';
const C = '00000000-0000-4000-8000-00000000000c';
const leases = (tokens: string[]): Lease[] => tokens.map((leaseToken, i) => ({ id: String(100 + i), leaseToken }));

/** What the statements do with the two parameters: each lease is matched against this token. */
function tokenFor(lease: Lease, [others, usual]: [string, string]): string {
  return (JSON.parse(others) as Record<string, string>)[lease.id] ?? usual;
}

describe('fenced batch parameters', () => {
  it('one claim’s jobs: its token is the usual one and nothing is mapped', () => {
    expect(leaseTokens(leases([A, A, A]))).toEqual(['{}', A]);
  });

  it('two claims’ jobs: the more common token is the usual one, whichever comes first', () => {
    expect(leaseTokens(leases([A, B, B]))).toEqual(['{"100":"' + A + '"}', B]);
    expect(leaseTokens(leases([B, B, A, A, A]))).toEqual(['{"100":"' + B + '","101":"' + B + '"}', A]);
  });

  it('any mix of tokens: every lease is matched against its own token, and the map is valid JSON', () => {
    for (const tokens of [[A, B, C], [A, B, C, C, B, A], [C, A, B, A, C, B, B], [A], [B, A]]) {
      const batch = leases(tokens);
      const parameters = leaseTokens(batch);
      expect(tokens).toContain(parameters[1]);
      for (const lease of batch) expect(tokenFor(lease, parameters)).toBe(lease.leaseToken);
    }
  });

  it('ids as a bigint[] literal, and results only for the jobs that returned one', () => {
    expect(idArray(leases([A, B]))).toBe('{100,101}');
    const [first, second] = leases([A, A]);
    const results = resultsById([
      { lease: first, resultJson: '{"sent":true}' },
      { lease: second, resultJson: 'null' },
    ]);
    expect(JSON.parse(results)).toEqual({ 100: { sent: true } });
  });
});
