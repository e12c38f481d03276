import { describe, expect, it } from 'vitest';
import { handlerStub } from '../base/registered-handler.stub.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import { resolveJobQueueOptions } from '../options/resolve-options.js';
import type { JobStore } from '../persistence/job.store.js';
import { createEngine, engineSettings } from './create-engine.js';
import { handlersOf, quietLogger } from './scripted-store.stub.js';

const options = resolveJobQueueOptions({ dataSource: { type: 'postgres' }, workerId: 'w-1', leaseMs: 30_000, concurrency: 10, prefetch: 500 });
const unreadPool = () => {
  throw new Error('the pool size is read only for transactional handlers');
};

describe('engineSettings', () => {
  it('passes the resolved options to the worker, and renews leases every leaseMs / 3 (50 ms at least)', () => {
    const settings = engineSettings(options, [handlerStub()], unreadPool, quietLogger);
    expect(settings.worker).toEqual({
      workerId: 'w-1',
      concurrency: 10,
      pollIntervalMs: options.pollIntervalMs,
      leaseMs: 30_000,
      transactionalCapacity: Infinity,
      prefetch: 500,
    });
    expect(settings.renewalIntervalMs).toBe(10_000);
    expect(engineSettings({ ...options, leaseMs: 100 }, [], unreadPool, quietLogger).renewalIntervalMs).toBe(50);
  });

  it.each([
    ['a rate limit', { rateLimit: { max: 5, perMs: 1_000 } }],
    ['global concurrency', { globalConcurrency: 3 }],
    ['a circuit breaker', { circuitBreaker: { failureThreshold: 5, cooldownMs: 1_000 } }],
  ])('turns prefetch off in a worker with a type that has %s', (_label, flow) => {
    const settings = engineSettings(options, [handlerStub({ type: 'plain' }), handlerStub({ type: 'limited', ...flow })], unreadPool, quietLogger);
    expect(settings.worker.prefetch).toBe(0);
  });

  it('keeps rate-limited types’ starts for the longest widened window', () => {
    const handlers = [handlerStub({ type: 'a', rateLimit: { max: 5, perMs: 1_000 } }), handlerStub({ type: 'b', rateLimit: { max: 5, perMs: 60_000 } })];
    expect(engineSettings(options, handlers, unreadPool, quietLogger).longestRateWindowMs).toBe(61_000);
    expect(engineSettings(options, [handlerStub()], unreadPool, quietLogger).longestRateWindowMs).toBe(0);
  });

  it('gives transactional handlers the pool’s connections beyond those kept for claims, renewals and LISTEN', () => {
    const logs: string[] = [];
    const logger = { ...quietLogger, log: (message: string) => logs.push(message) };
    const transactional = [handlerStub({ type: 'ledger.post', transactional: true, concurrency: 10 })];
    expect(engineSettings(options, transactional, () => 10, logger).worker.transactionalCapacity).toBe(7);
    expect(logs).toEqual(['Transactional jobs limited to 7 at once by the pool size (10, 3 reserved).']);
    expect(engineSettings({ ...options, listen: false }, transactional, () => 10, quietLogger).worker.transactionalCapacity).toBe(8);
  });

  it('refuses a pool too small for transactional handlers: a boot error', () => {
    const transactional = [handlerStub({ type: 'ledger.post', transactional: true })];
    expect(() => engineSettings(options, transactional, () => 3, quietLogger)).toThrow(JobQueueConfigError);
    expect(() => engineSettings(options, transactional, () => 3, quietLogger)).toThrow(/Raise the pool size .* to at least 4/);
  });
});

describe('createEngine', () => {
  const engineOf = (handlers = handlersOf(handlerStub({ type: 'report.nightly', schedule: { expression: '0 3 * * *', timezone: 'UTC', next: () => new Date(0) } }))) =>
    createEngine({
      options,
      store: {} as JobStore,
      handlers,
      events: { emit: () => undefined },
      logger: quietLogger,
      enqueue: async () => {
        throw new Error('not used');
      },
      poolSize: unreadPool,
    });

  it('lists no cron schedule before it starts, and drains at once when never started', async () => {
    const engine = engineOf();
    expect(engine.schedules()).toEqual([]);
    expect(engine.status()).toEqual({ inFlight: 0, unstarted: 0, claiming: false, silentForMs: expect.any(Number) });
    expect(await engine.drain()).toEqual({ finished: 0, released: 0 });
  });
});
