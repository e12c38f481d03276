import { summarise } from '../stats.js';
import { measurePacedLatency, stopAndVerify, waitUntilDrained } from './run-helpers.js';
import type { Scenario } from './scenario.js';

/** Worker concurrency while latency is measured (auto-job-queue's default). */
const CONCURRENCY = 10;

/**
 * Enqueue → handler start, with the producer in this process and the worker in another (as an
 * API pod and a worker pod), jobs paced one by one at a steady rate.
 */
export const pickupLatencyScenario: Scenario = {
  name: 'pickup-latency',
  describe: (sizes) =>
    `pickup latency: ${sizes.pickupJobs} single enqueues paced at ${sizes.pickupRatePerSecond}/s, enqueue call → handler start ` +
    `(producer here, worker in a child process at concurrency ${CONCURRENCY})`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    const [worker] = await scope.workers(1, {
      adapter: adapter.name,
      url: db.url,
      concurrency: CONCURRENCY,
      expectedJobs: sizes.pickupJobs,
      reportStarts: true,
    });
    const latencies = await measurePacedLatency(producer, worker, sizes.pickupJobs, sizes.pickupRatePerSecond, context.log);
    await waitUntilDrained(adapter, db, 60_000);
    const check = await stopAndVerify(adapter, db, context, [worker], sizes.pickupJobs);
    await scope.closeProducer(producer);
    await scope.dropDatabase(db);
    const s = summarise(latencies);
    const label = `pickup @${sizes.pickupRatePerSecond}/s`;
    return {
      measurements: [
        { key: 'pickup.p50', label: `${label} p50`, unit: 'ms', value: s.p50, better: 'lower' },
        { key: 'pickup.p95', label: `${label} p95`, unit: 'ms', value: s.p95, better: 'lower' },
        { key: 'pickup.p99', label: `${label} p99`, unit: 'ms', value: s.p99, better: 'lower' },
        { key: 'pickup.max', label: `${label} max`, unit: 'ms', value: s.max, better: 'lower' },
      ],
      checks: [{ run: 'pickup latency', result: check }],
      details: { ...s, concurrency: CONCURRENCY },
    };
  },
};
