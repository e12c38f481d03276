import 'reflect-metadata';
import os from 'node:os';
import { startLocalPostgres } from '../tools/local-postgres.js';
import { ADAPTER_ORDER, COMPARED, adapterNamed } from './adapters/index.js';
import type { AdapterName, AdapterSettings, QueueAdapter } from './adapters/queue-adapter.js';
import { type BenchOptions, parseBenchOptions, type SoakOptions } from './cli-options.js';
import { describeMachine, type MachineDescription } from './machine.js';
import { formatMachine, formatProblems, formatResultsTable, formatSettings, formatTargets } from './report.js';
import { writeResults } from './results-file.js';
import { RunScope } from './run-scope.js';
import { selectScenarios } from './scenarios/index.js';
import { formatSoak, runSoak } from './scenarios/soak.scenario.js';
import type { ScenarioResult } from './scenarios/scenario.js';
import { evaluateTargets } from './targets.js';

/**
 * `npm run bench [-- --compare] [--quick] [--only <scenario>]`, or `npm run bench -- soak`: a
 * benchmark, not a test. Prints a table and writes bench/results/<timestamp>.json.
 */
async function main(): Promise<number> {
  let options: BenchOptions;
  let adapters: QueueAdapter[];
  try {
    options = parseBenchOptions(process.argv.slice(2));
    adapters = [...new Set(options.systems ?? (options.compare ? COMPARED : ['auto-job-queue']))]
      .map(adapterNamed)
      .sort((a, b) => ADAPTER_ORDER.indexOf(a.name) - ADAPTER_ORDER.indexOf(b.name));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 2;
  }
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const startedAt = new Date();
  const database = await startLocalPostgres(log);
  let scope: RunScope | null = null;
  const interrupt = async () => {
    log('\nInterrupted: stopping workers and dropping benchmark databases…');
    await scope?.close();
    await database.stop();
    process.exit(130);
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  try {
    const machine = await describeMachine(database.url, database.embedded);
    if (options.soak) return await soak(options.soak, database.url, machine, startedAt, log, (s) => (scope = s));
    const adapterNames: AdapterName[] = adapters.map((a) => a.name);
    const settings = new Map<AdapterName, AdapterSettings>(adapters.map((a) => [a.name, a.settings(10)]));
    const scenarios = selectScenarios(options.only);
    log(`auto-job-queue benchmark${options.quick ? ' (quick)' : ''}${options.compare ? ', compared' : ''}`);
    log(formatMachine(machine));
    log(formatSettings(settings));
    log('Scenarios:');
    for (const scenario of scenarios) log(`  - ${scenario.describe(options.sizes)}`);
    log('');

    const results: ScenarioResult[] = [];
    const logSummary = (result: ScenarioResult) => {
      const summary = result.measurements
        .map((m) => `${m.label.trim()} ${m.value.toFixed(m.unit === 'jobs/s' ? 0 : 2)} ${m.unit}`)
        .join('; ');
      log(`  ${result.adapter}: ${result.seconds.toFixed(1)} s${summary ? `: ${summary}` : ''}${result.error ? ' (failed)' : ''}`);
    };
    for (const scenario of scenarios) {
      if ('runInterleaved' in scenario) {
        log(`[${scenario.name}] ${adapters.map((a) => a.name).join(', ')} in turn…`);
        scope = new RunScope(database.url);
        try {
          const outcomes = await scenario.runInterleaved(adapters, { adminUrl: database.url, sizes: options.sizes, scope, log });
          for (const outcome of outcomes) {
            const result: ScenarioResult = { scenario: scenario.name, ...outcome };
            results.push(result);
            logSummary(result);
          }
        } catch (error) {
          const message = String((error as Error)?.stack ?? error);
          log(`  failed: ${message.split('\n')[0]}`);
          for (const adapter of adapters) {
            results.push({ scenario: scenario.name, adapter: adapter.name, measurements: [], checks: [], details: {}, error: message, seconds: 0 });
          }
        } finally {
          await scope.close();
          scope = null;
        }
        continue;
      }
      for (const adapter of adapters) {
        log(`[${scenario.name}] ${adapter.name}…`);
        scope = new RunScope(database.url);
        const started = Date.now();
        let result: ScenarioResult;
        try {
          const outcome = await scenario.run(adapter, { adminUrl: database.url, sizes: options.sizes, scope, log });
          result = { scenario: scenario.name, adapter: adapter.name, ...outcome, seconds: (Date.now() - started) / 1000 };
        } catch (error) {
          const message = String((error as Error)?.stack ?? error);
          log(`  failed: ${message.split('\n')[0]}`);
          const seconds = (Date.now() - started) / 1000;
          result = { scenario: scenario.name, adapter: adapter.name, measurements: [], checks: [], details: {}, error: message, seconds };
        } finally {
          await scope.close();
          scope = null;
        }
        results.push(result);
        logSummary(result);
      }
    }

    const targets = evaluateTargets(results, options.sizes, options.compare);
    const loadAtEnd = os.loadavg().map((n) => Math.round(n * 100) / 100);
    log('');
    log(formatMachine(machine));
    log(`Load at end: ${loadAtEnd.join(' / ')}`);
    log('');
    log(formatResultsTable(results, adapterNames));
    log('');
    log(formatProblems(results));
    log('');
    log(formatTargets(targets));
    const file = writeResults(startedAt, {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      options,
      machine,
      loadAtEnd,
      settings: Object.fromEntries(adapters.map((a) => [a.name, { concurrency10: a.settings(10), concurrency50: a.settings(50) }])),
      retainedRows: Object.fromEntries(adapters.map((a) => [a.name, a.retainedRowsNote])),
      scenarios: Object.fromEntries(scenarios.map((s) => [s.name, s.describe(options.sizes)])),
      results,
      targets,
    });
    log('');
    log(`Results written to ${file} (${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)} s in all)`);
    return results.some((r) => r.error) ? 1 : 0;
  } finally {
    await database.stop();
  }
}

/** `npm run bench -- soak`: the soak alone, its table and checks; exit code 1 when a check fails. */
async function soak(
  options: SoakOptions,
  adminUrl: string,
  machine: MachineDescription,
  startedAt: Date,
  log: (line: string) => void,
  track: (scope: RunScope | null) => void,
): Promise<number> {
  log(`auto-job-queue soak, ${options.minutes} min${options.deleteOnComplete ? ', delete on complete' : ''}`);
  log(formatMachine(machine));
  const scope = new RunScope(adminUrl);
  track(scope);
  const loads: number[][] = [];
  const sampler = setInterval(() => loads.push(os.loadavg().map((n) => Math.round(n * 100) / 100)), 60_000);
  try {
    const report = await runSoak(options, adminUrl, scope, log);
    const loadAtEnd = os.loadavg().map((n) => Math.round(n * 100) / 100);
    log('');
    log(formatSoak(report));
    log(`Load (1/5/15 min) at the start ${machine.loadAverage.join(' / ')}, at the end ${loadAtEnd.join(' / ')}`);
    const file = writeResults(startedAt, { kind: 'soak', startedAt: startedAt.toISOString(), finishedAt: new Date().toISOString(), machine, loadEachMinute: loads, loadAtEnd, ...report }, 'soak');
    log(`Results written to ${file}`);
    return report.checks.every((c) => c.pass) ? 0 : 1;
  } finally {
    clearInterval(sampler);
    await scope.close();
    track(null);
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`benchmark failed: ${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
