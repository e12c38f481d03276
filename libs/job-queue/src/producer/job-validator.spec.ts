import type { EntityManager } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import type { EnqueueOptions } from '../base/enqueue-options.js';
import { validateJob } from './job-validator.js';

const INT4_MAX = 2_147_483_647;
const TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000;

function validate(type: unknown, payload: unknown, options?: unknown, index: number | null = null) {
  return validateJob(type, payload, options as EnqueueOptions | undefined, index, 5);
}

function invalid(run: () => unknown): InvalidJobError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidJobError);
    expect((error as InvalidJobError).code).toBe('JOB_INVALID');
    return error as InvalidJobError;
  }
  throw new Error('expected an InvalidJobError, but nothing was thrown');
}

/** Asserts the error names `field` both in `.field` and in its message. */
function expectField(error: InvalidJobError, field: string) {
  expect(error.field).toBe(field);
  expect(error.message).toContain(field);
  expect(error.message).toContain('Nothing was enqueued');
}

describe('validateJob', () => {
  describe('accepts good input', () => {
    it('turns a minimal enqueue into a row with defaults', () => {
      expect(validate('email.welcome', { to: 'ada@example.com' })).toMatchObject({
        type: 'email.welcome',
        payloadJson: '{"to":"ada@example.com"}',
        priority: 0,
        maxAttempts: 5,
        maxAttemptsFromJob: false,
        runAt: null,
        delayMs: 0,
        idempotencyKey: null,
      });
    });

    it('keeps every option it is given', () => {
      const runAt = new Date('2030-01-01T00:00:00Z');
      expect(validate('t', [1], { runAt, priority: -3, maxAttempts: 2, idempotencyKey: 'order-7' })).toMatchObject({
        type: 't',
        payloadJson: '[1]',
        priority: -3,
        maxAttempts: 2,
        maxAttemptsFromJob: true,
        runAt,
        delayMs: 0,
        idempotencyKey: 'order-7',
      });
      expect(validate('t', 1, { delayMs: 1_500 })).toMatchObject({ delayMs: 1_500, runAt: null });
    });

    it.each<[string, unknown, string]>([
      ['null', null, 'null'],
      ['a string', 'x', '"x"'],
      ['a number', 0, '0'],
      ['a Date', new Date('2025-01-02T03:04:05.000Z'), '"2025-01-02T03:04:05.000Z"'],
      ['nested Dates', { at: [new Date(0)] }, '{"at":["1970-01-01T00:00:00.000Z"]}'],
      ['an object with toJSON', { price: { toJSON: () => '9.99' } }, '{"price":"9.99"}'],
      ['an undefined property (dropped, as JSON does)', { a: 1, b: undefined }, '{"a":1}'],
    ])('payload %s', (_label, payload, json) => {
      expect(validate('t', payload).payloadJson).toBe(json);
    });

    it('accepts the edges of each range', () => {
      expect(validate('t'.repeat(200), 1).type).toHaveLength(200);
      expect(validate('t', 1, { priority: INT4_MAX }).priority).toBe(INT4_MAX);
      expect(validate('t', 1, { priority: -INT4_MAX }).priority).toBe(-INT4_MAX);
      expect(validate('t', 1, { maxAttempts: 1 }).maxAttempts).toBe(1);
      expect(validate('t', 1, { maxAttempts: INT4_MAX }).maxAttempts).toBe(INT4_MAX);
      expect(validate('t', 1, { delayMs: 0 }).delayMs).toBe(0);
      expect(validate('t', 1, { delayMs: TEN_YEARS_MS }).delayMs).toBe(TEN_YEARS_MS);
      expect(validate('t', 1, { idempotencyKey: 'k'.repeat(512) }).idempotencyKey).toHaveLength(512);
      expect(validate('t', 1, { idempotencyKey: null }).idempotencyKey).toBeNull();
      expect(validate('t', 1, {}).priority).toBe(0);
    });

    it('accepts an EntityManager-like manager', () => {
      const manager = { query: async () => [], connection: {} } as unknown as EntityManager;
      expect(() => validate('t', 1, { manager })).not.toThrow();
    });
  });

  describe('rejects bad input, naming the field', () => {
    it.each<[string, unknown]>([
      ['undefined', undefined],
      ['null', null],
      ['a number', 42],
      ['an empty string', ''],
      ['only spaces', '   '],
      ['surrounding spaces', ' email.send '],
      ['too long', 't'.repeat(201)],
    ])('type %s', (_label, type) => {
      expectField(invalid(() => validate(type, {})), 'type');
    });

    it.each<[string, unknown, string]>([
      ['undefined', undefined, 'payload is undefined'],
      ['a bigint', { id: 1n }, 'payload.id is a bigint'],
      ['NaN', { n: Number.NaN }, 'payload.n is NaN'],
      ['a function', () => 1, 'payload is a function'],
      ['a Map', new Map(), 'payload is a Map'],
      ['a Set deep inside', { a: [{ b: new Set() }] }, 'payload.a[0].b is a Set'],
      ['undefined inside an array', [1, undefined], 'payload[1] is undefined'],
      ['a NUL character', { s: 'a\u0000b' }, 'payload.s contains a NUL'],
      ['a NUL character in a key', { ['a\u0000']: 1 }, 'NUL'],
      ['a string cut inside an emoji', { s: '👋'.slice(0, 1) }, 'a lone UTF-16 surrogate (\\ud83d'],
      ['a NUL from toJSON', { at: { toJSON: () => 'a\u0000b' } }, 'a NUL character'],
    ])('payload %s', (_label, payload, detail) => {
      const error = invalid(() => validate('t', payload));
      expectField(error, 'payload');
      expect(error.message).toContain(detail);
    });

    it('payload circular', () => {
      const a: Record<string, unknown> = {};
      a.self = a;
      const error = invalid(() => validate('t', a));
      expectField(error, 'payload');
      expect(error.message).toContain('payload.self refers back to itself');
    });

    it('payload whose toJSON throws or returns a bigint', () => {
      const throwing = { toJSON: () => { throw new Error('nope'); } };
      expect(invalid(() => validate('t', { x: throwing })).message).toContain('nope');
      expectField(invalid(() => validate('t', { x: { toJSON: () => 1n } })), 'payload');
    });

    it('payload whose toJSON returns a string with a NUL character (PostgreSQL jsonb cannot store it)', () => {
      const error = invalid(() => validate('t', { x: { toJSON: () => 'a\u0000b' } }));
      expectField(error, 'payload');
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['a number', 5],
      ['a string', 'fast'],
    ])('options %s', (_label, options) => {
      expectField(invalid(() => validate('t', {}, options)), 'options');
    });

    it.each<[string, EnqueueOptions | Record<string, unknown>, string]>([
      ['delayMs and runAt together', { delayMs: 1, runAt: new Date() }, 'options.delayMs'],
      ['delayMs negative', { delayMs: -1 }, 'options.delayMs'],
      ['delayMs NaN', { delayMs: Number.NaN }, 'options.delayMs'],
      ['delayMs Infinity', { delayMs: Infinity }, 'options.delayMs'],
      ['delayMs a string', { delayMs: '10' }, 'options.delayMs'],
      ['delayMs over ten years', { delayMs: TEN_YEARS_MS + 1 }, 'options.delayMs'],
      ['runAt a string', { runAt: '2030-01-01' }, 'options.runAt'],
      ['runAt a number', { runAt: Date.now() }, 'options.runAt'],
      ['runAt an invalid Date', { runAt: new Date('nonsense') }, 'options.runAt'],
      ['priority 1.5', { priority: 1.5 }, 'options.priority'],
      ['priority a string', { priority: '1' }, 'options.priority'],
      ['priority above int4', { priority: INT4_MAX + 1 }, 'options.priority'],
      ['priority below int4', { priority: -INT4_MAX - 2 }, 'options.priority'],
      ['priority NaN', { priority: Number.NaN }, 'options.priority'],
      ['maxAttempts 0', { maxAttempts: 0 }, 'options.maxAttempts'],
      ['maxAttempts -1', { maxAttempts: -1 }, 'options.maxAttempts'],
      ['maxAttempts 2.5', { maxAttempts: 2.5 }, 'options.maxAttempts'],
      ['maxAttempts a string', { maxAttempts: '3' }, 'options.maxAttempts'],
      ['maxAttempts above int4', { maxAttempts: INT4_MAX + 1 }, 'options.maxAttempts'],
      ['idempotencyKey empty', { idempotencyKey: '' }, 'options.idempotencyKey'],
      ['idempotencyKey a number', { idempotencyKey: 7 }, 'options.idempotencyKey'],
      ['idempotencyKey too long', { idempotencyKey: 'k'.repeat(513) }, 'options.idempotencyKey'],
      ['idempotencyKey with a NUL character', { idempotencyKey: 'a\u0000b' }, 'options.idempotencyKey'],
      ['manager not an EntityManager', { manager: {} }, 'options.manager'],
      ['manager without connection', { manager: { query: () => [] } }, 'options.manager'],
      ['manager null', { manager: null }, 'options.manager'],
    ])('%s', (_label, options, field) => {
      expectField(invalid(() => validate('t', {}, options)), field);
    });

    it('shows the rejected value', () => {
      expect(invalid(() => validate('t', {}, { delayMs: -5 })).message).toContain('got -5');
      expect(invalid(() => validate('t', {}, { maxAttempts: 0 })).message).toContain('got 0');
      expect(invalid(() => validate(42, {})).message).toContain('got 42');
    });
  });

  describe('as item 2 of an enqueueMany', () => {
    const prefix = 2;

    it.each<[string, () => unknown, string]>([
      ['type', () => validate('', {}, undefined, prefix), 'jobs[2].type'],
      ['payload', () => validate('t', { a: 1n }, undefined, prefix), 'jobs[2].payload'],
      ['options', () => validate('t', {}, 3, prefix), 'jobs[2].options'],
      ['options.delayMs', () => validate('t', {}, { delayMs: -1 }, prefix), 'jobs[2].options.delayMs'],
      ['options.runAt', () => validate('t', {}, { runAt: 'soon' }, prefix), 'jobs[2].options.runAt'],
      ['options.priority', () => validate('t', {}, { priority: 0.5 }, prefix), 'jobs[2].options.priority'],
      ['options.maxAttempts', () => validate('t', {}, { maxAttempts: 0 }, prefix), 'jobs[2].options.maxAttempts'],
      ['options.idempotencyKey', () => validate('t', {}, { idempotencyKey: '' }, prefix), 'jobs[2].options.idempotencyKey'],
      ['options.manager', () => validate('t', {}, { manager: {} }, prefix), 'jobs[2].options.manager'],
    ])('names %s with the item prefix', (_label, run, field) => {
      expectField(invalid(run), field);
    });

    it('locates a payload problem inside the item', () => {
      const error = invalid(() => validate('t', { list: [1, undefined] }, undefined, prefix));
      expect(error.message).toContain('jobs[2].payload.list[1] is undefined');
    });
  });
});
