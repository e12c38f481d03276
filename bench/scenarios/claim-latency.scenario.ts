import { msBetween, now } from '../clock.js';
import { percentile } from '../stats.js';
import { measurePacedLatency, stopAndVerify, waitUntilDrained } from './run-helpers.js';
import type { Measurement, RunCheck, Scenario } from './scenario.js';

const CONCURRENCY = 10;
/** Each level's samples are taken in this many blocks, alternating with blocks on the baseline. */
const BLOCKS = 4;

/**
 * Does a table full of finished jobs slow the claim? Finished rows are added in one
 * INSERT … SELECT generate_series (then VACUUM ANALYZE, as autovacuum would, and a CHECKPOINT).
 * At each level single jobs are enqueued one at a time onto an idle worker; each sample is
 * enqueue → handler start, so it includes the claim statement. The level's p50 is reported.
 *
 * The ratio compares the largest level with none measured alongside it: a second database that
 * retains no finished rows (beyond the samples' own jobs, at most a few hundred) has its own idle
 * worker, and the level's samples are taken in blocks that
 * alternate with as many blocks there. A p50 of one or two ms is mostly commit flushes, which
 * drift on a shared machine; compared with a "none" measured minutes earlier, the ratio of one run
 * moved between 0.6× and 1.5× with nothing changed.
 */
export const claimLatencyScenario: Scenario = {
  name: 'claim-latency',
  describe: (sizes) =>
    `claim latency: ${sizes.claimSamples} single jobs per level paced at ${sizes.claimRatePerSecond}/s onto an idle worker, with ` +
    `${sizes.claimRetained.map(formatCount).join(' / ')} finished rows retained, in ${BLOCKS} blocks alternating with as many on a ` +
    `second database retaining none; enqueue → handler start p50, the ratio against the none measured alongside`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const baseline = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    const baselineProducer = await scope.producer(adapter, baseline);
    const measurements: Measurement[] = [];
    const checks: RunCheck[] = [];
    const details: Record<string, unknown> = { retainedRows: adapter.retainedRowsNote };
    let retained = 0;
    let enqueued = 0;
    let ratio: number | null = null;
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
      const config = { adapter: adapter.name, concurrency: CONCURRENCY, expectedJobs: sizes.claimSamples, reportStarts: true };
      const [worker] = await scope.workers(1, { ...config, url: db.url });
      const [baselineWorker] = await scope.workers(1, { ...config, url: baseline.url });
      const latencies: number[] = [];
      const baselineLatencies: number[] = [];
      const perBlock = Math.ceil(sizes.claimSamples / BLOCKS);
      for (let block = 0; block * perBlock < sizes.claimSamples; block++) {
        const from = block * perBlock;
        const count = Math.min(perBlock, sizes.claimSamples - from);
        const sides = [
          { into: latencies, producer, worker },
          { into: baselineLatencies, producer: baselineProducer, worker: baselineWorker },
        ];
        if (block % 2 === 1) sides.reverse();
        for (const side of sides) {
          side.into.push(...(await measurePacedLatency(side.producer, side.worker, count, sizes.claimRatePerSecond, context.log, from)));
        }
      }
      enqueued += sizes.claimSamples;
      await waitUntilDrained(adapter, db, 60_000);
      await waitUntilDrained(adapter, baseline, 60_000);
      checks.push({
        run: `claim latency, ${formatCount(level)} retained`,
        result: await stopAndVerify(adapter, db, context, [worker], sizes.claimSamples, enqueued, retained),
      });
      checks.push({
        run: `claim latency, none retained alongside ${formatCount(level)}`,
        result: await stopAndVerify(adapter, baseline, context, [baselineWorker], sizes.claimSamples, enqueued, 0),
      });
      const p50 = percentile(latencies, 50);
      const baselineP50 = percentile(baselineLatencies, 50);
      ratio = p50 / baselineP50;
      const label = `claim p50, ${formatCount(level)} retained`;
      measurements.push({ key: `claim.p50.${level}`, label, unit: 'ms', value: p50, better: 'lower' });
      details[`p95 ${formatCount(level)} (ms)`] = percentile(latencies, 95);
      details[`p50 none alongside ${formatCount(level)} (ms)`] = baselineP50;
    }
    if (sizes.claimRetained.length > 1 && ratio !== null) {
      measurements.push({
        key: 'claim.ratio',
        label: `claim p50 ${formatCount(sizes.claimRetained.at(-1)!)} / ${formatCount(sizes.claimRetained[0])} alongside`,
        unit: '×',
        value: ratio,
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
