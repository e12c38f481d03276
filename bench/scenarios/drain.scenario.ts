import { msBetween, now } from '../clock.js';
import type { Measurement, RunCheck, Scenario } from './scenario.js';
import { drainTimeoutMs, stopAndVerify, waitUntilDrained } from './run-helpers.js';

/**
 * Drain of N queued no-op jobs at each concurrency, in one and in several worker processes.
 * The workers boot and idle first; the N jobs are then inserted in one bulk statement, and the
 * clock runs from that statement's commit until the database shows no job unfinished.
 */
export const drainScenario: Scenario = {
  name: 'drain',
  describe: (sizes) =>
    `drain: ${sizes.drainJobs.toLocaleString('en-US')} no-op jobs, concurrency ${sizes.drainConcurrency.join('/')} per process, ` +
    `${sizes.drainProcesses.join(' and ')} worker process(es); clock from the bulk insert's commit to the last completion`,

  async run(adapter, context) {
    const { sizes, scope } = context;
    const measurements: Measurement[] = [];
    const checks: RunCheck[] = [];
    const details: Record<string, unknown> = {};
    for (const processes of sizes.drainProcesses) {
      for (const concurrency of sizes.drainConcurrency) {
        const run = `c=${concurrency} ×${processes} proc`;
        const db = await scope.database(adapter);
        const producer = await scope.producer(adapter, db);
        const workers = await scope.workers(processes, {
          adapter: adapter.name,
          url: db.url,
          concurrency,
          expectedJobs: sizes.drainJobs,
          reportStarts: false,
        });
        await producer.enqueueMany(Array.from({ length: sizes.drainJobs }, (_, i) => i));
        const started = now();
        const finished = await waitUntilDrained(adapter, db, drainTimeoutMs(sizes.drainJobs));
        const ms = msBetween(started, finished);
        checks.push({ run: `drain ${run}`, result: await stopAndVerify(adapter, db, context, workers, sizes.drainJobs) });
        await scope.closeProducer(producer);
        await scope.dropDatabase(db);
        const key = `drain.c${concurrency}.p${processes}`;
        measurements.push({ key, label: `drain ${run}`, unit: 'jobs/s', value: (sizes.drainJobs / ms) * 1000, better: 'higher' });
        details[key] = { jobs: sizes.drainJobs, ms };
        context.log(`    ${run}: ${Math.round((sizes.drainJobs / ms) * 1000)} jobs/s`);
      }
    }
    return { measurements, checks, details };
  },
};
