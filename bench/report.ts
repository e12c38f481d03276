import type { AdapterName, AdapterSettings } from './adapters/queue-adapter.js';
import { describeExactlyOnce } from './exactly-once.js';
import type { MachineDescription } from './machine.js';
import type { Measurement, ScenarioResult } from './scenarios/scenario.js';
import type { TargetResult } from './targets.js';

const REFERENCE: AdapterName = 'reference';
const LABEL_WIDTH = 40;
const CELL_WIDTH = 20;

export function formatMachine(machine: MachineDescription): string {
  const db = machine.database;
  const settings = Object.entries(db.settings)
    .map(([name, value]) => `${name}=${value}`)
    .join(', ');
  return [
    `Machine:    ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}`,
    `Load:       ${machine.loadAverage.join(' / ')} (1/5/15 min averages when the run started; other processes skew the numbers)`,
    `Node:       ${machine.node}`,
    `PostgreSQL: ${db.version} (${db.source}, ${db.address})`,
    `            ${settings}`,
  ].join('\n');
}

export function formatSettings(settings: ReadonlyMap<AdapterName, AdapterSettings>): string {
  const lines = ['Settings (shown at concurrency 10; drains also run at 50, the exactly-once check after enqueue scenarios at 50):'];
  for (const [name, values] of settings) {
    lines.push(`  ${name}: ${Object.entries(values).map(([key, value]) => `${key}=${value}`).join(', ')}`);
  }
  return lines.join('\n');
}

/** One row per measurement, one column per system, each with its ratio to the reference. */
export function formatResultsTable(results: readonly ScenarioResult[], adapters: readonly AdapterName[]): string {
  const withRatios = adapters.includes(REFERENCE) && adapters.length > 1;
  const header = ['', ...adapters.map((a) => a)].map((cell, i) => (i === 0 ? pad(cell, LABEL_WIDTH) : padStart(cell, CELL_WIDTH))).join('');
  const lines = [header, '-'.repeat(header.length)];
  const scenarios = [...new Set(results.map((r) => r.scenario))];
  for (const scenario of scenarios) {
    const byAdapter = new Map(results.filter((r) => r.scenario === scenario).map((r) => [r.adapter, r]));
    const rows: Measurement[] = [];
    for (const result of byAdapter.values()) {
      for (const m of result.measurements) {
        if (rows.some((r) => r.key === m.key)) continue;
        // A figure one system alone has (ajq-delete's ratio to reference-delete) goes under its configuration's rows.
        const parent = rows.findIndex((r) => m.key.startsWith(`${r.key}.`));
        if (parent < 0) rows.push(m);
        else {
          let at = parent + 1;
          while (at < rows.length && rows[at].key.startsWith(`${rows[parent].key}.`)) at++;
          rows.splice(at, 0, m);
        }
      }
    }
    for (const row of rows) {
      const reference = byAdapter.get(REFERENCE)?.measurements.find((m) => m.key === row.key)?.value;
      const cells = adapters.map((adapter) => {
        const result = byAdapter.get(adapter);
        if (!result) return '';
        if (result.error) return 'error';
        const m = result.measurements.find((x) => x.key === row.key);
        if (!m) return '';
        const showRatio = withRatios && adapter !== REFERENCE && reference !== undefined && reference > 0 && m.value >= 0;
        const ratio = showRatio ? ` (${(m.value / reference).toFixed(2)}×)` : '';
        return `${formatValue(m)}${ratio}`;
      });
      lines.push(pad(`${row.label} (${row.unit})`, LABEL_WIDTH) + cells.map((c) => padStart(c, CELL_WIDTH)).join(''));
    }
    const once = adapters.map((adapter) => {
      const result = byAdapter.get(adapter);
      if (!result) return '';
      if (result.error) return 'error';
      const failed = result.checks.filter((c) => !c.result.ok).length;
      return failed === 0 ? `ok (${result.checks.length} runs)` : `FAIL (${failed}/${result.checks.length})`;
    });
    lines.push(pad('  exactly once', LABEL_WIDTH) + once.map((c) => padStart(c, CELL_WIDTH)).join(''));
  }
  if (withRatios) lines.push('', 'Ratios are value ÷ reference (for jobs/s higher is better; for ms and MB lower is better).');
  return lines.join('\n');
}

export function formatProblems(results: readonly ScenarioResult[]): string {
  const lines: string[] = [];
  for (const result of results) {
    if (result.error) lines.push(`  ${result.adapter} / ${result.scenario}: ERROR ${result.error.split('\n').slice(0, 6).join('\n    ')}`);
    for (const check of result.checks) {
      if (!check.result.ok) lines.push(`  ${result.adapter} / ${check.run}: ${describeExactlyOnce(check.result)}`);
    }
  }
  return lines.length ? ['Problems:', ...lines].join('\n') : 'Exactly once: every job of every run ran exactly once.';
}

export function formatTargets(targets: readonly TargetResult[]): string {
  const width = Math.max(...targets.map((t) => t.target.length), 10);
  const lines = targets.map((t) => `  [${t.status.toUpperCase().padEnd(4)}] ${t.target.padEnd(width)}  ${t.detail}`);
  if (lines.length === 0) lines.push('  none checked: auto-job-queue (with its defaults) did not run');
  return ['Targets (auto-job-queue):', ...lines].join('\n');
}

function formatValue(m: Measurement): string {
  if (!Number.isFinite(m.value)) return 'n/a';
  switch (m.unit) {
    case 'jobs/s':
      return Math.round(m.value).toLocaleString('en-US');
    case 'ms':
      return m.value < 10 ? m.value.toFixed(2) : m.value < 100 ? m.value.toFixed(1) : Math.round(m.value).toLocaleString('en-US');
    case 'MB':
      return m.value.toFixed(1);
    case '×':
      return `${m.value.toFixed(2)}`;
    case 'kB':
      return m.value.toFixed(2);
    case 'µs':
      return m.value.toFixed(0);
    case 'n':
      return m.value.toFixed(1);
  }
}

function pad(text: string, width: number): string {
  return text.length >= width ? `${text.slice(0, width - 1)} ` : text.padEnd(width);
}

function padStart(text: string, width: number): string {
  return text.length >= width ? ` ${text}` : text.padStart(width);
}
