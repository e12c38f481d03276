import { msBetween, now } from '../clock.js';
import { percentile } from '../stats.js';
import { drainAndVerify } from './run-helpers.js';
import type { Scenario } from './scenario.js';

/** Enough calls for V8 to optimise the client path: a long-running API pod is measured, not a cold one. */
const WARM_UP_JOBS = 500;

/** N single-job calls, one after another (each awaited): the per-request cost of an API pod. */
export const singleEnqueueScenario: Scenario = {
  name: 'single-enqueue',
  describe: (sizes) => `single enqueue: ${sizes.singleJobs.toLocaleString('en-US')} sequential calls (after ${WARM_UP_JOBS} warm-up calls)`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    for (let seq = 0; seq < WARM_UP_JOBS; seq++) await producer.enqueue(seq);
    const calls: number[] = [];
    const started = now();
    for (let i = 0; i < sizes.singleJobs; i++) {
      const before = now();
      await producer.enqueue(WARM_UP_JOBS + i);
      calls.push(msBetween(before, now()));
    }
    const ms = msBetween(started, now());
    await scope.closeProducer(producer);
    const check = await drainAndVerify(adapter, db, context, WARM_UP_JOBS + sizes.singleJobs);
    return {
      measurements: [
        {
          key: 'single.rate',
          label: `single enqueue ${sizes.singleJobs.toLocaleString('en-US')}`,
          unit: 'jobs/s',
          value: (sizes.singleJobs / ms) * 1000,
          better: 'higher',
        },
        { key: 'single.p50', label: '  per call p50', unit: 'ms', value: percentile(calls, 50), better: 'lower' },
        { key: 'single.p99', label: '  per call p99', unit: 'ms', value: percentile(calls, 99), better: 'lower' },
      ],
      checks: [{ run: 'single enqueue', result: check }],
      details: { jobs: sizes.singleJobs, ms },
    };
  },
};
