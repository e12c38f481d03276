import type { AdapterName, QueueAdapter } from '../adapters/queue-adapter.js';
import type { BenchSizes, ScenarioName } from '../cli-options.js';
import type { ExactlyOnceResult } from '../exactly-once.js';
import type { RunScope } from '../run-scope.js';

/** One number a scenario measured for one system. */
export interface Measurement {
  /** Stable key (row identity in the report and JSON). */
  key: string;
  /** Row label in the printed table. */
  label: string;
  unit: 'jobs/s' | 'ms' | 'MB' | '×' | 'kB' | 'µs' | 'n';
  value: number;
  /** Which direction is good; ratios to the reference read accordingly. */
  better: 'higher' | 'lower';
}

/** Exactly-once check of one run within a scenario (a scenario may have several runs). */
export interface RunCheck {
  run: string;
  result: ExactlyOnceResult;
}

export interface ScenarioResult {
  scenario: ScenarioName;
  adapter: AdapterName;
  measurements: Measurement[];
  checks: RunCheck[];
  /** Extra facts for the JSON file (timings of setup steps, raw samples' sizes …). */
  details: Record<string, unknown>;
  /** Set when the scenario could not finish for this system. */
  error?: string;
  seconds: number;
}

export interface ScenarioContext {
  adminUrl: string;
  sizes: BenchSizes;
  scope: RunScope;
  log(line: string): void;
}

export type ScenarioOutcome = Omit<ScenarioResult, 'scenario' | 'adapter' | 'seconds'>;

/** A scenario run for one system at a time. */
export interface Scenario {
  name: ScenarioName;
  /** One line for the report header. */
  describe(sizes: BenchSizes): string;
  run(adapter: QueueAdapter, context: ScenarioContext): Promise<ScenarioOutcome>;
}

/**
 * A scenario that runs every system for each of its configurations before moving on, in several
 * rounds, so that each comparison is between runs minutes apart at most, not a whole scenario
 * apart: on a shared machine, speed drifts by tens of percent over minutes.
 */
export interface InterleavedScenario {
  name: ScenarioName;
  describe(sizes: BenchSizes): string;
  /** Each system's outcome (with `seconds`, the time its own runs took), in the order given. */
  runInterleaved(adapters: readonly QueueAdapter[], context: ScenarioContext): Promise<Array<Omit<ScenarioResult, 'scenario'>>>;
}
