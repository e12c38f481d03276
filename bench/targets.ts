import type { AdapterName } from './adapters/queue-adapter.js';
import type { BenchSizes } from './cli-options.js';
import type { ScenarioResult } from './scenarios/scenario.js';

export interface TargetResult {
  target: string;
  status: 'pass' | 'fail' | 'n/a';
  detail: string;
}

const SUBJECT: AdapterName = 'auto-job-queue';

/** The targets for auto-job-queue, checked against this run's numbers. */
export function evaluateTargets(results: readonly ScenarioResult[], sizes: BenchSizes, compared: boolean): TargetResult[] {
  const value = (adapter: AdapterName, key: string) =>
    results.filter((r) => r.adapter === adapter && !r.error).flatMap((r) => r.measurements).find((m) => m.key === key)?.value;
  const ran = (scenario: string) => results.some((r) => r.scenario === scenario && r.adapter === SUBJECT);
  const targets: TargetResult[] = [];

  /**
   * Ours over a peer's, at least `min`. `paired`: the scenario's ratio to the reference taken
   * round by round (`<key>.paired`) is what counts; the ratio of medians is shown beside it.
   */
  const ratioTarget = (label: string, key: string, peer: AdapterName, min: number, paired = false, subject = SUBJECT) => {
    const ours = value(subject, key);
    const theirs = value(peer, key);
    const byRound = paired ? value(subject, peer === 'reference' ? `${key}.paired` : `${key}.paired.${peer}`) : undefined;
    if (!compared) return targets.push({ target: label, status: 'n/a', detail: 'needs --compare' });
    if (ours === undefined || theirs === undefined || (paired && byRound === undefined)) {
      return targets.push({ target: label, status: 'n/a', detail: 'not measured' });
    }
    const ofMedians = ours / theirs;
    const ratio = byRound ?? ofMedians;
    const figures = `${fmt(ours)} vs ${fmt(theirs)} jobs/s`;
    targets.push({
      target: label,
      status: ratio >= min ? 'pass' : 'fail',
      detail: paired ? `${ratio.toFixed(2)}× (ratio of medians ${ofMedians.toFixed(2)}×: ${figures})` : `${ratio.toFixed(2)}× (${figures})`,
    });
  };
  const limitTarget = (label: string, key: string, max: number, unit: string, strict = false) => {
    const ours = value(SUBJECT, key);
    if (ours === undefined) return targets.push({ target: label, status: 'n/a', detail: 'not measured' });
    const ok = strict ? ours < max : ours <= max;
    targets.push({ target: label, status: ok ? 'pass' : 'fail', detail: `${ours.toFixed(2)} ${unit}` });
  };

  if (ran('drain')) {
    for (const processes of sizes.drainProcesses) {
      for (const concurrency of sizes.drainConcurrency) {
        const key = `drain.c${concurrency}.p${processes}`;
        const run = `c=${concurrency} ×${processes} proc`;
        ratioTarget(`drain ${run} ≥ 1.2× graphile-worker`, key, 'graphile-worker', 1.2);
        ratioTarget(`drain ${run} ≥ 0.8× reference (median of rounds)`, key, 'reference', 0.8, true);
      }
    }
  }
  // Delete on complete (retention.completedMs 0), when both sides ran: ≥ 0.85× the reference that deletes too.
  const deleting = results.some((r) => r.scenario === 'drain' && r.adapter === 'ajq-delete' && !r.error);
  if (deleting && results.some((r) => r.scenario === 'drain' && r.adapter === 'reference-delete' && !r.error)) {
    for (const processes of sizes.drainProcesses) {
      for (const concurrency of sizes.drainConcurrency) {
        const run = `c=${concurrency} ×${processes} proc`;
        const label = `drain ${run}, delete on complete ≥ 0.85× reference-delete (median of rounds)`;
        ratioTarget(label, `drain.c${concurrency}.p${processes}`, 'reference-delete', 0.85, true, 'ajq-delete');
      }
    }
  }
  if (ran('pickup-latency')) {
    limitTarget(`pickup p50 ≤ 2 ms at ${sizes.pickupRatePerSecond}/s`, 'pickup.p50', 2, 'ms');
    limitTarget(`pickup p99 ≤ 10 ms at ${sizes.pickupRatePerSecond}/s`, 'pickup.p99', 10, 'ms');
  }
  if (ran('bulk-enqueue')) ratioTarget('bulk enqueue ≥ 0.8× reference', 'bulk.rate', 'reference', 0.8);
  if (ran('single-enqueue')) ratioTarget('single enqueue ≥ 0.9× reference', 'single.rate', 'reference', 0.9);
  if (ran('claim-latency')) {
    const levels = sizes.claimRetained;
    limitTarget(`claim p50 with ${levels.at(-1)!.toLocaleString('en-US')} retained ≤ 1.2× with ${levels[0]} (measured alongside)`, 'claim.ratio', 1.2, '×');
  }
  if (ran('group-fairness')) {
    // "Within the first few claims": every one of the 50 small groups' jobs has started by the
    // 10th claim of a worker of concurrency 10 (at most 100 starts), the noisy group's backlog
    // notwithstanding.
    limitTarget('last of 50 small groups started within 10 claims, behind a backlog of one group', 'group.claimsToLastSmall', 10, 'claims');
  }
  if (ran('worker-rss')) {
    limitTarget(`worker RSS growth over ${sizes.rssJobs.toLocaleString('en-US')} jobs < 30 MB`, 'rss.growth', 30, 'MB', true);
  }

  const ours = results.filter((r) => r.adapter === SUBJECT);
  if (ours.length > 0) {
    const failed = ours.flatMap((r) => (r.error ? [`${r.scenario}: error`] : r.checks.filter((c) => !c.result.ok).map((c) => c.run)));
    const runs = ours.reduce((n, r) => n + r.checks.length, 0);
    targets.push({
      target: 'exactly once in every scenario',
      status: failed.length === 0 ? 'pass' : 'fail',
      detail: failed.length === 0 ? `${runs} runs checked` : `failed: ${failed.join(', ')}`,
    });
  }
  return targets;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
