import type { ScheduleInfo } from '../admin/job-queue.admin.js';
import type { JobRecord } from '../persistence/job-record.js';
import { JOB_STATUSES } from '../base/job-status.js';
import type { JobDependency } from '../base/job-context.js';
import type { CircuitRecord, JobPage, JobStats, ThroughputMinute, WorkerRecord } from '../persistence/job.store.js';
import { page } from './dashboard-layout.js';
import type { DashboardAction } from './dashboard-options.js';
import { escapeHtml, jsonBlock, time } from './html.js';
import { throughputChart } from './throughput-chart.js';

export interface OverviewData {
  stats: JobStats;
  throughput: ThroughputMinute[];
  workers: WorkerRecord[];
  paused: string[];
  circuits: CircuitRecord[];
  schedules: ScheduleInfo[];
  /** Seconds the oldest due waiting job of each type has waited. */
  oldestWaiting: Record<string, number>;
}

const badge = (status: string) => `<span class="badge s-${escapeHtml(status)}">${escapeHtml(status)}</span>`;
const button = (action: string, label: string, kind = '', confirm?: string) =>
  `<button class="${kind}" data-action="${escapeHtml(action)}"${confirm ? ` data-confirm="${escapeHtml(confirm)}"` : ''}>${escapeHtml(label)}</button>`;

export function overviewPage(base: string, data: OverviewData, allowed: ReadonlySet<DashboardAction>): string {
  const { stats } = data;
  const totals = JOB_STATUSES.map(
    (status) => `<div class="card stat s-${status}"><a href="${escapeHtml(`${base}/jobs?status=${status}`)}"><div class="n">${stats[status].toLocaleString('en-US')}</div><div class="l">${status}</div></a></div>`,
  ).join('');
  const types = Object.keys(stats.byType).sort();
  const typeRows = types
    .map((type) => {
      const counts = stats.byType[type];
      const paused = data.paused.includes(type);
      const toggle = paused
        ? allowed.has('resume') ? button(`types/${encodeURIComponent(type)}/resume`, 'Resume', 'primary') : ''
        : allowed.has('pause') ? button(`types/${encodeURIComponent(type)}/pause`, 'Pause') : '';
      const cells = JOB_STATUSES.map((status) => `<td class="num">${counts[status] ? `<a href="${escapeHtml(`${base}/jobs?status=${status}&type=${encodeURIComponent(type)}`)}">${counts[status]}</a>` : '<span class="muted">0</span>'}</td>`).join('');
      return `<tr><td><a href="${escapeHtml(`${base}/jobs?type=${encodeURIComponent(type)}`)}">${escapeHtml(type)}</a>${paused ? ' <span class="badge s-cancelled">paused</span>' : ''}</td>${cells}<td>${toggle}</td></tr>`;
    })
    .join('');
  const workers = data.workers.length
    ? `<table><tr><th>Worker</th><th>Host</th><th class="num">In flight</th><th>Heartbeat</th></tr>${data.workers
        .map((w) => `<tr><td>${escapeHtml(w.id)}${w.draining ? ' <span class="badge s-failed">draining</span>' : ''}</td><td>${escapeHtml(w.host)} · ${w.pid}</td><td class="num">${w.inFlight} / ${w.concurrency}</td><td>${time(w.heartbeatAt)}</td></tr>`)
        .join('')}</table>`
    : '<div class="empty">No live worker.</div>';
  const ages = Object.entries(data.oldestWaiting).sort(([, a], [, b]) => b - a);
  const oldest = ages.length
    ? `<table>${ages.map(([type, seconds]) => `<tr><td><a href="${escapeHtml(`${base}/jobs?status=pending&type=${encodeURIComponent(type)}`)}">${escapeHtml(type)}</a></td><td class="num">${duration(seconds)}</td></tr>`).join('')}</table>`
    : '<div class="empty">Nothing waiting.</div>';
  const circuits = data.circuits.length
    ? data.circuits.map((c) => `<div>${badge(c.state === 'open' ? 'dead' : 'failed')} ${escapeHtml(c.type)} <span class="muted">reopens ${time(c.reopenAt)}</span></div>`).join('')
    : '<div class="empty">All closed.</div>';
  const schedules = data.schedules.length
    ? `<table><tr><th>Schedule</th><th>Cron</th><th>Next</th></tr>${data.schedules
        .map((s) => `<tr><td>${escapeHtml(s.name)} <span class="muted">${escapeHtml(s.source)}</span></td><td><code>${escapeHtml(s.cron)}</code> ${escapeHtml(s.timezone)}</td><td>${time(s.nextSlot)}</td></tr>`)
        .join('')}</table>`
    : '<div class="empty">No cron schedule.</div>';
  const retryAll = stats.dead > 0 && allowed.has('retry') ? button('dead/retry', `Retry all ${stats.dead} dead`, 'primary', `Retry all ${stats.dead} dead jobs?`) : '';
  return page(
    base,
    'Overview',
    'overview',
    `<h1>Overview</h1>
<div class="grid cols-stats">${totals}</div>
<div class="card" style="margin-top:16px"><h2>Throughput, last hour</h2>${throughputChart(data.throughput)}</div>
<div class="grid cols-2" style="margin-top:16px">
  <div class="card"><h2>Live workers</h2>${workers}</div>
  <div class="card"><h2>Oldest waiting job, by type</h2>${oldest}<h2 style="margin-top:14px">Circuits</h2>${circuits}</div>
</div>
<div class="card" style="margin-top:16px"><h2>Job types ${retryAll}</h2>
  <table><tr><th>Type</th>${JOB_STATUSES.map((s) => `<th class="num">${s}</th>`).join('')}<th></th></tr>${typeRows || '<tr><td class="empty" colspan="8">No jobs yet.</td></tr>'}</table></div>
<div class="card" style="margin-top:16px"><h2>Cron schedules</h2>${schedules}</div>`,
  );
}

export function jobsPage(base: string, listing: JobPage, filter: { status: string | null; type: string | null }, allowed: ReadonlySet<DashboardAction>): string {
  const query = (extra: Record<string, string | null>) => {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries({ status: filter.status, type: filter.type, ...extra })) if (value) params.set(key, value);
    const text = params.toString();
    return `${base}/jobs${text ? `?${text}` : ''}`;
  };
  const rows = listing.jobs
    .map(
      (job) => `<tr><td><a href="${escapeHtml(`${base}/jobs/${job.id}`)}">#${escapeHtml(job.id)}</a></td><td>${escapeHtml(job.type)}</td><td>${badge(job.status)}</td>
<td class="num">${job.attempts}/${job.maxAttempts}</td><td>${time(job.createdAt)}</td><td class="err">${escapeHtml(job.lastError ?? '')}</td></tr>`,
    )
    .join('');
  const statusOptions = ['', ...JOB_STATUSES].map((s) => `<option value="${s}"${s === (filter.status ?? '') ? ' selected' : ''}>${s || 'any status'}</option>`).join('');
  const retryAll = filter.status === 'dead' && allowed.has('retry') && listing.jobs.length > 0
    ? button(`dead/retry${filter.type ? `?type=${encodeURIComponent(filter.type)}` : ''}`, `Retry all dead${filter.type ? ` of ${filter.type}` : ''}`, 'primary', 'Retry every dead job shown by this filter?')
    : '';
  const tab = filter.status === 'dead' ? 'dead' : 'jobs';
  return page(
    base,
    filter.status === 'dead' ? 'Dead letters' : 'Jobs',
    tab,
    `<h1>${filter.status === 'dead' ? 'Dead letters' : 'Jobs'}</h1>
<form class="filters" method="get" action="${escapeHtml(`${base}/jobs`)}"><select name="status">${statusOptions}</select>
<input name="type" placeholder="type" value="${escapeHtml(filter.type ?? '')}"><button>Filter</button> ${retryAll}</form>
<div class="card"><table><tr><th>Job</th><th>Type</th><th>Status</th><th class="num">Attempts</th><th>Created</th><th>Last error</th></tr>
${rows || '<tr><td class="empty" colspan="6">No job matches.</td></tr>'}</table>
${listing.nextCursor ? `<p><a href="${escapeHtml(query({ cursor: listing.nextCursor }))}">Older jobs →</a></p>` : ''}</div>`,
  );
}

/** Dependencies listed on a job's page at most; the rest are counted. */
const MAX_LISTED_DEPENDENCIES = 100;

export function jobPage(base: string, job: JobRecord, allowed: ReadonlySet<DashboardAction>, dependencies: readonly JobDependency[] = []): string {
  const actions = [
    job.status === 'dead' && allowed.has('retry') ? button(`jobs/${job.id}/retry`, 'Retry', 'primary') : '',
    ['pending', 'failed', 'processing', 'blocked'].includes(job.status) && allowed.has('cancel') ? button(`jobs/${job.id}/cancel`, 'Cancel', 'danger', 'Cancel this job?') : '',
  ].join(' ');
  const listed = dependencies.slice(0, MAX_LISTED_DEPENDENCIES);
  const waitsFor = dependencies.length
    ? `<div class="card dependencies" style="margin-top:16px"><h2>Depends on (${dependencies.filter((d) => d.status === 'completed').length} of ${dependencies.length} completed)</h2>
<table><tr><th>Job</th><th>Type</th><th>Status</th></tr>${listed
        .map((d) => `<tr><td><a href="${escapeHtml(`${base}/jobs/${d.id}`)}">#${escapeHtml(d.id)}</a></td><td>${escapeHtml(d.type)}</td><td>${badge(d.status)}</td></tr>`)
        .join('')}</table>${dependencies.length > listed.length ? `<div class="empty">and ${dependencies.length - listed.length} more</div>` : ''}</div>`
    : '';
  const timeline: Array<[string, Date | null]> = [
    ['created', job.createdAt],
    ['due', job.runAt],
    ['claimed', job.claimedAt],
    ['retry after', job.retryAfter],
    ['completed', job.completedAt],
    ['dead', job.deadAt],
  ];
  const errors = job.errors.length
    ? `<table><tr><th>Attempt</th><th>At</th><th>Worker</th><th>Error</th></tr>${job.errors
        .map((e) => `<tr><td class="num">${e.attempt}</td><td>${time(e.at)}</td><td>${escapeHtml(e.workerId ?? '–')}</td><td class="err">${escapeHtml(e.error)}</td></tr>`)
        .join('')}</table>`
    : '<div class="empty">No failed attempt.</div>';
  const logs = job.logs.length
    ? `<pre class="json">${job.logs.map((l) => `${escapeHtml(l.at)} [${l.attempt}] ${escapeHtml(l.message)}`).join('\n')}</pre>`
    : '<div class="empty">No log line.</div>';
  return page(
    base,
    `Job ${job.id}`,
    job.status === 'dead' ? 'dead' : 'jobs',
    `<h1>Job #${escapeHtml(job.id)} ${badge(job.status)} ${actions}</h1>
<div class="grid cols-2">
  <div class="card"><h2>Job</h2><dl class="fields"><dt>Type</dt><dd>${escapeHtml(job.type)}</dd><dt>Attempts</dt><dd>${job.attempts} of ${job.maxAttempts}</dd>
  <dt>Priority</dt><dd>${job.priority}</dd><dt>Worker</dt><dd>${escapeHtml(job.workerId ?? '–')}</dd><dt>Idempotency key</dt><dd>${escapeHtml(job.idempotencyKey ?? '–')}</dd>
  ${job.group === null || job.group === undefined ? '' : `<dt>Group</dt><dd>${escapeHtml(job.group)}</dd>`}
  <dt>Last error</dt><dd class="err">${escapeHtml(job.lastError ?? '–')}</dd></dl></div>
  <div class="card"><h2>Timeline</h2><dl class="fields">${timeline.map(([label, at]) => `<dt>${label}</dt><dd>${time(at)}</dd>`).join('')}</dl></div>
</div>
<div class="grid cols-2" style="margin-top:16px">
  <div class="card"><h2>Payload</h2>${jsonBlock(job.payload)}</div>
  <div class="card"><h2>Result</h2>${jsonBlock(job.result ?? null)}<h2 style="margin-top:12px">Progress</h2>${jsonBlock(job.progress ?? null)}</div>
</div>
${waitsFor}
<div class="card" style="margin-top:16px"><h2>Attempts that failed</h2>${errors}</div>
<div class="card" style="margin-top:16px"><h2>Log</h2>${logs}</div>`,
  );
}

/** 75 → "1m 15s": how long something waited. */
function duration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}
