import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import * as defaults from './defaults.js';
import type { JobQueueOptions, ResolvedJobQueueOptions } from './job-queue-options.js';
import { describe, positiveInteger } from './option-checks.js';

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,47}$/;

/** Applies defaults and validates once at boot; everything downstream trusts the result. */
export function resolveJobQueueOptions(options: JobQueueOptions): ResolvedJobQueueOptions {
  if (!options || typeof options !== 'object') {
    throw new JobQueueConfigError('JobQueueModule.forRoot() needs an options object with at least `dataSource`.');
  }
  if (!options.dataSource || typeof options.dataSource !== 'object') {
    throw new JobQueueConfigError(
      'JobQueueModule options need `dataSource`: TypeORM DataSourceOptions for postgres, or an initialised DataSource.',
    );
  }
  const schema = options.schema ?? defaults.DEFAULT_SCHEMA;
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema)) {
    throw new JobQueueConfigError(
      `schema must be a lower-case PostgreSQL identifier of at most 48 characters (letters, digits, underscores; got ${describe(schema)}).`,
    );
  }
  const workerId = options.workerId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  if (typeof workerId !== 'string' || workerId.length === 0 || workerId.length > 200) {
    throw new JobQueueConfigError(`workerId must be a non-empty string of at most 200 characters.`);
  }
  const retry = options.retry ?? {};
  const baseDelayMs = positiveInteger('retry.baseDelayMs', retry.baseDelayMs ?? defaults.DEFAULT_BASE_DELAY_MS, 0);
  // An unset cap never sits below a base the user raised.
  const maxDelayMs = positiveInteger('retry.maxDelayMs', retry.maxDelayMs ?? Math.max(defaults.DEFAULT_MAX_DELAY_MS, baseDelayMs), 0);
  if (maxDelayMs < baseDelayMs) {
    throw new JobQueueConfigError(`retry.maxDelayMs (${maxDelayMs}) must not be below retry.baseDelayMs (${baseDelayMs}).`);
  }
  const concurrency = positiveInteger('concurrency', options.concurrency ?? defaults.DEFAULT_CONCURRENCY);
  const leaseMs = positiveInteger('leaseMs', options.leaseMs ?? defaults.DEFAULT_LEASE_MS, 100);
  const maxQueueDepth =
    options.maxQueueDepth === undefined || options.maxQueueDepth === null
      ? null
      : positiveInteger('maxQueueDepth', options.maxQueueDepth);

  return Object.freeze({
    dataSource: options.dataSource,
    schema,
    autoMigrate: boolOption('autoMigrate', options.autoMigrate, true),
    runWorker: runWorkerOption(options.runWorker) === true,
    manualWorker: runWorkerOption(options.runWorker) === 'manual',
    workerId,
    concurrency,
    prefetch: positiveInteger('prefetch', options.prefetch ?? defaults.DEFAULT_PREFETCH, 0),
    pollIntervalMs: positiveInteger('pollIntervalMs', options.pollIntervalMs ?? defaults.DEFAULT_POLL_INTERVAL_MS, 10),
    leaseMs,
    drainTimeoutMs: positiveInteger('drainTimeoutMs', options.drainTimeoutMs ?? defaults.DEFAULT_DRAIN_TIMEOUT_MS, 0),
    maxQueueDepth,
    maxQueueDepthByType: Object.freeze(resolveDepthByType(options.maxQueueDepthByType)),
    depthRefreshMs: positiveInteger('depthRefreshMs', options.depthRefreshMs ?? defaults.DEFAULT_DEPTH_REFRESH_MS, 0),
    retry: Object.freeze({
      maxAttempts: positiveInteger('retry.maxAttempts', retry.maxAttempts ?? defaults.DEFAULT_MAX_ATTEMPTS),
      baseDelayMs,
      maxDelayMs,
    }),
    deadLetterAlertThreshold: positiveInteger(
      'deadLetterAlertThreshold',
      options.deadLetterAlertThreshold ?? defaults.DEFAULT_DEAD_LETTER_ALERT_THRESHOLD,
    ),
    listen: boolOption('listen', options.listen, true),
    synchronousClaims: boolOption('synchronousClaims', options.synchronousClaims, defaults.DEFAULT_SYNCHRONOUS_CLAIMS),
    retention: Object.freeze({
      // 0 is delete-on-complete.
      completedMs: positiveInteger(
        'retention.completedMs',
        options.retention?.completedMs ?? defaults.DEFAULT_RETENTION_COMPLETED_MS,
        0,
      ),
      deadMs: positiveInteger('retention.deadMs', options.retention?.deadMs ?? defaults.DEFAULT_RETENTION_DEAD_MS),
    }),
    maintenanceIntervalMs: positiveInteger(
      'maintenanceIntervalMs',
      options.maintenanceIntervalMs ?? defaults.DEFAULT_MAINTENANCE_INTERVAL_MS,
      10,
    ),
    metrics: metricsOption(options.metrics),
    tracing: boolOption('tracing', options.tracing, true),
    heartbeatIntervalMs: positiveInteger('heartbeatIntervalMs', options.heartbeatIntervalMs ?? defaults.DEFAULT_HEARTBEAT_INTERVAL_MS, 10),
  });
}

function metricsOption(value: unknown): { registry: unknown } | null {
  if (value === undefined || value === false) return null;
  if (value === true) return { registry: null };
  const registry = (value as { registry?: unknown } | null)?.registry;
  if (value === null || typeof value !== 'object' || (registry !== undefined && typeof (registry as { registerMetric?: unknown })?.registerMetric !== 'function')) {
    throw new JobQueueConfigError('metrics must be true, false or { registry } with a prom-client Registry.');
  }
  return { registry: registry ?? null };
}

function runWorkerOption(value: unknown): boolean | 'manual' {
  if (value === undefined) return true;
  if (typeof value !== 'boolean' && value !== 'manual') {
    throw new JobQueueConfigError(`runWorker must be true, false or 'manual' (got ${describe(value)}).`);
  }
  return value;
}

function boolOption(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new JobQueueConfigError(`${name} must be true or false (got ${describe(value)}).`);
  return value;
}

function resolveDepthByType(value: unknown): Record<string, number> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new JobQueueConfigError(`maxQueueDepthByType must be an object of job type → limit (got ${describe(value)}).`);
  }
  const limits: Record<string, number> = {};
  for (const [type, limit] of Object.entries(value)) limits[type] = positiveInteger(`maxQueueDepthByType['${type}']`, limit);
  return limits;
}
