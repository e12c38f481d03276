import type { JobQueueAdmin } from '../admin/job-queue.admin.js';
import { JOB_STATUSES, type JobStatus } from '../base/job-status.js';
import type { JobRecord } from '../persistence/job-record.js';
import type { CliRequest } from './cli-arguments.js';
import { CliUsageError } from './cli-usage.error.js';
import { parseDuration } from './duration.js';
import { ProgressBar } from './progress-bar.js';
import { textTable } from './text-table.js';

/** What a command prints: for people, or as JSON with --json. */
export interface CliOutput {
  text: string;
  json: unknown;
}

/** The admin commands (all but migrate), each through JobQueueAdmin. */
export async function runAdminCommand(admin: JobQueueAdmin, request: CliRequest): Promise<CliOutput> {
  const { flags, positionals } = request;
  switch (request.command) {
    case 'stats': {
      const stats = await admin.stats();
      const rows = Object.entries(stats.byType)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([type, counts]) => [type, ...JOB_STATUSES.map((status) => counts[status])]);
      rows.push(['(all)', ...JOB_STATUSES.map((status) => stats[status])]);
      return { text: textTable(['type', ...JOB_STATUSES], rows), json: stats };
    }
    case 'jobs': {
      const limit = flags.limit === undefined ? undefined : Number(flags.limit);
      if (limit !== undefined && !Number.isInteger(limit)) throw new CliUsageError(`--limit takes a whole number (got "${flags.limit}").`);
      const page = await admin.listJobs({ status: flags.status as JobStatus | undefined, type: flags.type, limit, cursor: flags.cursor });
      const table = textTable(
        ['id', 'type', 'status', 'attempts', 'created', 'last error'],
        page.jobs.map((job) => [job.id, job.type, job.status, `${job.attempts}/${job.maxAttempts}`, job.createdAt, job.lastError]),
      );
      const more = page.nextCursor ? `\nMore: --cursor ${page.nextCursor}` : '';
      return { text: `${table}${more}`, json: page };
    }
    case 'job': {
      const job = await admin.getJob(positionals[0]);
      if (!job) throw new Error(`No job with id ${positionals[0]}.`);
      return { text: describeJob(job), json: job };
    }
    case 'retry': {
      const job = await admin.retryDead(positionals[0]);
      return { text: `Job ${job.id} (${job.type}) is pending again.`, json: job };
    }
    case 'retry-dead': {
      const stats = await admin.stats();
      const total = flags.type ? (stats.byType[flags.type]?.dead ?? 0) : stats.dead;
      const bar = new ProgressBar('retrying dead jobs', total);
      const retried = await admin.retryDeadMany({ type: flags.type, onProgress: (done) => bar.update(done) });
      bar.end();
      return { text: `Retried ${retried} dead job(s)${flags.type ? ` of ${flags.type}` : ''}.`, json: { retried } };
    }
    case 'cancel': {
      const job = await admin.cancel(positionals[0]);
      return { text: `Job ${job.id} (${job.type}) is cancelled.`, json: job };
    }
    case 'pause':
      await admin.pause(positionals[0]);
      return { text: `Paused ${positionals[0]}: no worker starts its jobs until resume.`, json: { paused: await admin.paused() } };
    case 'resume':
      await admin.resume(positionals[0]);
      return { text: `Resumed ${positionals[0]}.`, json: { paused: await admin.paused() } };
    case 'workers': {
      const workers = await admin.workers();
      const table = textTable(
        ['id', 'host', 'pid', 'in flight', 'concurrency', 'draining', 'heartbeat', 'types'],
        workers.map((w) => [w.id, w.host, w.pid, w.inFlight, w.concurrency, w.draining ? 'yes' : 'no', w.heartbeatAt, w.types.join(', ')]),
      );
      return { text: workers.length === 0 ? 'No live worker.' : table, json: workers };
    }
    case 'purge': {
      if (!flags.status) throw new CliUsageError('purge needs --status completed, dead or cancelled: it never deletes every job.');
      const olderThanMs = flags.olderThan === undefined ? undefined : parseDuration('older-than', flags.olderThan);
      const bar = new ProgressBar(`purging ${flags.status} jobs`, null);
      const deleted = await admin.purge({
        status: flags.status as 'completed' | 'dead' | 'cancelled',
        type: flags.type,
        olderThanMs,
        onProgress: (done) => bar.update(done),
      });
      bar.end();
      return { text: `Deleted ${deleted} ${flags.status} job(s).`, json: { deleted } };
    }
    default:
      throw new CliUsageError(`Unknown command "${request.command}".`);
  }
}

function describeJob(job: JobRecord): string {
  const fields: Array<[string, unknown]> = [
    ['id', job.id],
    ['type', job.type],
    ['status', job.status],
    ['attempts', `${job.attempts} of ${job.maxAttempts}`],
    ['priority', job.priority],
    ['created', job.createdAt],
    ['run at', job.runAt],
    ['claimed', job.claimedAt],
    ['completed', job.completedAt],
    ['dead', job.deadAt],
    ['retry after', job.retryAfter],
    ['worker', job.workerId],
    ['idempotency key', job.idempotencyKey],
    ['last error', job.lastError],
    ['progress', job.progress],
    ['payload', JSON.stringify(job.payload)],
    ['result', job.result === null || job.result === undefined ? null : JSON.stringify(job.result)],
  ];
  const lines = fields.map(([name, value]) => `${name.padEnd(16)}${value === null || value === undefined ? '-' : value instanceof Date ? value.toISOString() : typeof value === 'string' ? value : JSON.stringify(value)}`);
  if (job.errors.length > 0) {
    lines.push('', 'errors:', ...job.errors.map((e) => `  attempt ${e.attempt} at ${e.at} on ${e.workerId ?? '-'}: ${e.error}`));
  }
  if (job.logs.length > 0) lines.push('', 'logs:', ...job.logs.map((l) => `  ${l.at} [${l.attempt}] ${l.message}`));
  return lines.join('\n');
}
