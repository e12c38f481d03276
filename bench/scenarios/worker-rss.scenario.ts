import { drainTimeoutMs, enqueueInChunks, stopAndVerify, waitUntilDrained } from './run-helpers.js';
import type { Scenario } from './scenario.js';

const MB = 1024 * 1024;

/**
 * Worker process memory (RSS after a full GC) right after boot, after a warm-up batch, and after
 * N more jobs. The target is the growth over those N jobs: what a running worker gains per job
 * worked, which a leak would make grow with N. Growth from boot is shown too; it also holds the
 * one-off growth of a fresh process's first seconds of work (V8 enlarges its young generation to
 * its full size, about 30 MB, once allocation is steady; the reference pays the same).
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
    await enqueueInChunks(producer, sizes.rssWarmupJobs, sizes.rssJobs, sizes.rssEnqueueChunk);
    await waitUntilDrained(adapter, db, drainTimeoutMs(sizes.rssJobs), 250);
    const seconds = (Date.now() - started) / 1000;
    const end = await worker.memory();
    const check = await stopAndVerify(adapter, db, context, [worker], sizes.rssWarmupJobs + sizes.rssJobs);
    context.log(`    RSS ${mb(boot.rss)} → ${mb(warm.rss)} → ${mb(end.rss)} MB; heap ${mb(boot.heapUsed)} → ${mb(end.heapUsed)} MB`);
    return {
      measurements: [
        { key: 'rss.boot', label: 'worker RSS at boot', unit: 'MB', value: boot.rss / MB, better: 'lower' },
        { key: 'rss.warm', label: `  after ${sizes.rssWarmupJobs.toLocaleString('en-US')} warm-up jobs`, unit: 'MB', value: warm.rss / MB, better: 'lower' },
        { key: 'rss.end', label: `  after ${sizes.rssJobs.toLocaleString('en-US')} more jobs`, unit: 'MB', value: end.rss / MB, better: 'lower' },
        { key: 'rss.growth', label: `  growth over the ${sizes.rssJobs.toLocaleString('en-US')} jobs`, unit: 'MB', value: (end.rss - warm.rss) / MB, better: 'lower' },
        { key: 'rss.growthFromBoot', label: '  growth from boot', unit: 'MB', value: (end.rss - boot.rss) / MB, better: 'lower' },
        { key: 'rss.heapGrowth', label: '  heap used growth from boot', unit: 'MB', value: (end.heapUsed - boot.heapUsed) / MB, better: 'lower' },
      ],
      checks: [{ run: 'worker RSS', result: check }],
      details: { boot, warm, end, jobs: sizes.rssJobs, drainSeconds: seconds, throughput: sizes.rssJobs / seconds },
    };
  },
};

function mb(bytes: number): string {
  return (bytes / MB).toFixed(1);
}
