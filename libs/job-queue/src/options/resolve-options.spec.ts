import { hostname } from 'node:os';
import type { DataSourceOptions } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import * as defaults from './defaults.js';
import type { JobQueueOptions } from './job-queue-options.js';
import { resolveJobQueueOptions } from './resolve-options.js';

const dataSource: DataSourceOptions = { type: 'postgres', url: 'postgres://user@localhost:5432/app' };

/** Resolves with one option overridden, bypassing the types so bad input reaches the checks. */
function resolveWith(extra: Record<string, unknown>) {
  return resolveJobQueueOptions({ dataSource, ...extra } as JobQueueOptions);
}

function configError(run: () => unknown): JobQueueConfigError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(JobQueueConfigError);
    expect((error as JobQueueConfigError).code).toBe('JOB_QUEUE_CONFIG');
    return error as JobQueueConfigError;
  }
  throw new Error('expected a JobQueueConfigError, but nothing was thrown');
}

describe('resolveJobQueueOptions', () => {
  it('applies the documented defaults', () => {
    const resolved = resolveJobQueueOptions({ dataSource });
    expect(resolved).toEqual({
      dataSource,
      schema: defaults.DEFAULT_SCHEMA,
      autoMigrate: true,
      runWorker: true,
      workerId: expect.any(String),
      concurrency: defaults.DEFAULT_CONCURRENCY,
      pollIntervalMs: defaults.DEFAULT_POLL_INTERVAL_MS,
      leaseMs: defaults.DEFAULT_LEASE_MS,
      drainTimeoutMs: defaults.DEFAULT_DRAIN_TIMEOUT_MS,
      maxQueueDepth: null,
      maxQueueDepthByType: {},
      depthRefreshMs: defaults.DEFAULT_DEPTH_REFRESH_MS,
      retry: {
        maxAttempts: defaults.DEFAULT_MAX_ATTEMPTS,
        baseDelayMs: defaults.DEFAULT_BASE_DELAY_MS,
        maxDelayMs: defaults.DEFAULT_MAX_DELAY_MS,
      },
      deadLetterAlertThreshold: defaults.DEFAULT_DEAD_LETTER_ALERT_THRESHOLD,
      listen: true,
      synchronousClaims: true,
      maintenanceIntervalMs: defaults.DEFAULT_MAINTENANCE_INTERVAL_MS,
      heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
      manualWorker: false,
      metrics: null,
      tracing: true,
      prefetch: defaults.DEFAULT_PREFETCH,
      retention: { completedMs: defaults.DEFAULT_RETENTION_COMPLETED_MS, deadMs: defaults.DEFAULT_RETENTION_DEAD_MS },
    });
  });

  it('documents the contract defaults in defaults.ts', () => {
    expect(defaults).toMatchObject({
      DEFAULT_SCHEMA: 'job_queue',
      DEFAULT_CONCURRENCY: 10,
      DEFAULT_POLL_INTERVAL_MS: 1_000,
      DEFAULT_LEASE_MS: 30_000,
      DEFAULT_DRAIN_TIMEOUT_MS: 25_000,
      DEFAULT_MAX_ATTEMPTS: 5,
      DEFAULT_BASE_DELAY_MS: 1_000,
      DEFAULT_MAX_DELAY_MS: 3_600_000,
      DEFAULT_DEAD_LETTER_ALERT_THRESHOLD: 1,
      DEFAULT_SYNCHRONOUS_CLAIMS: true,
    });
  });

  it('makes a host-pid-random workerId by default, different per resolution', () => {
    const a = resolveJobQueueOptions({ dataSource }).workerId;
    const b = resolveJobQueueOptions({ dataSource }).workerId;
    expect(a.startsWith(`${hostname()}-${process.pid}-`)).toBe(true);
    expect(a).toMatch(/-[0-9a-f]{6}$/);
    expect(a).not.toBe(b);
  });

  it('keeps the values it is given', () => {
    const resolved = resolveJobQueueOptions({
      dataSource,
      schema: 'queue_2',
      autoMigrate: false,
      runWorker: false,
      workerId: 'api-1',
      concurrency: 3,
      pollIntervalMs: 250,
      leaseMs: 100,
      drainTimeoutMs: 0,
      maxQueueDepth: 500,
      maxQueueDepthByType: { 'email.send': 20 },
      depthRefreshMs: 0,
      retry: { maxAttempts: 2, baseDelayMs: 0, maxDelayMs: 0 },
      deadLetterAlertThreshold: 7,
      listen: false,
      synchronousClaims: false,
      maintenanceIntervalMs: 10,
      heartbeatIntervalMs: 200,
    });
    expect(resolved).toMatchObject({
      schema: 'queue_2',
      autoMigrate: false,
      runWorker: false,
      workerId: 'api-1',
      concurrency: 3,
      pollIntervalMs: 250,
      leaseMs: 100,
      drainTimeoutMs: 0,
      maxQueueDepth: 500,
      maxQueueDepthByType: { 'email.send': 20 },
      depthRefreshMs: 0,
      retry: { maxAttempts: 2, baseDelayMs: 0, maxDelayMs: 0 },
      deadLetterAlertThreshold: 7,
      listen: false,
      synchronousClaims: false,
      maintenanceIntervalMs: 10,
      heartbeatIntervalMs: 200,
    });
  });

  it('fills the retry options that were left out', () => {
    expect(resolveWith({ retry: { maxAttempts: 9 } }).retry).toEqual({
      maxAttempts: 9,
      baseDelayMs: defaults.DEFAULT_BASE_DELAY_MS,
      maxDelayMs: defaults.DEFAULT_MAX_DELAY_MS,
    });
  });

  it('accepts an existing DataSource object as it is', () => {
    const existing = { isInitialized: true, options: dataSource };
    expect(resolveWith({ dataSource: existing }).dataSource).toBe(existing);
  });

  it('treats maxQueueDepth null as unbounded', () => {
    expect(resolveWith({ maxQueueDepth: null }).maxQueueDepth).toBeNull();
  });

  it('returns a frozen object, nested objects included', () => {
    const resolved = resolveJobQueueOptions({ dataSource, maxQueueDepthByType: { 'a.b': 1 } });
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.retry)).toBe(true);
    expect(Object.isFrozen(resolved.maxQueueDepthByType)).toBe(true);
    expect(() => {
      (resolved as { concurrency: number }).concurrency = 99;
    }).toThrow(TypeError);
    expect(() => {
      (resolved.retry as { maxAttempts: number }).maxAttempts = 99;
    }).toThrow(TypeError);
  });

  it('does not alias the caller’s maxQueueDepthByType', () => {
    const byType = { 'a.b': 1 };
    const resolved = resolveJobQueueOptions({ dataSource, maxQueueDepthByType: byType });
    byType['a.b'] = 1_000;
    expect(resolved.maxQueueDepthByType['a.b']).toBe(1);
    expect(Object.isFrozen(byType)).toBe(false);
  });

  it('accepts retention.completedMs 0 (delete on complete), keeping the default deadMs', () => {
    expect(resolveWith({ retention: { completedMs: 0 } }).retention).toEqual({
      completedMs: 0,
      deadMs: defaults.DEFAULT_RETENTION_DEAD_MS,
    });
  });

  it('accepts schema names of up to 48 characters', () => {
    expect(resolveWith({ schema: 'a'.repeat(48) }).schema).toBe('a'.repeat(48));
    expect(resolveWith({ schema: '_jobs_2' }).schema).toBe('_jobs_2');
  });

  describe('rejects bad input with a JobQueueConfigError naming the option', () => {
    it('missing options object', () => {
      const error = configError(() => resolveJobQueueOptions(undefined as unknown as JobQueueOptions));
      expect(error.message).toContain('dataSource');
    });

    it.each<[string, unknown]>([
      ['missing', undefined],
      ['null', null],
      ['a string', 'postgres://localhost/app'],
    ])('dataSource %s', (_label, value) => {
      const error = configError(() => resolveJobQueueOptions({ dataSource: value } as JobQueueOptions));
      expect(error.message).toContain('dataSource');
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['concurrency 0', { concurrency: 0 }, 'concurrency'],
      ['concurrency 1.5', { concurrency: 1.5 }, 'concurrency'],
      ['concurrency NaN', { concurrency: Number.NaN }, 'concurrency'],
      ['concurrency "4"', { concurrency: '4' }, 'concurrency'],
      ['leaseMs 50', { leaseMs: 50 }, 'leaseMs'],
      ['pollIntervalMs 5', { pollIntervalMs: 5 }, 'pollIntervalMs'],
      ['drainTimeoutMs -1', { drainTimeoutMs: -1 }, 'drainTimeoutMs'],
      ['maxQueueDepth 0', { maxQueueDepth: 0 }, 'maxQueueDepth'],
      ['depthRefreshMs -1', { depthRefreshMs: -1 }, 'depthRefreshMs'],
      ['deadLetterAlertThreshold 0', { deadLetterAlertThreshold: 0 }, 'deadLetterAlertThreshold'],
      ['maintenanceIntervalMs 1', { maintenanceIntervalMs: 1 }, 'maintenanceIntervalMs'],
      ["schema 'Bad-Name'", { schema: 'Bad-Name' }, 'schema'],
      ['schema too long', { schema: 'a'.repeat(49) }, 'schema'],
      ['schema starting with a digit', { schema: '1jobs' }, 'schema'],
      ['schema empty', { schema: '' }, 'schema'],
      ['schema not a string', { schema: 42 }, 'schema'],
      ['workerId empty', { workerId: '' }, 'workerId'],
      ['workerId too long', { workerId: 'w'.repeat(201) }, 'workerId'],
      ['workerId not a string', { workerId: 7 }, 'workerId'],
      ["runWorker 'yes'", { runWorker: 'yes' }, 'runWorker'],
      ['autoMigrate 1', { autoMigrate: 1 }, 'autoMigrate'],
      ["listen 'false'", { listen: 'false' }, 'listen'],
      ['synchronousClaims 1', { synchronousClaims: 1 }, 'synchronousClaims'],
      ['retry.maxAttempts 0', { retry: { maxAttempts: 0 } }, 'retry.maxAttempts'],
      ['retry.baseDelayMs -1', { retry: { baseDelayMs: -1 } }, 'retry.baseDelayMs'],
      ['retry.maxDelayMs below retry.baseDelayMs', { retry: { baseDelayMs: 5_000, maxDelayMs: 1_000 } }, 'retry.maxDelayMs'],
      ['maxQueueDepthByType with a 0 limit', { maxQueueDepthByType: { 'email.send': 0 } }, "maxQueueDepthByType['email.send']"],
      ['maxQueueDepthByType with a string limit', { maxQueueDepthByType: { 'email.send': '5' } }, "maxQueueDepthByType['email.send']"],
      ['maxQueueDepthByType an array', { maxQueueDepthByType: [5] }, 'maxQueueDepthByType'],
      ['maxQueueDepthByType a number', { maxQueueDepthByType: 5 }, 'maxQueueDepthByType'],
      ['retention.completedMs -1', { retention: { completedMs: -1 } }, 'retention.completedMs must be an integer of at least 0 (got -1)'],
      ['retention.completedMs 0.5', { retention: { completedMs: 0.5 } }, 'retention.completedMs'],
      ["retention.completedMs '0'", { retention: { completedMs: '0' } }, 'retention.completedMs'],
      ['retention.completedMs NaN', { retention: { completedMs: Number.NaN } }, 'retention.completedMs'],
      ['retention.deadMs 0', { retention: { deadMs: 0 } }, 'retention.deadMs'],
      ['metrics 1', { metrics: 1 }, 'metrics must be true, false or { registry }'],
      ['metrics with a registry that is not one', { metrics: { registry: {} } }, 'metrics must be true, false or { registry }'],
      ['heartbeatIntervalMs 5', { heartbeatIntervalMs: 5 }, 'heartbeatIntervalMs must be an integer of at least 10 (got 5)'],
    ])('%s', (_label, extra, name) => {
      const error = configError(() => resolveWith(extra));
      expect(error.message).toContain(name);
    });

    it('says what it got', () => {
      expect(configError(() => resolveWith({ concurrency: 0 })).message).toContain('got 0');
      expect(configError(() => resolveWith({ runWorker: 'yes' })).message).toContain('"yes"');
      expect(configError(() => resolveWith({ schema: 'Bad-Name' })).message).toContain('"Bad-Name"');
    });
  });
});
