import { drainTimeoutMs, enqueueInChunks, stopAndVerify, waitUntilDrained } from './run-helpers.js';
import type { Scenario } from './scenario.js';
import type { MemoryReading } from '../workers/worker-protocol.js';

const MB = 1024 * 1024;
/** The N jobs run in this many legs, with a reading after each. */
const QUARTERS = 4;

/**
 * Worker process memory (RSS after a full GC) right after boot, after a warm-up batch, and after
 * each quarter of N more jobs. The target is the growth over those N jobs: what a running worker
 * gains per job worked, which a leak would make grow with N. The quarters tell a leak (growth in
 * every quarter) from a one-off fill (growth in the first only). Growth from boot is shown too.
 *
 * Most of the growth is such a fill: V8 commits its young generation at full size (two 16 MB
 * semi-spaces) but its pages only become resident as allocation first sweeps through them, which
 * the warm-up does not finish. Run with --max-semi-space-size=1 (BENCH_WORKER_NODE_ARGS), the
 * growth over 200,000 jobs fell from about 20 MB to about 5.
 */
export const workerRssScenario: Scenario = {
  name: 'worker-rss',
  describe: (sizes) =>
    `worker RSS: one worker process at concurrency ${sizes.rssConcurrency} runs ${sizes.rssJobs.toLocaleString('en-US')} jobs ` +
    `(enqueued in bulk chunks of ${sizes.rssEnqueueChunk.toLocaleString('en-US')}); ` +
    `after ${sizes.rssWarmupJobs.toLocaleString('en-US')} warm-up jobs; RSS after GC at boot, after the warm-up, at the end`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    const [worker] = await scope.workers(1, {
      adapter: adapter.name,
      url: db.url,
      concurrency: sizes.rssConcurrency,
      expectedJobs: sizes.rssWarmupJobs + sizes.rssJobs,
      reportStarts: false,
    });
    const boot = worker.boot;
    await enqueueInChunks(producer, 0, sizes.rssWarmupJobs, sizes.rssEnqueueChunk);
    await waitUntilDrained(adapter, db, drainTimeoutMs(sizes.rssWarmupJobs), 250);
    const warm = await worker.memory();
    const started = Date.now();
    // Read after each quarter too: a leak grows with every quarter, a one-off fill only at first.
    const quarters: MemoryReading[] = [];
    for (let q = 0; q < QUARTERS; q++) {
      const from = Math.round((sizes.rssJobs * q) / QUARTERS);
      const to = Math.round((sizes.rssJobs * (q + 1)) / QUARTERS);
      await enqueueInChunks(producer, sizes.rssWarmupJobs + from, to - from, sizes.rssEnqueueChunk);
      await waitUntilDrained(adapter, db, drainTimeoutMs(to - from), 250);
      quarters.push(await worker.memory());
    }
    const seconds = (Date.now() - started) / 1000;
    const end = quarters[quarters.length - 1];
    const lastQuarter = end.rss - quarters[quarters.length - 2].rss;
    const check = await stopAndVerify(adapter, db, context, [worker], sizes.rssWarmupJobs + sizes.rssJobs);
    const trail = (read: (m: MemoryReading) => number | null) => [boot, warm, end].map((m) => mb(read(m))).join(' → ');
    context.log(
      `    RSS after GC (MB): boot ${mb(boot.rss)}, after the warm-up ${mb(warm.rss)}, ` +
        `after each ${(sizes.rssJobs / QUARTERS).toLocaleString('en-US')} more ${quarters.map((m) => mb(m.rss)).join(', ')}`,
    );
    context.log(
      `    boot → warm-up → end (MB): file-backed RSS ${trail((m) => m.rssFile)}; V8 heap used ${trail((m) => m.heapUsed)}, ` +
        `committed ${trail((m) => m.heapTotal)}, of it young generation ${trail((m) => m.youngGeneration)}; external ${trail((m) => m.external)}`,
    );
    return {
      measurements: [
        { key: 'rss.boot', label: 'worker RSS at boot', unit: 'MB', value: boot.rss / MB, better: 'lower' },
        { key: 'rss.warm', label: `  after ${sizes.rssWarmupJobs.toLocaleString('en-US')} warm-up jobs`, unit: 'MB', value: warm.rss / MB, better: 'lower' },
        { key: 'rss.end', label: `  after ${sizes.rssJobs.toLocaleString('en-US')} more jobs`, unit: 'MB', value: end.rss / MB, better: 'lower' },
        { key: 'rss.growth', label: `  growth over the ${sizes.rssJobs.toLocaleString('en-US')} jobs`, unit: 'MB', value: (end.rss - warm.rss) / MB, better: 'lower' },
        { key: 'rss.lastQuarterGrowth', label: `  growth over the last ${(sizes.rssJobs / QUARTERS).toLocaleString('en-US')}`, unit: 'MB', value: lastQuarter / MB, better: 'lower' },
        { key: 'rss.growthFromBoot', label: '  growth from boot', unit: 'MB', value: (end.rss - boot.rss) / MB, better: 'lower' },
        { key: 'rss.heapGrowth', label: '  heap used growth from boot', unit: 'MB', value: (end.heapUsed - boot.heapUsed) / MB, better: 'lower' },
      ],
      checks: [{ run: 'worker RSS', result: check }],
      details: { boot, warm, quarters, end, jobs: sizes.rssJobs, drainSeconds: seconds, throughput: sizes.rssJobs / seconds },
    };
  },
};

function mb(bytes: number | null): string {
  return bytes === null ? '?' : (bytes / MB).toFixed(1);
}
