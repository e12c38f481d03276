import type { AdapterName, QueueAdapter } from '../adapters/queue-adapter.js';
import { msBetween, now } from '../clock.js';
import { checkExactlyOnce } from '../exactly-once.js';
import { percentile } from '../stats.js';
import type { InterleavedScenario, Measurement, RunCheck, ScenarioContext, ScenarioResult } from './scenario.js';
import { type DatabaseCosts, measureDatabaseCosts } from './database-costs.js';
import { drainTimeoutMs, waitUntilDrained, waitUntilRun } from './run-helpers.js';
import { takeTurns } from './system-turns.js';

/** How often the database is probed for unfinished jobs once every handler has run. */
const FINAL_POLL_MS = 2;

interface DrainRun {
  ms: number;
  costs: DatabaseCosts;
  /** How long before the bulk call returned the first job started (0 if it did not). */
  startedBeforeReturnMs: number;
}

/**
 * Drain of N queued no-op jobs at each concurrency, in one and in several worker processes.
 * The workers boot and idle first; the N jobs are then inserted in one bulk statement, and the
 * clock runs from that statement's commit until the database shows no job unfinished. The commit
 * is taken as the moment the bulk call returned, or the first job's start if that came earlier:
 * a client that reads back every inserted row returns well after its commit, while the workers
 * are already draining.
 *
 * The end is read from the database, but only probed once the workers report (over IPC) that
 * every handler has run, then every 2 ms. Probing every 20 ms throughout, as before, loaded the
 * database being measured: the probe is a sequential scan on every system (see DRAIN_POLL_MS),
 * several ms each near the end, and it took up to 20 ms to see the end.
 *
 * Each configuration runs every system back to back, each round starting with another system, and
 * the whole set runs `drainRounds` times; a system's figure is its median. Run as one block per
 * system, the drains compared ran minutes apart, and on a shared machine that alone moved the
 * ratios by a third. A system that fails a run is dropped from the rest, and reports no figure.
 */
export const drainScenario: InterleavedScenario = {
  name: 'drain',
  describe: (sizes) =>
    `drain: ${sizes.drainJobs.toLocaleString('en-US')} no-op jobs, concurrency ${sizes.drainConcurrency.join('/')} per process, ` +
    `${sizes.drainProcesses.join(' and ')} worker process(es), each system in turn, ${sizes.drainRounds} round(s), median; ` +
    `clock from the bulk insert's commit to the last completion`,

  async runInterleaved(adapters, context) {
    const { sizes } = context;
    const results = adapters.map((adapter) => ({
      adapter,
      /** Rate by configuration key, then by round. */
      samples: new Map<string, Map<number, number>>(),
      /** The database's costs by configuration key, one per round. */
      costs: new Map<string, DatabaseCosts[]>(),
      checks: [] as RunCheck[],
      runs: [] as Array<Record<string, unknown>>,
      seconds: 0,
      error: undefined as string | undefined,
    }));
    for (let round = 1; round <= sizes.drainRounds; round++) {
      for (const processes of sizes.drainProcesses) {
        for (const concurrency of sizes.drainConcurrency) {
          const key = drainKey(concurrency, processes);
          await takeTurns(results, round, context, `round ${round}, c=${concurrency} ×${processes} proc (jobs/s)`, async (result) => {
            const run = await drainOnce(result.adapter, context, processes, concurrency, round, result.checks);
            const rate = (sizes.drainJobs / run.ms) * 1000;
            if (!result.samples.has(key)) result.samples.set(key, new Map());
            result.samples.get(key)!.set(round, rate);
            if (!result.costs.has(key)) result.costs.set(key, []);
            result.costs.get(key)!.push(run.costs);
            result.runs.push({ round, key, jobs: sizes.drainJobs, ms: run.ms, startedBeforeReturnMs: run.startedBeforeReturnMs, ...run.costs });
            return (
              `${Math.round(rate)}` +
              (run.startedBeforeReturnMs > 0 ? ` (started ${run.startedBeforeReturnMs.toFixed(1)} ms before the bulk call returned)` : '')
            );
          });
        }
      }
    }
    const pairedWith = (adapter: QueueAdapter) =>
      results.find((result) => result.adapter.name === (adapter.comparedWith ?? 'reference') && !result.error);
    return results.map((result): Omit<ScenarioResult, 'scenario'> => {
      const reference = pairedWith(result.adapter);
      const measurements: Measurement[] = [];
      for (const [key, byRound] of result.samples) {
        const [, concurrency, processes] = /^drain\.c(\d+)\.p(\d+)$/.exec(key)!;
        measurements.push({
          key,
          label: `drain c=${concurrency} ×${processes} proc`,
          unit: 'jobs/s',
          value: percentile([...byRound.values()], 50),
          better: 'higher',
        });
        const paired = reference && reference !== result ? pairedRatios(byRound, reference.samples.get(key)) : [];
        if (paired.length > 0) {
          const label = `  ÷ ${reference!.adapter.name}, median of rounds`;
          measurements.push({ key: pairedKey(key, result.adapter), label, unit: '×', value: percentile(paired, 50), better: 'higher' });
        }
        measurements.push(...costMeasurements(key, result.costs.get(key) ?? [], sizes.drainJobs, Number(processes)));
      }
      const name: AdapterName = result.adapter.name;
      return {
        adapter: name,
        measurements: result.error ? [] : measurements,
        checks: result.checks,
        details: { rounds: sizes.drainRounds, runs: result.runs },
        seconds: result.seconds,
        ...(result.error ? { error: result.error } : {}),
      };
    });
  },
};

/**
 * This system's rate over the reference's, round by round (in each round the systems drain one
 * after another, seconds apart), for the rounds both finished. The median of these is the fairer
 * comparison: the machine's speed drifts between rounds, minutes apart, and each system's own
 * median may come from a different round (one run's c=50 rounds read 0.65–0.87× paired, and
 * 0.73× as a ratio of medians).
 */
function pairedRatios(ours: ReadonlyMap<number, number>, reference: ReadonlyMap<number, number> | undefined): number[] {
  if (!reference) return [];
  return [...ours].filter(([round]) => reference.has(round)).map(([round, rate]) => rate / reference.get(round)!);
}

/** `<key>.paired` against the reference, `<key>.paired.<system>` against another (ajq-delete's reference-delete). */
export function pairedKey(key: string, adapter: Pick<QueueAdapter, 'comparedWith'>): string {
  return adapter.comparedWith && adapter.comparedWith !== 'reference' ? `${key}.paired.${adapter.comparedWith}` : `${key}.paired`;
}

function drainKey(concurrency: number, processes: number): string {
  return `drain.c${concurrency}.p${processes}`;
}

/** One drain of one system in a fresh database; its exactly-once check goes into `checks`. */
async function drainOnce(
  adapter: QueueAdapter,
  context: ScenarioContext,
  processes: number,
  concurrency: number,
  round: number,
  checks: RunCheck[],
): Promise<DrainRun> {
  const { sizes, scope } = context;
  const db = await scope.database(adapter);
  const producer = await scope.producer(adapter, db);
  const workers = await scope.workers(processes, {
    adapter: adapter.name,
    url: db.url,
    concurrency,
    expectedJobs: sizes.drainJobs,
    reportStarts: false,
  });
  let returned: bigint;
  let finished: bigint;
  let costs: DatabaseCosts;
  try {
    const measuring = await measureDatabaseCosts(db);
    await producer.enqueueMany(Array.from({ length: sizes.drainJobs }, (_, i) => i));
    returned = now();
    // One timeout for the whole drain, shared by its two waits.
    const deadline = Date.now() + drainTimeoutMs(sizes.drainJobs);
    await waitUntilRun(workers, sizes.drainJobs, deadline - Date.now());
    finished = await waitUntilDrained(adapter, db, Math.max(0, deadline - Date.now()), FINAL_POLL_MS);
    costs = await measuring.end();
  } catch (error) {
    scope.killWorkers(workers);
    throw error;
  }
  const runs = await scope.stopWorkers(workers);
  const started = runs.reduce((earliest, r) => (r.firstStartAt !== null && r.firstStartAt < earliest ? r.firstStartAt : earliest), returned);
  const database = await adapter.checkFinished(db, sizes.drainJobs, 0);
  checks.push({ run: `drain c=${concurrency} ×${processes} proc, round ${round}`, result: checkExactlyOnce(sizes.drainJobs, runs, database) });
  await scope.closeProducer(producer);
  await scope.dropDatabase(db);
  return { ms: msBetween(started, finished), startedBeforeReturnMs: msBetween(started, returned), costs };
}

/**
 * Medians over the rounds of what each job cost the server: WAL bytes (the enqueue's included),
 * PostgreSQL CPU, and the connections each worker process held. Server-wide figures: they mean
 * something only on a server of the benchmark's own (see measureDatabaseCosts).
 */
function costMeasurements(key: string, costs: readonly DatabaseCosts[], jobs: number, processes: number): Measurement[] {
  if (costs.length === 0) return [];
  const cpu = costs.filter((c) => c.cpuMs !== null).map((c) => (c.cpuMs! * 1000) / jobs);
  return [
    { key: `${key}.walPerJob`, label: '  WAL per job', unit: 'kB', value: percentile(costs.map((c) => c.walBytes / jobs / 1024), 50), better: 'lower' },
    ...(cpu.length > 0 ? [{ key: `${key}.pgCpuPerJob`, label: '  PostgreSQL CPU per job', unit: 'µs' as const, value: percentile(cpu, 50), better: 'lower' as const }] : []),
    {
      key: `${key}.connections`,
      label: '  connections per worker process',
      unit: 'n',
      value: percentile(costs.map((c) => c.workerConnections / processes), 50),
      better: 'lower',
    },
  ];
}
