import type { RegisteredHandler } from './registered-handler.js';

/** A resolved handler for unit specs (not shipped: the build leaves out *.stub.ts): plain defaults, anything overridable. */
export function handlerStub(overrides: Partial<RegisteredHandler> = {}): RegisteredHandler {
  return {
    type: 'email.welcome',
    location: 'Mailer.welcome',
    maxAttempts: 5,
    baseDelayMs: 1_000,
    maxDelayMs: 60_000,
    concurrency: 1,
    timeoutMs: null,
    schema: null,
    transactional: false,
    circuitBreaker: null,
    rateLimit: null,
    globalConcurrency: null,
    groupConcurrency: null,
    schedule: null,
    invoke: () => undefined,
    ...overrides,
  };
}
