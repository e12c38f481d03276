import type { QueueAdapter } from '../adapters/queue-adapter.js';
import type { BenchSizes } from '../cli-options.js';
import { percentile } from '../stats.js';
import type { InterleavedScenario, Measurement, Scenario, ScenarioOutcome, ScenarioResult } from './scenario.js';
import { takeTurns } from './system-turns.js';

/**
 * A scenario measured one system at a time, run in rounds instead: each round runs every system in
 * turn (each round starting with another one), and a system's figures are the medians of its
 * rounds. A single sample of a short measurement on a shared machine read anywhere from 0.7× to
 * 1.0× the reference from one run to the next.
 */
export function inRounds(scenario: Scenario, rounds: (sizes: BenchSizes) => number): InterleavedScenario {
  return {
    name: scenario.name,
    describe: (sizes) => `${scenario.describe(sizes)}; each system in turn, ${rounds(sizes)} round(s), median`,

    async runInterleaved(adapters, context) {
      const systems: SystemRounds[] = adapters.map((adapter) => ({ adapter, outcomes: [], seconds: 0 }));
      for (let round = 1; round <= rounds(context.sizes); round++) {
        await takeTurns(systems, round, context, `round ${round}`, async (system) => {
          const outcome = await scenario.run(system.adapter, context);
          system.outcomes.push(outcome);
          const [headline] = outcome.measurements;
          return headline ? `${headline.value.toFixed(headline.unit === 'jobs/s' ? 0 : 2)} ${headline.unit}` : '';
        });
      }
      return systems.map(roundsResult);
    },
  };
}

/** One system's rounds of a scenario. */
export interface SystemRounds {
  adapter: QueueAdapter;
  outcomes: ScenarioOutcome[];
  seconds: number;
  error?: string;
}

/** A system's result over its rounds: the medians of its measurements, every round's checks and details. */
export function roundsResult(system: SystemRounds): Omit<ScenarioResult, 'scenario'> {
  return {
    adapter: system.adapter.name,
    measurements: system.error ? [] : medians(system.outcomes),
    checks: system.outcomes.flatMap((outcome, i) => outcome.checks.map((check) => ({ ...check, run: `${check.run}, round ${i + 1}` }))),
    details: { rounds: system.outcomes.map((outcome) => outcome.details) },
    seconds: system.seconds,
    ...(system.error ? { error: system.error } : {}),
  };
}

/** Each measurement of the first round, with the median of its values over all rounds. */
function medians(outcomes: readonly ScenarioOutcome[]): Measurement[] {
  if (outcomes.length === 0) return [];
  return outcomes[0].measurements.map((first) => ({
    ...first,
    value: percentile(
      outcomes.flatMap((outcome) => outcome.measurements.filter((m) => m.key === first.key).map((m) => m.value)),
      50,
    ),
  }));
}
