import type { JobHandlerMetadata } from '../decorators/job-handler-options.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import { positiveInteger } from '../options/option-checks.js';
import { CronSchedule } from '../schedules/cron-schedule.js';
import type { RegisteredHandler } from '../base/registered-handler.js';

function resolvePair<T extends Record<string, number>, R>(
  where: string,
  name: string,
  value: T | undefined,
  first: keyof T & string,
  second: keyof T & string,
  build: (value: T) => R,
): R | null {
  if (value === undefined) return null;
  if (!value || typeof value !== 'object') throw new JobQueueConfigError(`${where} ${name} must be { ${first}, ${second} }.`);
  positiveInteger(`${where} ${name}.${first}`, value[first]);
  positiveInteger(`${where} ${name}.${second}`, value[second]);
  return build(value);
}

function resolveSchedule(where: string, cron: unknown, timezone: unknown): CronSchedule | null {
  if (cron === undefined) {
    if (timezone !== undefined) throw new JobQueueConfigError(`${where} timezone only applies together with cron.`);
    return null;
  }
  try {
    return CronSchedule.parse(cron as string, (timezone as string | undefined) ?? 'UTC');
  } catch (error) {
    throw new JobQueueConfigError(`${where} ${(error as Error).message}`);
  }
}

function resolveFlag(where: string, name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new JobQueueConfigError(`${where} ${name} must be true or false.`);
  return value;
}

const JOB_TYPE = /^\S(.{0,198}\S)?$/;

/** Validates one `@JobHandler` declaration at boot and merges the module's defaults into it. */
export function resolveHandler(
  metadata: JobHandlerMetadata,
  location: string,
  invoke: RegisteredHandler['invoke'],
  defaults: ResolvedJobQueueOptions,
): RegisteredHandler {
  const { type, options } = metadata;
  if (typeof type !== 'string' || !JOB_TYPE.test(type)) {
    throw new JobQueueConfigError(
      `@JobHandler on ${location} needs a job type: a non-empty string of at most 200 characters without surrounding spaces.`,
    );
  }
  const where = `@JobHandler('${type}') on ${location}:`;
  const check = (name: string, value: number | undefined, fallback: number, min = 1) =>
    positiveInteger(`${where} ${name}`, value ?? fallback, min);
  const baseDelayMs = check('baseDelayMs', options.baseDelayMs, defaults.retry.baseDelayMs, 0);
  const maxDelayMs = check('maxDelayMs', options.maxDelayMs, Math.max(defaults.retry.maxDelayMs, baseDelayMs), 0);
  if (maxDelayMs < baseDelayMs) {
    throw new JobQueueConfigError(`${where} maxDelayMs (${maxDelayMs}) must not be below baseDelayMs (${baseDelayMs}).`);
  }
  if (options.schema !== undefined && typeof options.schema?.parse !== 'function') {
    throw new JobQueueConfigError(`${where} schema must be an object with a parse(input) method (a zod schema fits).`);
  }
  return Object.freeze({
    type,
    location,
    maxAttempts: check('maxAttempts', options.maxAttempts, defaults.retry.maxAttempts),
    baseDelayMs,
    maxDelayMs,
    concurrency: Math.min(check('concurrency', options.concurrency, defaults.concurrency), defaults.concurrency),
    timeoutMs: options.timeoutMs === undefined ? null : check('timeoutMs', options.timeoutMs, 0),
    schema: options.schema ?? null,
    transactional: resolveFlag(where, 'transactional', options.transactional),
    circuitBreaker: resolvePair(where, 'circuitBreaker', options.circuitBreaker, 'failureThreshold', 'cooldownMs', (b) => ({
      failureThreshold: b.failureThreshold,
      cooldownMs: b.cooldownMs,
    })),
    rateLimit: resolvePair(where, 'rateLimit', options.rateLimit, 'max', 'perMs', (r) => ({ max: r.max, perMs: r.perMs })),
    globalConcurrency:
      options.globalConcurrency === undefined ? null : positiveInteger(`${where} globalConcurrency`, options.globalConcurrency),
    groupConcurrency:
      options.groupConcurrency === undefined ? null : positiveInteger(`${where} groupConcurrency`, options.groupConcurrency),
    schedule: resolveSchedule(where, options.cron, options.timezone),
    invoke,
  });
}
