import type { ScenarioName } from '../cli-options.js';
import { bulkEnqueueScenario } from './bulk-enqueue.scenario.js';
import { claimLatencyScenario } from './claim-latency.scenario.js';
import { drainScenario } from './drain.scenario.js';
import { groupFairnessScenario } from './group-fairness.scenario.js';
import { inRounds } from './in-rounds.js';
import { pickupLatencyScenario } from './pickup-latency.scenario.js';
import type { InterleavedScenario, Scenario } from './scenario.js';
import { singleEnqueueScenario } from './single-enqueue.scenario.js';
import { workerRssScenario } from './worker-rss.scenario.js';

/** In run order. */
export const SCENARIOS: ReadonlyArray<Scenario | InterleavedScenario> = [
  inRounds(bulkEnqueueScenario, (sizes) => sizes.shortRounds),
  singleEnqueueScenario,
  drainScenario,
  inRounds(pickupLatencyScenario, (sizes) => sizes.shortRounds),
  claimLatencyScenario,
  workerRssScenario,
  groupFairnessScenario,
];

export function selectScenarios(only: readonly ScenarioName[] | null): Array<Scenario | InterleavedScenario> {
  return SCENARIOS.filter((scenario) => !only || only.includes(scenario.name));
}
