import type { BenchProducer, QueueAdapter } from '../adapters/queue-adapter.js';
import type { BenchDatabase } from '../bench-database.js';
import { msBetween, now } from '../clock.js';
import { percentile } from '../stats.js';
import { roundsResult, type SystemRounds } from './in-rounds.js';
import { drainAndVerify } from './run-helpers.js';
import type { InterleavedScenario, ScenarioOutcome } from './scenario.js';

/**
 * Untimed calls first, for two seconds: a long-running API pod is measured, not a cold one. The
 * first seconds of single commits in a fresh process run slow for any system (several times the
 * usual share of calls over 1 ms), so a fixed handful of calls left the first system measured
 * paying for that alone.
 */
const WARM_UP_MS = 2_000;
/**
 * Timed calls per turn. Each call is a commit, whose flush time drifts on a shared machine; with
 * each system's 2,000 calls run in one go, a round's ratio for the same code read anywhere from
 * 0.74× to 1.46×. In turns of 200 calls, every system meets the same drift.
 */
const BLOCK_CALLS = 200;

/** One system's state within a round. */
interface Open {
  adapter: QueueAdapter;
  db: BenchDatabase;
  /** Null until opened, and again once closed. */
  producer: BenchProducer | null;
  /** Untimed calls made so far; the warm-up runs just before the system's first timed turn. */
  warmUpJobs: number;
  warmedUp: boolean;
  calls: number[];
  ms: number;
}

/**
 * N single-job calls, one after another (each awaited): the per-request cost of an API pod. Every
 * system gets its own database and producer, and then the systems take turns, block by block,
 * until each has made N timed calls; each warms up right before its first block (not all before
 * the first block, which left the first one idle through the others' warm-ups, long enough for its
 * pool to close idle connections). A system's rate is its calls over the sum of its blocks' times.
 * In rounds; figures are medians.
 */
export const singleEnqueueScenario: InterleavedScenario = {
  name: 'single-enqueue',
  describe: (sizes) =>
    `single enqueue: ${sizes.singleJobs.toLocaleString('en-US')} sequential calls (after ${WARM_UP_MS / 1000} s of untimed warm-up calls), ` +
    `the systems taking turns every ${BLOCK_CALLS} calls; ${sizes.shortRounds} round(s), median`,

  async runInterleaved(adapters, context) {
    const { sizes, scope } = context;
    const systems: SystemRounds[] = adapters.map((adapter) => ({ adapter, outcomes: [], seconds: 0 }));
    let open = new Map<SystemRounds, Open>();
    /**
     * Runs `work` for each system still in, starting with another one each time. A failure takes
     * the system out, and its producer and database go at once: the others' stay open.
     */
    const eachSystem = async (turn: number, work: (system: SystemRounds) => Promise<void>) => {
      for (let i = 0; i < systems.length; i++) {
        const system = systems[(i + turn) % systems.length];
        if (system.error) continue;
        const started = Date.now();
        try {
          await work(system);
        } catch (error) {
          system.error = String((error as Error)?.stack ?? error);
          const state = open.get(system);
          open.delete(system);
          if (state?.producer) await scope.closeProducer(state.producer).catch(() => undefined);
          if (state) await scope.dropDatabase(state.db).catch(() => undefined);
        } finally {
          system.seconds += (Date.now() - started) / 1000;
        }
      }
    };
    for (let round = 1; round <= sizes.shortRounds; round++) {
      open = new Map<SystemRounds, Open>();
      await eachSystem(round, async (system) => {
        const state: Open = { adapter: system.adapter, db: await scope.database(system.adapter), producer: null, warmUpJobs: 0, warmedUp: false, calls: [], ms: 0 };
        open.set(system, state);
        state.producer = await scope.producer(system.adapter, state.db);
      });
      for (let block = 0; block * BLOCK_CALLS < sizes.singleJobs; block++) {
        const count = Math.min(BLOCK_CALLS, sizes.singleJobs - block * BLOCK_CALLS);
        await eachSystem(round + block, async (system) => {
          const state = open.get(system)!;
          const producer = state.producer!;
          if (!state.warmedUp) {
            for (const until = Date.now() + WARM_UP_MS; Date.now() < until; ) await producer.enqueue(state.warmUpJobs++);
            state.warmedUp = true;
          }
          const started = now();
          for (let i = 0; i < count; i++) {
            const before = now();
            await producer.enqueue(state.warmUpJobs + state.calls.length);
            state.calls.push(msBetween(before, now()));
          }
          state.ms += msBetween(started, now());
        });
      }
      const line: string[] = [];
      await eachSystem(round, async (system) => {
        const state = open.get(system)!;
        const producer = state.producer!;
        state.producer = null;
        await scope.closeProducer(producer);
        const check = await drainAndVerify(state.adapter, state.db, context, state.warmUpJobs + state.calls.length);
        await scope.dropDatabase(state.db);
        open.delete(system);
        system.outcomes.push(outcomeOf(state, sizes.singleJobs, check));
        line.push(`${system.adapter.name} ${Math.round((sizes.singleJobs / state.ms) * 1000)} jobs/s`);
      });
      for (const system of systems) if (system.error) line.push(`${system.adapter.name} failed: ${system.error.split('\n')[0]}`);
      context.log(`    round ${round}: ${line.join('; ')}`);
    }
    return systems.map(roundsResult);
  },
};

function outcomeOf(state: Open, jobs: number, check: Awaited<ReturnType<typeof drainAndVerify>>): ScenarioOutcome {
  return {
    measurements: [
      {
        key: 'single.rate',
        label: `single enqueue ${jobs.toLocaleString('en-US')}`,
        unit: 'jobs/s',
        value: (jobs / state.ms) * 1000,
        better: 'higher',
      },
      { key: 'single.p50', label: '  per call p50', unit: 'ms', value: percentile(state.calls, 50), better: 'lower' },
      { key: 'single.p99', label: '  per call p99', unit: 'ms', value: percentile(state.calls, 99), better: 'lower' },
    ],
    checks: [{ run: 'single enqueue', result: check }],
    details: { jobs, ms: state.ms, blockCalls: BLOCK_CALLS },
  };
}
