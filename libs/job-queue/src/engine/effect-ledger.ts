import { InvalidJobError } from '../errors/invalid-job.error.js';
import { hasLoneSurrogate, jsonbRefusal } from '../persistence/json-text.js';
import type { JobStore } from '../persistence/job.store.js';
import type { EngineLogger } from '../base/logger.js';

const RECORD_RETRY_DELAYS_MS = [100, 300, 1_000];

/**
 * `job.once(key, fn)`: effects outside the database (an e-mail, a payment call) recorded per job
 * and key. The guarantee is at least once for the window between `fn` finishing and the record
 * landing; pass `job.id` or `job.idempotencyKey` to providers that dedupe to close it.
 */
export class EffectLedger {
  constructor(
    private readonly store: JobStore,
    private readonly logger: EngineLogger,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  async once<T>(job: { id: string; type: string; attempt: number }, key: string, fn: () => T | Promise<T>): Promise<T> {
    if (typeof key !== 'string' || key.length === 0 || key.length > 512 || key.includes('\u0000') || hasLoneSurrogate(key)) {
      throw new InvalidJobError(
        'once(key)',
        'must be a non-empty string of at most 512 characters, without NUL characters or lone UTF-16 surrogates',
      );
    }
    if (typeof fn !== 'function') throw new InvalidJobError('once(fn)', 'must be a function');
    const earlier = await this.store.findEffect(job.id, key);
    if (earlier.found) return earlier.result as T;
    const value = await fn();
    let json: string;
    try {
      json = JSON.stringify(value ?? null) ?? 'null';
    } catch {
      this.logger.warn(`Job ${job.id} once('${key}'): the result is not JSON-serialisable; recorded as null.`);
      json = 'null';
    }
    const refusal = jsonbRefusal(json);
    if (refusal) {
      // Recorded all the same: the record, not its result, is what keeps the effect from repeating.
      this.logger.warn(`Job ${job.id} once('${key}'): the result contains ${refusal}; recorded as null.`);
      json = 'null';
    }
    // The effect happened: recording it is what keeps the next attempt from repeating it.
    for (let attempt = 0; ; attempt++) {
      try {
        await this.store.recordEffect(job.id, key, json, job.attempt);
        return value;
      } catch (error) {
        if (attempt >= RECORD_RETRY_DELAYS_MS.length) throw error;
        await this.sleep(RECORD_RETRY_DELAYS_MS[attempt]);
      }
    }
  }
}
