import { msBetween, now } from '../clock.js';
import { checkExactlyOnce } from '../exactly-once.js';
import type { Measurement, RunCheck, Scenario } from './scenario.js';
import { drainTimeoutMs, waitUntilDrained } from './run-helpers.js';

/**
 * Drain of N queued no-op jobs at each concurrency, in one and in several worker processes.
 * The workers boot and idle first; the N jobs are then inserted in one bulk statement, and the
 * clock runs from that statement's commit until the database shows no job unfinished. The commit
 * is taken as the moment the bulk call returned, or the first job's start if that came earlier:
 * a client that reads back every inserted row returns well after its commit, while the workers
 * are already draining.
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
        const returned = now();
        const finished = await waitUntilDrained(adapter, db, drainTimeoutMs(sizes.drainJobs));
        const runs = await scope.stopWorkers(workers);
        const started = runs.reduce((earliest, r) => (r.firstStartAt !== null && r.firstStartAt < earliest ? r.firstStartAt : earliest), returned);
        const ms = msBetween(started, finished);
        const database = await adapter.checkFinished(db, sizes.drainJobs, 0);
        checks.push({ run: `drain ${run}`, result: checkExactlyOnce(sizes.drainJobs, runs, database) });
        await scope.closeProducer(producer);
        await scope.dropDatabase(db);
        const key = `drain.c${concurrency}.p${processes}`;
        measurements.push({ key, label: `drain ${run}`, unit: 'jobs/s', value: (sizes.drainJobs / ms) * 1000, better: 'higher' });
        const startedBeforeReturnMs = msBetween(started, returned);
        details[key] = { jobs: sizes.drainJobs, ms, startedBeforeReturnMs };
        context.log(
          `    ${run}: ${Math.round((sizes.drainJobs / ms) * 1000)} jobs/s` +
            (startedBeforeReturnMs > 0 ? ` (jobs started ${startedBeforeReturnMs.toFixed(1)} ms before the bulk call returned)` : ''),
        );
      }
    }
    return { measurements, checks, details };
  },
};
