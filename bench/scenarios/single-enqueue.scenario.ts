import { msBetween, now } from '../clock.js';
import { percentile } from '../stats.js';
import { drainAndVerify } from './run-helpers.js';
import type { Scenario } from './scenario.js';

/**
 * Untimed calls first, for two seconds: a long-running API pod is measured, not a cold one. The
 * first seconds of single commits in a fresh process run slow for any system (several times the
 * usual share of calls over 1 ms), so a fixed handful of calls left the first system measured
 * paying for that alone.
 */
const WARM_UP_MS = 2_000;

/** N single-job calls, one after another (each awaited): the per-request cost of an API pod. */
export const singleEnqueueScenario: Scenario = {
  name: 'single-enqueue',
  describe: (sizes) =>
    `single enqueue: ${sizes.singleJobs.toLocaleString('en-US')} sequential calls (after ${WARM_UP_MS / 1000} s of untimed warm-up calls)`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    let warmUpJobs = 0;
    for (const until = Date.now() + WARM_UP_MS; Date.now() < until; ) await producer.enqueue(warmUpJobs++);
    const calls: number[] = [];
    const started = now();
    for (let i = 0; i < sizes.singleJobs; i++) {
      const before = now();
      await producer.enqueue(warmUpJobs + i);
      calls.push(msBetween(before, now()));
    }
    const ms = msBetween(started, now());
    await scope.closeProducer(producer);
    const check = await drainAndVerify(adapter, db, context, warmUpJobs + sizes.singleJobs);
    await scope.dropDatabase(db);
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
