import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { METRIC_NAMES } from '../libs/job-queue/src/metrics/job-queue.metrics.js';

/**
 * deploy/observability/ stays in step with the series the module exports: every rule and panel
 * queries only series that exist (a renamed metric would leave an alert that never fires).
 */
const root = new URL('../deploy/observability/', import.meta.url);
const series = new Set<string>(METRIC_NAMES.flatMap((name) => [name, `${name}_bucket`, `${name}_sum`, `${name}_count`]));
const queried = (expr: string) => [...expr.matchAll(/\b(job_queue_[a-z_]+)\b/g)].map((match) => match[1]);

describe('deploy/observability', () => {
  it('alerts on dead letters, the oldest waiting job, saturation, types with no live worker and open circuits, with exported series only', () => {
    const rules = readFileSync(new URL('prometheus-rules.yml', root), 'utf8');
    const alerts = [...rules.matchAll(/- alert: (\w+)/g)].map((match) => match[1]);
    expect(alerts).toEqual([
      'JobQueueDeadLetters',
      'JobQueueOldestWaitingTooOld',
      'JobQueueSaturated',
      'JobQueueNoWorkerForWaitingJobs',
      'JobQueueCircuitOpen',
    ]);
    const used = queried(rules);
    expect(used.length).toBeGreaterThanOrEqual(6);
    expect(used.filter((name) => !series.has(name))).toEqual([]);
  });

  it('has a Grafana dashboard whose every panel queries exported series', () => {
    const dashboard = JSON.parse(readFileSync(new URL('grafana-dashboard.json', root), 'utf8')) as {
      panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
    };
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(8);
    for (const panel of dashboard.panels) {
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets) {
        const used = queried(target.expr);
        expect(used.length, `${panel.title}: ${target.expr}`).toBeGreaterThan(0);
        expect(used.filter((name) => !series.has(name)), panel.title).toEqual([]);
      }
    }
    const everySeries = new Set(dashboard.panels.flatMap((panel) => panel.targets.flatMap((target) => queried(target.expr))));
    for (const name of METRIC_NAMES.filter((n) => n !== 'job_queue_jobs_enqueued_total')) {
      expect([...everySeries].some((used) => used.startsWith(name)), name).toBe(true);
    }
  });
});
