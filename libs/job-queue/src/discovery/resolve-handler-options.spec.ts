import type { DataSourceOptions } from 'typeorm';
import { describe, expect, it } from 'vitest';
import type { JobHandlerMetadata, JobHandlerOptions } from '../decorators/job-handler-options.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import { resolveJobQueueOptions } from '../options/resolve-options.js';
import { resolveHandler } from './resolve-handler-options.js';

const dataSource: DataSourceOptions = { type: 'postgres', url: 'postgres://user@localhost:5432/app' };
const moduleOptions = resolveJobQueueOptions({
  dataSource,
  concurrency: 8,
  retry: { maxAttempts: 4, baseDelayMs: 200, maxDelayMs: 10_000 },
});
const invoke = () => 'ran';

function resolve(options: JobHandlerOptions | Record<string, unknown>) {
  return resolveType('email.welcome', options);
}

function resolveType(type: unknown, options: JobHandlerOptions = {}) {
  return resolveHandler({ type, options } as JobHandlerMetadata, 'Mailer.welcome', invoke, moduleOptions);
}

function configError(run: () => unknown): JobQueueConfigError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(JobQueueConfigError);
    return error as JobQueueConfigError;
  }
  throw new Error('expected a JobQueueConfigError, but nothing was thrown');
}

describe('resolveHandler', () => {
  it('takes the module defaults for everything left out', () => {
    const handler = resolve({});
    expect(handler).toMatchObject({
      type: 'email.welcome',
      location: 'Mailer.welcome',
      maxAttempts: 4,
      baseDelayMs: 200,
      maxDelayMs: 10_000,
      concurrency: 8,
      timeoutMs: null,
      schema: null,
      transactional: false,
    });
    expect(handler.invoke).toBe(invoke);
  });

  it('keeps the handler’s own settings', () => {
    const schema = { parse: (input: unknown) => input };
    expect(resolve({ maxAttempts: 2, baseDelayMs: 0, maxDelayMs: 50, concurrency: 3, timeoutMs: 1_500, schema })).toMatchObject({
      maxAttempts: 2,
      baseDelayMs: 0,
      maxDelayMs: 50,
      concurrency: 3,
      timeoutMs: 1_500,
      schema,
    });
  });

  it('keeps groupConcurrency, and leaves it null when not set', () => {
    expect(resolve({ groupConcurrency: 3 }).groupConcurrency).toBe(3);
    expect(resolve({}).groupConcurrency).toBeNull();
  });

  it('caps the handler’s concurrency at the module’s', () => {
    expect(resolve({ concurrency: 50 }).concurrency).toBe(8);
    expect(resolve({ concurrency: 8 }).concurrency).toBe(8);
    expect(resolve({ concurrency: 7 }).concurrency).toBe(7);
  });

  it('raises the default maxDelayMs to a handler baseDelayMs above it', () => {
    expect(resolve({ baseDelayMs: 60_000 })).toMatchObject({ baseDelayMs: 60_000, maxDelayMs: 60_000 });
  });

  it('returns a frozen handler', () => {
    expect(Object.isFrozen(resolve({}))).toBe(true);
  });

  it('accepts job types of up to 200 characters, inner spaces included', () => {
    expect(resolveType('t'.repeat(200)).type).toHaveLength(200);
    expect(resolveType('a b').type).toBe('a b');
    expect(resolveType('x').type).toBe('x');
  });

  describe('rejects a bad declaration with a JobQueueConfigError naming the handler and option', () => {
    it.each<[string, unknown]>([
      ['empty', ''],
      ['blank', '   '],
      ['with a leading space', ' email.welcome'],
      ['with a trailing space', 'email.welcome '],
      ['too long', 't'.repeat(201)],
      ['not a string', 42],
      ['undefined', undefined],
    ])('type %s', (_label, type) => {
      const error = configError(() => resolveType(type));
      expect(error.message).toContain('Mailer.welcome');
      expect(error.message).toContain('job type');
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['maxAttempts 0', { maxAttempts: 0 }, 'maxAttempts'],
      ['maxAttempts 1.5', { maxAttempts: 1.5 }, 'maxAttempts'],
      ['maxAttempts "3"', { maxAttempts: '3' }, 'maxAttempts'],
      ['baseDelayMs -1', { baseDelayMs: -1 }, 'baseDelayMs'],
      ['maxDelayMs -1', { maxDelayMs: -1 }, 'maxDelayMs'],
      ['maxDelayMs below baseDelayMs', { baseDelayMs: 500, maxDelayMs: 100 }, 'maxDelayMs'],
      ['concurrency 0', { concurrency: 0 }, 'concurrency'],
      ['concurrency NaN', { concurrency: Number.NaN }, 'concurrency'],
      ['timeoutMs 0', { timeoutMs: 0 }, 'timeoutMs'],
      ['timeoutMs -5', { timeoutMs: -5 }, 'timeoutMs'],
      ['timeoutMs Infinity', { timeoutMs: Infinity }, 'timeoutMs'],
      ['schema without parse', { schema: {} }, 'schema'],
      ['schema null', { schema: null }, 'schema'],
      ['schema a function', { schema: () => true }, 'schema'],
      ['transactional "yes"', { transactional: 'yes' }, 'transactional'],
      ['groupConcurrency 0', { groupConcurrency: 0 }, 'groupConcurrency'],
      ['groupConcurrency 1.5', { groupConcurrency: 1.5 }, 'groupConcurrency'],
      ['groupConcurrency "2"', { groupConcurrency: '2' }, 'groupConcurrency'],
    ])('%s', (_label, options, name) => {
      const error = configError(() => resolve(options));
      expect(error.message).toContain("@JobHandler('email.welcome') on Mailer.welcome");
      expect(error.message).toContain(name);
    });
  });
});
