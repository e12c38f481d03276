import { drainTimeoutMs, enqueueInChunks, stopAndVerify, waitUntilDrained } from './run-helpers.js';
import type { Scenario } from './scenario.js';

const MB = 1024 * 1024;

/**
 * Worker process memory (RSS after a full GC) right after boot, after a warm-up batch, and after
 * all N jobs. Growth from boot is the target; growth after warm-up shows leaks without JIT and
 * pool warm-up.
 */
export const workerRssScenario: Scenario = {
  name: 'worker-rss',
  describe: (sizes) =>
    `worker RSS: one worker process at concurrency ${sizes.rssConcurrency} runs ${sizes.rssJobs.toLocaleString('en-US')} jobs ` +
    `(enqueued in bulk chunks of ${sizes.rssEnqueueChunk.toLocaleString('en-US')}); ` +
    `RSS after GC at boot, after ${sizes.rssWarmupJobs.toLocaleString('en-US')}, at the end`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    const [worker] = await scope.workers(1, {
      adapter: adapter.name,
      url: db.url,
      concurrency: sizes.rssConcurrency,
      expectedJobs: sizes.rssJobs,
      reportStarts: false,
    });
    const boot = worker.boot;
    await enqueueInChunks(producer, 0, sizes.rssWarmupJobs, sizes.rssEnqueueChunk);
    await waitUntilDrained(adapter, db, drainTimeoutMs(sizes.rssWarmupJobs), 250);
    const warm = await worker.memory();
    const started = Date.now();
    await enqueueInChunks(producer, sizes.rssWarmupJobs, sizes.rssJobs - sizes.rssWarmupJobs, sizes.rssEnqueueChunk);
    await waitUntilDrained(adapter, db, drainTimeoutMs(sizes.rssJobs), 250);
    const seconds = (Date.now() - started) / 1000;
    const end = await worker.memory();
    const check = await stopAndVerify(adapter, db, context, [worker], sizes.rssJobs);
    context.log(`    RSS ${mb(boot.rss)} → ${mb(warm.rss)} → ${mb(end.rss)} MB; heap ${mb(boot.heapUsed)} → ${mb(end.heapUsed)} MB`);
    return {
      measurements: [
        { key: 'rss.boot', label: 'worker RSS at boot', unit: 'MB', value: boot.rss / MB, better: 'lower' },
        { key: 'rss.end', label: `  after ${sizes.rssJobs.toLocaleString('en-US')} jobs`, unit: 'MB', value: end.rss / MB, better: 'lower' },
        { key: 'rss.growth', label: '  growth from boot', unit: 'MB', value: (end.rss - boot.rss) / MB, better: 'lower' },
        {
          key: 'rss.growthAfterWarmup',
          label: `  growth after ${sizes.rssWarmupJobs / 1000}k-job warm-up`,
          unit: 'MB',
          value: (end.rss - warm.rss) / MB,
          better: 'lower',
        },
        { key: 'rss.heapGrowth', label: '  heap used growth from boot', unit: 'MB', value: (end.heapUsed - boot.heapUsed) / MB, better: 'lower' },
      ],
      checks: [{ run: 'worker RSS', result: check }],
      details: { boot, warm, end, jobs: sizes.rssJobs, drainSeconds: seconds, throughput: (sizes.rssJobs - sizes.rssWarmupJobs) / seconds },
    };
  },
};

function mb(bytes: number): string {
  return (bytes / MB).toFixed(1);
}
