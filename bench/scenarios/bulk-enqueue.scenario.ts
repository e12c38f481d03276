import { msBetween, now } from '../clock.js';
import { drainAndVerify } from './run-helpers.js';
import type { Scenario } from './scenario.js';

const WARM_UP_JOBS = 100;

/** One bulk call of N jobs (enqueueMany / addJobs / insert / one INSERT … unnest). */
export const bulkEnqueueScenario: Scenario = {
  name: 'bulk-enqueue',
  describe: (sizes) => `bulk enqueue: one call of ${sizes.bulkJobs.toLocaleString('en-US')} jobs (after a ${WARM_UP_JOBS}-job warm-up call)`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const db = await scope.database(adapter);
    const producer = await scope.producer(adapter, db);
    await producer.enqueueMany(Array.from({ length: WARM_UP_JOBS }, (_, i) => i));
    const seqs = Array.from({ length: sizes.bulkJobs }, (_, i) => WARM_UP_JOBS + i);
    const started = now();
    await producer.enqueueMany(seqs);
    const ms = msBetween(started, now());
    await scope.closeProducer(producer);
    const check = await drainAndVerify(adapter, db, context, WARM_UP_JOBS + sizes.bulkJobs);
    await scope.dropDatabase(db);
    return {
      measurements: [
        {
          key: 'bulk.rate',
          label: `bulk enqueue ${sizes.bulkJobs.toLocaleString('en-US')}`,
          unit: 'jobs/s',
          value: (sizes.bulkJobs / ms) * 1000,
          better: 'higher',
        },
        { key: 'bulk.ms', label: '  one call took', unit: 'ms', value: ms, better: 'lower' },
      ],
      checks: [{ run: 'bulk enqueue', result: check }],
      details: { jobs: sizes.bulkJobs, ms },
    };
  },
};
