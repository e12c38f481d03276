import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { InvalidJobError, JobHandler, type JobContext } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Debounce and unique windows on real PostgreSQL: at most one waiting job per debounce key,
 * whatever enqueues race, always with the latest payload; a debounce whose job started enqueues
 * one more; an idempotency key with `uniqueForMs` dedupes only within its window.
 */
const runs: Array<{ id: string; payload: unknown }> = [];
const releases = new Map<string, () => void>();

@Injectable()
class DebouncedHandlers {
  @JobHandler('db.reindex')
  async reindex(payload: unknown, job: JobContext) {
    runs.push({ id: job.id, payload });
    await new Promise<void>((resolve) => releases.set(job.id, resolve));
  }
}

describe('debounce and unique windows', () => {
  let db: TestDatabase;
  let producers: QueueApp[];
  let worker: QueueApp | undefined;

  const waiting = () =>
    db.query<{ id: string; payload: { rev: number }; run_at_ms: number }>(
      `SELECT id::text, payload, (extract(epoch FROM run_at) * 1000)::float8 AS run_at_ms FROM job_queue.jobs
       WHERE type = 'db.reindex' AND status = 'pending' ORDER BY id`,
    );

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    producers = [await startQueueApp(db.url, { runWorker: false }), await startQueueApp(db.url, { runWorker: false })];
  });

  afterAll(async () => {
    for (const release of releases.values()) release();
    await worker?.close();
    for (const producer of producers ?? []) await producer.close();
    await db?.drop();
  });

  it('keeps one waiting job per key, with the latest payload, its start moved on at each enqueue', async () => {
    const first = await producers[0].producer.enqueue('db.reindex', { rev: 1 }, { debounce: { key: 'doc-7', delayMs: 60_000 } });
    expect(first).toMatchObject({ deduplicated: false, debounced: false });
    const [{ run_at_ms: firstStart }] = await waiting();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = await producers[1].producer.enqueue('db.reindex', { rev: 2 }, { debounce: { key: 'doc-7', delayMs: 60_000 } });
    expect(second).toEqual({ id: first.id, deduplicated: false, debounced: true });
    const rows = await waiting();
    expect(rows).toHaveLength(1);
    expect(rows[0].payload).toEqual({ rev: 2 });
    expect(rows[0].run_at_ms).toBeGreaterThan(firstStart);
    // Another key is another job.
    const other = await producers[0].producer.enqueue('db.reindex', { rev: 1 }, { debounce: { key: 'doc-8', delayMs: 60_000 } });
    expect(other.id).not.toBe(first.id);
    await db.query(`DELETE FROM job_queue.jobs`);
  });

  it('concurrent enqueues of one key from two processes leave exactly one waiting job, with one of their payloads', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => producers[i % 2].producer.enqueue('db.reindex', { rev: i }, { debounce: { key: 'hot', delayMs: 60_000 } })),
    );
    const rows = await waiting();
    expect(rows).toHaveLength(1);
    expect(new Set(results.map((result) => result.id))).toEqual(new Set([rows[0].id]));
    expect(results.filter((result) => !result.debounced)).toHaveLength(1);
    await db.query(`DELETE FROM job_queue.jobs`);
  });

  it('a debounce whose job has started enqueues one more, so the latest data is processed', async () => {
    worker = await startQueueApp(db.url, { pollIntervalMs: 50 }, [DebouncedHandlers]);
    const first = await producers[0].producer.enqueue('db.reindex', { rev: 1 }, { debounce: { key: 'doc-9', delayMs: 0 } });
    await waitFor(() => runs.some((run) => run.id === first.id), { message: 'the first job running' });
    const next = await producers[0].producer.enqueue('db.reindex', { rev: 2 }, { debounce: { key: 'doc-9', delayMs: 0 } });
    expect(next.id).not.toBe(first.id);
    expect(next.debounced).toBe(false);
    releases.get(first.id)?.();
    await waitFor(() => runs.some((run) => run.id === next.id), { message: 'the second job running' });
    expect(runs.find((run) => run.id === next.id)?.payload).toEqual({ rev: 2 });
    releases.get(next.id)?.();
    await worker.close();
    worker = undefined;
  });

  it('an idempotency key with uniqueForMs dedupes within its window only, once under concurrent enqueues', async () => {
    const options = { idempotencyKey: 'daily-report', uniqueForMs: 400 };
    const first = await producers[0].producer.enqueue('db.report', {}, options);
    expect(await producers[1].producer.enqueue('db.report', {}, options)).toEqual({ id: first.id, deduplicated: true });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = await Promise.all(Array.from({ length: 10 }, (_, i) => producers[i % 2].producer.enqueue('db.report', {}, options)));
    const fresh = after.filter((result) => !result.deduplicated);
    expect(fresh).toHaveLength(1);
    expect(fresh[0].id).not.toBe(first.id);
    expect(new Set(after.map((result) => result.id))).toEqual(new Set([fresh[0].id]));
    // The first job still shows the key it was enqueued with.
    expect((await producers[0].admin.getJob(first.id))?.idempotencyKey).toBe('daily-report');
    // Without a window, a key dedupes for as long as its row exists, as before.
    const plain = await producers[0].producer.enqueue('db.report', {}, { idempotencyKey: 'forever' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await producers[0].producer.enqueue('db.report', {}, { idempotencyKey: 'forever' })).toEqual({ id: plain.id, deduplicated: true });
  });

  it('an enqueueMany with debounced items is one transaction: a failing item leaves nothing written', async () => {
    await db.query(`
      CREATE FUNCTION refuse_db_refused() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused by the test'; END $$`);
    await db.query(`CREATE TRIGGER refuse_db_refused BEFORE INSERT ON job_queue.jobs FOR EACH ROW WHEN (NEW.type = 'db.refused') EXECUTE FUNCTION refuse_db_refused()`);
    try {
      const failed = await producers[0].producer
        .enqueueMany([
          { type: 'db.reindex', payload: { rev: 1 }, options: { debounce: { key: 'atomic', delayMs: 60_000 } } },
          { type: 'db.refused', payload: {} },
        ])
        .catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(Error);
      const [{ written }] = await db.query<{ written: number }>(`SELECT count(*)::int AS written FROM job_queue.jobs WHERE debounce_key = 'atomic'`);
      expect(written).toBe(0);
    } finally {
      await db.query('DROP TRIGGER refuse_db_refused ON job_queue.jobs');
      await db.query('DROP FUNCTION refuse_db_refused()');
    }
  });

  it('refuses a debounce without a key, a negative delay, or combined with a start or a key; uniqueForMs without a key', async () => {
    const { producer } = producers[0];
    const refusals: Array<[Record<string, unknown>, string]> = [
      [{ debounce: { delayMs: 10 } }, 'options.debounce.key'],
      [{ debounce: { key: '', delayMs: 10 } }, 'options.debounce.key'],
      [{ debounce: { key: 'k', delayMs: -1 } }, 'options.debounce.delayMs'],
      [{ debounce: { key: 'k' } }, 'options.debounce.delayMs'],
      [{ debounce: 'k' }, 'options.debounce'],
      [{ debounce: { key: 'k', delayMs: 1 }, delayMs: 5 }, 'options.debounce'],
      [{ debounce: { key: 'k', delayMs: 1 }, idempotencyKey: 'x' }, 'options.debounce'],
      [{ uniqueForMs: 1000 }, 'options.uniqueForMs'],
      [{ idempotencyKey: 'x', uniqueForMs: 0 }, 'options.uniqueForMs'],
    ];
    const [{ before }] = await db.query<{ before: number }>(`SELECT count(*)::int AS before FROM job_queue.jobs`);
    for (const [options, field] of refusals) {
      const error = await producer.enqueue('db.reindex', {}, options).catch((e: unknown) => e);
      expect(error, JSON.stringify(options)).toBeInstanceOf(InvalidJobError);
      expect((error as InvalidJobError).field, JSON.stringify(options)).toBe(field);
    }
    const [{ after }] = await db.query<{ after: number }>(`SELECT count(*)::int AS after FROM job_queue.jobs`);
    expect(after).toBe(before);
  });
});
