import { InvalidJobError } from '../errors/invalid-job.error.js';
import type { NewJob } from '../persistence/job.store.js';
import type { EnqueueOptions } from '../base/enqueue-options.js';
import { findUnserialisable, isPlainJsonValue } from './payload-check.js';
import { hasLoneSurrogate, jsonbRefusal } from '../persistence/json-text.js';
import { MAX_DEPENDENCIES } from '../persistence/dependent-enqueuer.js';

const INT4_MAX = 2_147_483_647;
const MAX_TYPE_LENGTH = 200;
const MAX_KEY_LENGTH = 512;
/** Anything later than this is a mistake in units, and overflows PostgreSQL's interval maths anyway. */
const MAX_DELAY_MS = 10 * 365 * 24 * 3600 * 1000;
/** A job id: a positive bigint in its canonical decimal form. */
const JOB_ID = /^[1-9][0-9]{0,18}$/;
const BIGINT_MAX = 9_223_372_036_854_775_807n;

/**
 * Turns one enqueue call's input into a row to insert, or throws InvalidJobError naming the field.
 * `index` locates the item in enqueueMany's input (fields read "jobs[3].type"); null for enqueue.
 * Field names are only built for an error: a batch of 20,000 valid jobs builds none.
 */
export function validateJob(
  type: unknown,
  payload: unknown,
  options: EnqueueOptions | undefined,
  index: number | null,
  defaultMaxAttempts: number,
): NewJob {
  const at = (name: string) => (index === null ? name : `jobs[${index}].${name}`);
  if (typeof type !== 'string' || type.trim().length === 0) {
    throw new InvalidJobError(at('type'), `must be a non-empty string (got ${show(type)})`);
  }
  if (type.length > MAX_TYPE_LENGTH || type.trim() !== type || type.includes('\u0000') || hasLoneSurrogate(type)) {
    throw new InvalidJobError(
      at('type'),
      `must be at most ${MAX_TYPE_LENGTH} characters, without surrounding spaces, NUL characters or lone UTF-16 surrogates`,
    );
  }
  if (!isPlainJsonValue(payload)) {
    const problem = findUnserialisable(payload, at('payload'));
    if (problem) throw new InvalidJobError(at('payload'), `is not JSON-serialisable: ${problem}`);
  }
  let payloadJson: string | undefined;
  try {
    payloadJson = JSON.stringify(payload);
  } catch (error) {
    throw new InvalidJobError(at('payload'), `is not JSON-serialisable: ${(error as Error).message}`);
  }
  if (payloadJson === undefined) {
    throw new InvalidJobError(at('payload'), 'is not JSON-serialisable: it serialises to nothing (its toJSON returned undefined)');
  }
  // toJSON methods and lone surrogates are not inspected above; check the text.
  const refusal = jsonbRefusal(payloadJson);
  if (refusal) throw new InvalidJobError(at('payload'), `is not JSON-serialisable: it contains ${refusal}`);

  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new InvalidJobError(at('options'), `must be an object (got ${show(options)})`);
  }
  const o = options ?? {};
  const field = (name: string) => at(`options.${name}`);

  if (o.delayMs !== undefined && o.runAt !== undefined) {
    throw new InvalidJobError(field('delayMs'), 'and options.runAt cannot both be set; choose one');
  }
  let delayMs = 0;
  if (o.delayMs !== undefined) {
    if (typeof o.delayMs !== 'number' || !Number.isFinite(o.delayMs) || o.delayMs < 0) {
      throw new InvalidJobError(field('delayMs'), `must be a finite number of milliseconds, 0 or more (got ${show(o.delayMs)})`);
    }
    if (o.delayMs > MAX_DELAY_MS) throw new InvalidJobError(field('delayMs'), `must be at most ten years (got ${o.delayMs})`);
    delayMs = o.delayMs;
  }
  let runAt: Date | null = null;
  if (o.runAt !== undefined) {
    if (!(o.runAt instanceof Date) || Number.isNaN(o.runAt.getTime())) {
      throw new InvalidJobError(field('runAt'), `must be a valid Date (got ${show(o.runAt)})`);
    }
    runAt = o.runAt;
  }
  const priority = o.priority ?? 0;
  if (typeof priority !== 'number' || !Number.isInteger(priority) || priority > INT4_MAX || priority < -INT4_MAX - 1) {
    throw new InvalidJobError(field('priority'), `must be an integer between -${INT4_MAX + 1} and ${INT4_MAX} (got ${show(priority)})`);
  }
  if (o.maxAttempts !== undefined) {
    if (typeof o.maxAttempts !== 'number' || !Number.isInteger(o.maxAttempts) || o.maxAttempts < 1 || o.maxAttempts > INT4_MAX) {
      throw new InvalidJobError(field('maxAttempts'), `must be a positive integer (got ${show(o.maxAttempts)})`);
    }
  }
  const idempotencyKey = o.idempotencyKey == null ? null : checkedKey(field('idempotencyKey'), o.idempotencyKey);
  const orderingKey = o.orderingKey == null ? null : checkedKey(field('orderingKey'), o.orderingKey);
  const groupKey = o.group == null ? null : checkedKey(field('group'), o.group);
  let uniqueForMs: number | null = null;
  if (o.uniqueForMs !== undefined) {
    if (typeof o.uniqueForMs !== 'number' || !Number.isInteger(o.uniqueForMs) || o.uniqueForMs < 1 || o.uniqueForMs > MAX_DELAY_MS) {
      throw new InvalidJobError(field('uniqueForMs'), `must be a positive integer of milliseconds (got ${show(o.uniqueForMs)})`);
    }
    if (idempotencyKey === null) throw new InvalidJobError(field('uniqueForMs'), 'needs options.idempotencyKey: it limits how long that key dedupes');
    uniqueForMs = o.uniqueForMs;
  }
  let debounceKey: string | null = null;
  if (o.debounce !== undefined) {
    const debounce = o.debounce as { key?: unknown; delayMs?: unknown } | null;
    if (debounce === null || typeof debounce !== 'object') throw new InvalidJobError(field('debounce'), `must be { key, delayMs } (got ${show(debounce)})`);
    debounceKey = checkedKey(field('debounce.key'), debounce.key);
    if (typeof debounce.delayMs !== 'number' || !Number.isFinite(debounce.delayMs) || debounce.delayMs < 0 || debounce.delayMs > MAX_DELAY_MS) {
      throw new InvalidJobError(field('debounce.delayMs'), `must be a finite number of milliseconds, 0 or more (got ${show(debounce.delayMs)})`);
    }
    if (o.delayMs !== undefined || o.runAt !== undefined) {
      throw new InvalidJobError(field('debounce'), 'sets the start itself (delayMs from the last enqueue): drop options.delayMs and options.runAt');
    }
    if (idempotencyKey !== null) throw new InvalidJobError(field('debounce'), 'cannot be combined with options.idempotencyKey; use one or the other');
    delayMs = debounce.delayMs;
  }
  const dependencies = o.dependsOn === undefined ? null : checkedDependencies(field('dependsOn'), o.dependsOn);
  if (o.onDependencyFailure !== undefined) {
    if (o.onDependencyFailure !== 'cancel' && o.onDependencyFailure !== 'run') {
      throw new InvalidJobError(field('onDependencyFailure'), `must be 'cancel' or 'run' (got ${show(o.onDependencyFailure)})`);
    }
    if (dependencies === null) throw new InvalidJobError(field('onDependencyFailure'), 'needs options.dependsOn: it says what a failed dependency does');
  }
  if (dependencies !== null && debounceKey !== null) {
    throw new InvalidJobError(field('dependsOn'), 'cannot be combined with options.debounce: a debounced job is replaced while it waits');
  }
  if (o.manager !== undefined && (typeof o.manager?.query !== 'function' || !o.manager.connection)) {
    throw new InvalidJobError(field('manager'), 'must be a TypeORM EntityManager (the one your transaction callback receives)');
  }
  return {
    type,
    payloadJson,
    priority,
    maxAttempts: o.maxAttempts ?? defaultMaxAttempts,
    maxAttemptsFromJob: o.maxAttempts !== undefined,
    notifyOnFinish: false,
    runAt,
    delayMs,
    idempotencyKey,
    orderingKey,
    ...(groupKey !== null ? { groupKey } : {}),
    ...(uniqueForMs !== null ? { uniqueForMs } : {}),
    ...(debounceKey !== null ? { debounceKey } : {}),
    ...(dependencies !== null && dependencies.length > 0
      ? { dependsOn: dependencies, onDependencyFailure: o.onDependencyFailure ?? 'cancel', dependsOnField: field('dependsOn') }
      : {}),
  };
}

/** Job ids as the database prints them (a bigint's decimal text), each once. */
function checkedDependencies(field: string, value: unknown): string[] {
  if (!Array.isArray(value)) throw new InvalidJobError(field, `must be an array of job ids (got ${show(value)})`);
  if (value.length > MAX_DEPENDENCIES) {
    throw new InvalidJobError(field, `must list at most ${MAX_DEPENDENCIES.toLocaleString('en-US')} jobs (got ${value.length}); add a job that depends on a batch, and depend on that`);
  }
  const ids = new Set<string>();
  for (let i = 0; i < value.length; i++) {
    const id = value[i];
    if (typeof id !== 'string' || !JOB_ID.test(id) || BigInt(id) > BIGINT_MAX) {
      throw new InvalidJobError(`${field}[${i}]`, `must be a job id, as enqueue returned it (got ${show(id)})`);
    }
    ids.add(id);
  }
  return [...ids];
}

/** A given idempotency or ordering key: a short non-empty string PostgreSQL can index. */
function checkedKey(field: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_KEY_LENGTH) {
    throw new InvalidJobError(field, `must be a non-empty string of at most ${MAX_KEY_LENGTH} characters (got ${show(value)})`);
  }
  if (value.includes('\u0000')) throw new InvalidJobError(field, 'must not contain NUL characters');
  if (hasLoneSurrogate(value)) {
    throw new InvalidJobError(field, 'must not contain a lone UTF-16 surrogate (half of a character: a string cut inside an emoji?)');
  }
  return value;
}

function show(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (value instanceof Date) return 'an invalid Date';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  return typeof value;
}
