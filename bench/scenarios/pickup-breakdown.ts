import { msBetween } from '../clock.js';
import { percentile } from '../stats.js';
import type { PickupTrace } from '../workers/sql-trace.js';

const LEGS = [
  'enqueue → NOTIFY received',
  'NOTIFY → last statement sent',
  'last statement round trip',
  'statement done → handler start',
] as const;

/**
 * Diagnostic (BENCH_TRACE_SQL=1): the median and p99 of each leg of enqueue → handler start, from the
 * worker's view of the last NOTIFY it received and the last statement that completed before the
 * handler started (for a worker that claims on NOTIFY, the claim).
 */
export function describePickupTraces(
  sentAt: readonly bigint[],
  startedAt: ReadonlyMap<number, bigint>,
  traces: ReadonlyMap<number, PickupTrace>,
): string {
  const legs = new Map<(typeof LEGS)[number], number[]>(LEGS.map((leg) => [leg, []]));
  const statements = new Map<string, number>();
  for (const [seq, trace] of traces) {
    const started = startedAt.get(seq)!;
    if (!trace.statementSentAt || !trace.statementDoneAt) continue;
    const statementSent = BigInt(trace.statementSentAt);
    const statementDone = BigInt(trace.statementDoneAt);
    const statement = trace.statement ?? '?';
    statements.set(statement, (statements.get(statement) ?? 0) + 1);
    if (trace.notifiedAt) {
      const notified = BigInt(trace.notifiedAt);
      if (notified >= sentAt[seq] && notified <= statementSent) {
        legs.get('enqueue → NOTIFY received')!.push(msBetween(sentAt[seq], notified));
        legs.get('NOTIFY → last statement sent')!.push(msBetween(notified, statementSent));
      }
    }
    legs.get('last statement round trip')!.push(msBetween(statementSent, statementDone));
    legs.get('statement done → handler start')!.push(msBetween(statementDone, started));
  }
  const [top, topCount] = [...statements.entries()].sort((a, b) => b[1] - a[1])[0] ?? ['none', 0];
  return [
    `    pickup breakdown (last statement before start: ${top} in ${topCount} of ${traces.size}):`,
    ...[...legs].map(
      ([leg, values]) =>
        `      ${leg.padEnd(32)} p50 ${percentile(values, 50).toFixed(2)} ms, p99 ${percentile(values, 99).toFixed(2)} ms (${values.length} samples)`,
    ),
  ].join('\n');
}
