import { msBetween, now } from '../clock.js';
import { percentile } from '../stats.js';
import { measurePacedLatency, stopAndVerify, waitUntilDrained } from './run-helpers.js';
import type { Measurement, RunCheck, Scenario } from './scenario.js';

const CONCURRENCY = 10;

/**
 * Does a table full of finished jobs slow the claim? Finished rows are added in one
 * INSERT … SELECT generate_series (then VACUUM ANALYZE, as autovacuum would, and a CHECKPOINT).
 * At each level single jobs are enqueued one at a time onto an idle worker; each sample is
 * enqueue → handler start, so it includes the claim statement. The level's p50 is reported, and
 * the ratio of the largest level to none.
 */
export const claimLatencyScenario: Scenario = {
  name: 'claim-latency',
  describe: (sizes) =>
    `claim latency: ${sizes.claimSamples} single jobs paced at ${sizes.claimRatePerSecond}/s onto an idle worker, with ` +
    `${sizes.claimRetained.map(formatCount).join(' / ')} finished rows retained; enqueue → handler start p50`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    const measurements: Measurement[] = [];
    const checks: RunCheck[] = [];
    const details: Record<string, unknown> = { retainedRows: adapter.retainedRowsNote };
    let retained = 0;
    let enqueued = 0;
    const p50s: number[] = [];
    for (const level of sizes.claimRetained) {
      if (level > retained) {
        const started = now();
        await adapter.retainFinished(db, level - retained);
        // Write the insert's dirty pages out now, so a checkpoint does not land on the measurement.
        await db.query('CHECKPOINT').catch(() => undefined);
        details[`insert+vacuum ${formatCount(level)} (s)`] = msBetween(started, now()) / 1000;
        context.log(`    retained ${formatCount(level)} finished rows in ${(msBetween(started, now()) / 1000).toFixed(1)} s`);
        retained = level;
      }
      const [worker] = await scope.workers(1, {
        adapter: adapter.name,
        url: db.url,
        concurrency: CONCURRENCY,
        expectedJobs: sizes.claimSamples,
        reportStarts: true,
      });
      const latencies = await measurePacedLatency(producer, worker, sizes.claimSamples, sizes.claimRatePerSecond, context.log);
      enqueued += sizes.claimSamples;
      await waitUntilDrained(adapter, db, 60_000);
      checks.push({
        run: `claim latency, ${formatCount(level)} retained`,
        result: await stopAndVerify(adapter, db, context, [worker], sizes.claimSamples, enqueued, retained),
      });
      const p50 = percentile(latencies, 50);
      p50s.push(p50);
      const label = `claim p50, ${formatCount(level)} retained`;
      measurements.push({ key: `claim.p50.${level}`, label, unit: 'ms', value: p50, better: 'lower' });
      details[`p95 ${formatCount(level)} (ms)`] = percentile(latencies, 95);
    }
    if (p50s.length > 1) {
      measurements.push({
        key: 'claim.ratio',
        label: `claim p50 ${formatCount(sizes.claimRetained.at(-1)!)} / ${formatCount(sizes.claimRetained[0])}`,
        unit: '×',
        value: p50s.at(-1)! / p50s[0],
        better: 'lower',
      });
    }
    return { measurements, checks, details };
  },
};

function formatCount(n: number): string {
  if (n >= 1_000_000) return `${n / 1_000_000}M`;
  if (n >= 1_000) return `${n / 1_000}k`;
  return String(n);
}
