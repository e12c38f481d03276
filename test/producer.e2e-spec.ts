import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { InvalidJobError, JobHandler, type EnqueueManyItem, type EnqueueOptions, type JobContext } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

const runs: Array<{ type: string; id: string; payload: unknown }> = [];

/** The only handlers in this file; they run in the `worker` app alone. */
@Injectable()
class ProducerTestHandlers {
  @JobHandler('producer.done')
  done(payload: unknown, job: JobContext) {
    runs.push({ type: job.type, id: job.id, payload });
  }

  @JobHandler('producer.tx')
  tx(payload: unknown, job: JobContext) {
    runs.push({ type: job.type, id: job.id, payload });
  }

  @JobHandler('producer.echo')
  echo(payload: unknown, job: JobContext) {
    runs.push({ type: job.type, id: job.id, payload });
    return { received: payload };
  }
}

describe('JobProducer', () => {
  let db: TestDatabase;
  /** Runs the handlers above. */
  let worker: QueueApp;
  /** Producer-only apps, each with its own DataSource (separate connections). */
  let api: QueueApp;
  let otherApi: QueueApp;
  /** An application DataSource whose transactions the producer joins. */
  let appDataSource: DataSource;

  const totalRows = async () => (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs`))[0].n as number;
  const rowsOf = async (type: string) =>
    (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = $1`, [type]))[0].n as number;
  /** Sessions of this database waiting for the advisory lock `key`. */
  const advisoryWaiters = async (key: number) =>
    (
      await db.query(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
         WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 0 AND l.objid = $1 AND d.datname = current_database()`,
        [key],
      )
    )[0].n as number;
  const completed = (queue: QueueApp, id: string) =>
    waitFor(
      async () => {
        const job = await queue.admin.getJob(id);
        return job?.status === 'completed' ? job : null;
      },
      { timeoutMs: 15_000, message: `job ${id} completed` },
    );

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    worker = await startQueueApp(db.url, { workerId: 'producer-spec-worker' }, [ProducerTestHandlers]);
    api = await startQueueApp(db.url, { runWorker: false });
    otherApi = await startQueueApp(db.url, { runWorker: false });
    appDataSource = await new DataSource({ type: 'postgres', url: db.url }).initialize();
  });
  afterAll(async () => {
    await appDataSource?.destroy();
    await Promise.all([worker?.close(), api?.close(), otherApi?.close()]);
    await db?.drop();
  });

  describe('enqueue', () => {
    it('returns { id, deduplicated: false } and writes a pending row with the defaults', async () => {
      const result = await api.producer.enqueue('producer.plain', { a: 1 });
      expect(Object.keys(result).sort()).toEqual(['deduplicated', 'id']);
      expect(result.deduplicated).toBe(false);
      expect(typeof result.id).toBe('string');
      expect(result.id).toMatch(/^[1-9][0-9]*$/);
      const [row] = await db.query(
        `SELECT type, payload, status, priority, attempts, max_attempts, idempotency_key, worker_id, claimed_at
         FROM job_queue.jobs WHERE id = $1`,
        [result.id],
      );
      expect(row).toEqual({
        type: 'producer.plain',
        payload: { a: 1 },
        status: 'pending',
        priority: 0,
        attempts: 0,
        max_attempts: 5,
        idempotency_key: null,
        worker_id: null,
        claimed_at: null,
      });
    });

    it('allows a type that no handler in this process (or any) runs', async () => {
      const fromApi = await api.producer.enqueue('nobody.handles.this', {});
      // The worker app has handlers, just not for this type.
      const fromWorker = await worker.producer.enqueue('nobody.handles.this', {});
      expect(fromApi.deduplicated).toBe(false);
      expect(fromWorker.deduplicated).toBe(false);
      expect(await rowsOf('nobody.handles.this')).toBe(2);
    });
  });

  describe('idempotency keys', () => {
    it('returns the first job for the same type and key, with deduplicated: true, and adds no row', async () => {
      const first = await api.producer.enqueue('producer.keyed', { version: 1 }, { idempotencyKey: 'order-1' });
      const second = await api.producer.enqueue('producer.keyed', { version: 2 }, { idempotencyKey: 'order-1', priority: 9 });
      const third = await otherApi.producer.enqueue('producer.keyed', { version: 3 }, { idempotencyKey: 'order-1' });
      expect(first.deduplicated).toBe(false);
      expect(second).toEqual({ id: first.id, deduplicated: true });
      expect(third).toEqual({ id: first.id, deduplicated: true });
      const rows = await db.query(`SELECT id::text AS id, payload, priority FROM job_queue.jobs WHERE type = 'producer.keyed'`);
      expect(rows).toEqual([{ id: first.id, payload: { version: 1 }, priority: 0 }]);
    });

    it('keeps deduplicating after the first job completed, without running it again', async () => {
      const first = await api.producer.enqueue('producer.done', { n: 1 }, { idempotencyKey: 'welcome-42' });
      await completed(worker, first.id);
      const again = await api.producer.enqueue('producer.done', { n: 2 }, { idempotencyKey: 'welcome-42' });
      expect(again).toEqual({ id: first.id, deduplicated: true });
      expect(await rowsOf('producer.done')).toBe(1);
      expect((await worker.admin.getJob(first.id))?.status).toBe('completed');
      expect(runs.filter((r) => r.type === 'producer.done').map((r) => r.id)).toEqual([first.id]);
    });

    it('yields exactly one row when the same type and key are enqueued concurrently from several modules', async () => {
      for (const key of ['race-a', 'race-b', 'race-c']) {
        const producers = [
          ...Array.from({ length: 20 }, () => api.producer),
          ...Array.from({ length: 3 }, () => otherApi.producer),
          ...Array.from({ length: 3 }, () => worker.producer),
        ];
        const results = await Promise.all(
          producers.map((producer, i) => producer.enqueue('producer.race', { i }, { idempotencyKey: key })),
        );
        const ids = new Set(results.map((r) => r.id));
        expect(ids.size).toBe(1);
        expect(results.filter((r) => !r.deduplicated)).toHaveLength(1);
        const [row] = await db.query(
          `SELECT count(*)::int AS n, min(id)::text AS id FROM job_queue.jobs WHERE type = 'producer.race' AND idempotency_key = $1`,
          [key],
        );
        expect(row).toEqual({ n: 1, id: [...ids][0] });
      }
    });

    it('yields one row per key when enqueueMany calls with overlapping keys race from several modules', async () => {
      const type = 'producer.many-race';
      const keys = Array.from({ length: 12 }, (_, i) => `many-race-${String(i).padStart(2, '0')}`);
      const producers = [api, otherApi, worker, api, otherApi, worker, api, otherApi].map((queue) => queue.producer);
      // Every call takes two thirds of the keys (each key is in five or six calls), in one order.
      const batches = producers.map((_, call) => keys.filter((_, i) => (i + call) % 3 !== 0));
      const answers = await Promise.all(
        producers.map((producer, call) =>
          producer.enqueueMany(batches[call].map((key) => ({ type, payload: { call, key }, options: { idempotencyKey: key } }))),
        ),
      );

      const rows = await db.query<{ id: string; key: string; payload: { call: number; key: string } }>(
        `SELECT id::text AS id, idempotency_key AS key, payload FROM job_queue.jobs WHERE type = $1 ORDER BY idempotency_key`,
        [type],
      );
      expect(rows.map((row) => row.key)).toEqual(keys);
      const idOf = new Map(rows.map((row) => [row.key, row.id]));
      for (const key of keys) {
        const seen = answers.flatMap((results, call) => {
          const at = batches[call].indexOf(key);
          return at === -1 ? [] : [{ call, ...results[at] }];
        });
        expect(seen.length, `calls that enqueued ${key}`).toBeGreaterThanOrEqual(5);
        // Every call answers with the one row's id; the call whose insert made it is the only one not deduplicated.
        expect(new Set(seen.map((s) => s.id)), `ids answered for ${key}`).toEqual(new Set([idOf.get(key)]));
        const inserters = seen.filter((s) => !s.deduplicated);
        expect(inserters, `calls that inserted ${key}`).toHaveLength(1);
        expect(rows.find((row) => row.key === key)!.payload).toEqual({ call: inserters[0].call, key });
      }
    });

    // Inserted in input order, two batches holding the same keys in opposite orders each took one
    // key and waited for the other, and PostgreSQL ended one with "deadlock detected". The barrier
    // holds both calls until each has reached a row it pauses on, whatever order it inserts in.
    it('settles enqueueMany calls that hold the same keys in opposite orders (no deadlock)', async () => {
      const type = 'producer.opposite-order';
      const barrier = 7_240_001;
      // Each call pauses before its second row until the test lets both go, so both have
      // inserted their first key (uncommitted) before either goes on.
      await db.query(`
        CREATE FUNCTION opposite_order_barrier() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_advisory_xact_lock_shared(${barrier});
          RETURN NEW;
        END $$`);
      await db.query(`
        CREATE TRIGGER opposite_order_barrier BEFORE INSERT ON job_queue.jobs FOR EACH ROW
        WHEN (NEW.type = '${type}' AND NEW.payload ? 'second') EXECUTE FUNCTION opposite_order_barrier()`);
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query(`SELECT pg_advisory_lock($1)`, [barrier]);
        const item = (key: string, second: boolean) => ({
          type,
          payload: second ? { key, second } : { key },
          options: { idempotencyKey: key },
        });
        const calls = Promise.allSettled([
          api.producer.enqueueMany([item('opposite-a', false), item('opposite-b', true)]),
          otherApi.producer.enqueueMany([item('opposite-b', false), item('opposite-a', true)]),
        ]);
        await waitFor(async () => (await advisoryWaiters(barrier)) === 2, { message: 'both calls paused at a row' });
        await holder.query(`SELECT pg_advisory_unlock($1)`, [barrier]);
        const outcomes = (await calls).map((call) => (call.status === 'fulfilled' ? 'enqueued' : String(call.reason)));
        expect(outcomes).toEqual(['enqueued', 'enqueued']);
        const rows = await db.query(`SELECT idempotency_key AS key FROM job_queue.jobs WHERE type = $1 ORDER BY 1`, [type]);
        expect(rows).toEqual([{ key: 'opposite-a' }, { key: 'opposite-b' }]);
      } finally {
        await holder.end();
        await db.query(`DROP TRIGGER opposite_order_barrier ON job_queue.jobs`);
        await db.query(`DROP FUNCTION opposite_order_barrier()`);
      }
    });

    it('inserts anew when the row a key conflicted with is deleted before the producer reads it', async () => {
      const type = 'producer.vanish';
      const pause = 7_240_002;
      const vanishing = await api.producer.enqueue(type, { v: 'deleted meanwhile' }, { idempotencyKey: 'vanish-1' });
      const staying = await api.producer.enqueue(type, { v: 'stays' }, { idempotencyKey: 'vanish-2' });
      // Once armed, the next insert statement into the jobs table pauses at its end (its conflicts
      // found, nothing committed yet) until the test lets it go.
      await db.query(`CREATE TABLE vanish_pause (armed boolean NOT NULL)`);
      await db.query(`
        CREATE FUNCTION vanish_pause() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE armed boolean;
        BEGIN
          DELETE FROM vanish_pause RETURNING true INTO armed;
          IF armed THEN PERFORM pg_advisory_xact_lock_shared(${pause}); END IF;
          RETURN NULL;
        END $$`);
      await db.query(`CREATE TRIGGER vanish_pause AFTER INSERT ON job_queue.jobs FOR EACH STATEMENT EXECUTE FUNCTION vanish_pause()`);
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query(`SELECT pg_advisory_lock($1)`, [pause]);
        await db.query(`INSERT INTO vanish_pause VALUES (true)`);
        const enqueued = api.producer.enqueueMany([
          { type, payload: { v: 'new 1' }, options: { idempotencyKey: 'vanish-0' } },
          { type, payload: { v: 'again 1' }, options: { idempotencyKey: 'vanish-1' } },
          { type, payload: { v: 'again 2' }, options: { idempotencyKey: 'vanish-2' } },
          { type, payload: { v: 'new 3' }, options: { idempotencyKey: 'vanish-3' } },
        ]);
        await waitFor(async () => (await advisoryWaiters(pause)) === 1, { message: 'the insert to pause after its conflicts' });
        // A purge from another session, committed between the insert and the producer's lookup.
        expect(await db.query(`DELETE FROM job_queue.jobs WHERE id = $1 RETURNING id`, [vanishing.id])).toHaveLength(1);
        await holder.query(`SELECT pg_advisory_unlock($1)`, [pause]);
        const results = await enqueued;

        const rows = await db.query<{ id: string; key: string; v: string }>(
          `SELECT id::text AS id, idempotency_key AS key, payload->>'v' AS v FROM job_queue.jobs WHERE type = $1 ORDER BY idempotency_key`,
          [type],
        );
        expect(rows.map((row) => [row.key, row.v])).toEqual([
          ['vanish-0', 'new 1'],
          ['vanish-1', 'again 1'],
          ['vanish-2', 'stays'],
          ['vanish-3', 'new 3'],
        ]);
        const idOf = (key: string) => rows.find((row) => row.key === key)!.id;
        expect(idOf('vanish-1')).not.toBe(vanishing.id);
        expect(results).toEqual([
          { id: idOf('vanish-0'), deduplicated: false },
          { id: idOf('vanish-1'), deduplicated: false },
          { id: staying.id, deduplicated: true },
          { id: idOf('vanish-3'), deduplicated: false },
        ]);
        // The pause was used, by the first insert only.
        expect(await db.query(`SELECT * FROM vanish_pause`)).toEqual([]);
      } finally {
        await holder.end();
        await db.query(`DROP TRIGGER vanish_pause ON job_queue.jobs`);
        await db.query(`DROP FUNCTION vanish_pause()`);
        await db.query(`DROP TABLE vanish_pause`);
      }
    });

    it('treats the same key under different types as different jobs', async () => {
      const a = await api.producer.enqueue('producer.key-a', {}, { idempotencyKey: 'shared' });
      const b = await api.producer.enqueue('producer.key-b', {}, { idempotencyKey: 'shared' });
      expect(a.deduplicated).toBe(false);
      expect(b.deduplicated).toBe(false);
      expect(a.id).not.toBe(b.id);
      expect(await api.producer.enqueue('producer.key-b', {}, { idempotencyKey: 'shared' })).toEqual({ id: b.id, deduplicated: true });
    });
  });

  describe('transactional enqueue', () => {
    it('with `manager`, the job exists only once the transaction commits, and then runs', async () => {
      let insideId: string | undefined;
      let visibleOutsideBeforeCommit: number | undefined;
      await appDataSource.transaction(async (manager) => {
        await manager.query(`CREATE TABLE IF NOT EXISTS app_orders (id serial PRIMARY KEY, note text)`);
        await manager.query(`INSERT INTO app_orders (note) VALUES ('committed order')`);
        const result = await api.producer.enqueue('producer.tx', { order: 'committed' }, { manager });
        expect(result.deduplicated).toBe(false);
        insideId = result.id;
        // Inside the transaction the row is visible; from another connection it is not yet.
        const [own] = await manager.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = $1`, [result.id]);
        expect(own.n).toBe(1);
        visibleOutsideBeforeCommit = (await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE id = $1`, [result.id]))[0].n;
      });
      expect(visibleOutsideBeforeCommit).toBe(0);
      const record = await completed(worker, insideId!);
      expect(record.payload).toEqual({ order: 'committed' });
      expect(runs.filter((r) => r.type === 'producer.tx').map((r) => r.id)).toEqual([insideId]);
      expect((await db.query(`SELECT count(*)::int AS n FROM app_orders`))[0].n).toBe(1);
    });

    it('with `manager`, a rolled-back transaction leaves no job row (enqueue and enqueueMany), and frees the key', async () => {
      const before = await totalRows();
      await expect(
        appDataSource.transaction(async (manager) => {
          await api.producer.enqueue('producer.tx', { order: 'rolled back' }, { manager, idempotencyKey: 'tx-key' });
          await api.producer.enqueueMany([
            { type: 'producer.tx', payload: { many: 1 }, options: { manager } },
            { type: 'producer.tx', payload: { many: 2 }, options: { manager } },
          ]);
          throw new Error('business rule failed');
        }),
      ).rejects.toThrow('business rule failed');
      expect(await totalRows()).toBe(before);
      expect((await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE payload->>'order' = 'rolled back'`))[0].n).toBe(0);
      // The key was never committed, so it is free.
      const later = await api.producer.enqueue('producer.tx.unrun', {}, { idempotencyKey: 'tx-key' });
      expect(later.deduplicated).toBe(false);
    });
  });

  describe('enqueueMany', () => {
    it('returns one result per input in input order, written by one statement', async () => {
      const existing = await api.producer.enqueue('batch.b', { pre: true }, { idempotencyKey: 'already-there' });
      const items: EnqueueManyItem[] = [
        { type: 'batch.a', payload: { i: 0 } },
        { type: 'batch.b', payload: { i: 1 }, options: { priority: 7 } },
        { type: 'batch.b', payload: { i: 2 }, options: { idempotencyKey: 'already-there' } },
        { type: 'batch.a', payload: { i: 3 }, options: { idempotencyKey: 'in-batch', maxAttempts: 2 } },
        { type: 'batch.a', payload: { i: 4 }, options: { idempotencyKey: 'in-batch' } },
        { type: 'batch.c', payload: { i: 5 }, options: { delayMs: 60_000 } },
      ];
      const results = await api.producer.enqueueMany(items);
      expect(results).toHaveLength(items.length);
      expect(results[2]).toEqual({ id: existing.id, deduplicated: true });
      expect(results[4]).toEqual({ id: results[3].id, deduplicated: true });
      const fresh = [0, 1, 3, 5].map((i) => results[i]);
      expect(fresh.every((r) => r.deduplicated === false)).toBe(true);

      const rows = await db.query(
        `SELECT id::text AS id, type, payload, priority, max_attempts, idempotency_key, created_at,
                run_at > created_at + interval '59 seconds' AS delayed
         FROM job_queue.jobs j WHERE j.id = ANY($1::bigint[]) ORDER BY j.id`,
        [fresh.map((r) => r.id)],
      );
      // Ids follow input order, each result points at its own input's row.
      expect(rows.map((r) => r.id)).toEqual(fresh.map((r) => r.id));
      expect(rows.map((r) => r.payload)).toEqual([{ i: 0 }, { i: 1 }, { i: 3 }, { i: 5 }]);
      expect(rows.map((r) => r.type)).toEqual(['batch.a', 'batch.b', 'batch.a', 'batch.c']);
      expect(rows.map((r) => r.priority)).toEqual([0, 7, 0, 0]);
      expect(rows.map((r) => r.max_attempts)).toEqual([5, 5, 2, 5]);
      expect(rows.map((r) => r.idempotency_key)).toEqual([null, null, 'in-batch', null]);
      expect(rows.map((r) => r.delayed)).toEqual([false, false, false, true]);
      // One statement, one transaction: now() is the same instant for every row.
      expect(new Set(rows.map((r) => (r.created_at as Date).toISOString())).size).toBe(1);
      expect(await api.producer.enqueueMany([])).toEqual([]);
    });

    it('rejects the whole call when one item is bad, naming jobs[i], and writes nothing', async () => {
      const before = await totalRows();
      const error = await api.producer
        .enqueueMany([
          { type: 'batch.ok', payload: { i: 0 } },
          { type: 'batch.ok', payload: { i: 1 } },
          { type: 'batch.ok', payload: { bad: () => 1 } },
          { type: 'batch.ok', payload: { i: 3 } },
        ])
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(InvalidJobError);
      expect((error as InvalidJobError).field).toBe('jobs[2].payload');
      expect((error as InvalidJobError).message).toContain('jobs[2].payload');

      const optionError = await api.producer
        .enqueueMany([
          { type: 'batch.ok', payload: {} },
          { type: 'batch.ok', payload: {}, options: { delayMs: -1 } },
        ])
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(optionError).toBeInstanceOf(InvalidJobError);
      expect((optionError as InvalidJobError).field).toBe('jobs[1].options.delayMs');

      const typeError = await api.producer.enqueueMany([{ type: '', payload: {} }]).then(
        () => null,
        (e: unknown) => e,
      );
      expect((typeError as InvalidJobError).field).toBe('jobs[0].type');
      expect(await totalRows()).toBe(before);
    });
  });

  describe('bad input', () => {
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;
    const cases: Array<[string, unknown, unknown, EnqueueOptions | undefined, string]> = [
      ['empty type', '', {}, undefined, 'type'],
      ['non-string type', 42, {}, undefined, 'type'],
      ['whitespace type', '   ', {}, undefined, 'type'],
      ['type with surrounding spaces', ' padded.type ', {}, undefined, 'type'],
      ['undefined payload', 'bad.input', undefined, undefined, 'payload'],
      ['circular payload', 'bad.input', circular, undefined, 'payload'],
      ['BigInt in the payload', 'bad.input', { amount: 10n }, undefined, 'payload'],
      ['function in the payload', 'bad.input', { callback: () => 1 }, undefined, 'payload'],
      ['NaN in the payload', 'bad.input', { n: Number.NaN }, undefined, 'payload'],
      ['a Map payload', 'bad.input', new Map([['a', 1]]), undefined, 'payload'],
      ['a string cut inside an emoji in the payload', 'bad.input', { greeting: '👋 hello'.slice(0, 1) }, undefined, 'payload'],
      ['type with a NUL character', 'bad\u0000input', {}, undefined, 'type'],
      ['idempotencyKey cut inside an emoji', 'bad.input', {}, { idempotencyKey: 'order-👋'.slice(0, 7) }, 'options.idempotencyKey'],
      ['orderingKey cut inside an emoji', 'bad.input', {}, { orderingKey: '👋'.slice(1) }, 'options.orderingKey'],
      ['negative delayMs', 'bad.input', {}, { delayMs: -1 }, 'options.delayMs'],
      ['NaN delayMs', 'bad.input', {}, { delayMs: Number.NaN }, 'options.delayMs'],
      ['Infinity delayMs', 'bad.input', {}, { delayMs: Number.POSITIVE_INFINITY }, 'options.delayMs'],
      ['invalid runAt Date', 'bad.input', {}, { runAt: new Date('not a date') }, 'options.runAt'],
      ['runAt that is not a Date', 'bad.input', {}, { runAt: '2030-01-01' as unknown as Date }, 'options.runAt'],
      ['delayMs together with runAt', 'bad.input', {}, { delayMs: 10, runAt: new Date() }, 'options.delayMs'],
      ['maxAttempts 0', 'bad.input', {}, { maxAttempts: 0 }, 'options.maxAttempts'],
      ['maxAttempts -1', 'bad.input', {}, { maxAttempts: -1 }, 'options.maxAttempts'],
      ['maxAttempts 1.5', 'bad.input', {}, { maxAttempts: 1.5 }, 'options.maxAttempts'],
      ['non-integer priority', 'bad.input', {}, { priority: 1.5 }, 'options.priority'],
      ['string priority', 'bad.input', {}, { priority: '1' as unknown as number }, 'options.priority'],
      ['empty idempotencyKey', 'bad.input', {}, { idempotencyKey: '' }, 'options.idempotencyKey'],
    ];

    it.each(cases)('refuses %s with InvalidJobError naming the field, writing nothing', async (_name, type, payload, options, field) => {
      const before = await totalRows();
      let caught: unknown;
      try {
        await api.producer.enqueue(type as string, payload, options);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(InvalidJobError);
      expect((caught as InvalidJobError).field).toBe(field);
      expect((caught as InvalidJobError).message).toContain(field);
      expect(await totalRows()).toBe(before);
    });

    it('accepts the boundary values next to the refused ones', async () => {
      const ok = await Promise.all([
        api.producer.enqueue('bad.input.boundary', {}, { delayMs: 0 }),
        api.producer.enqueue('bad.input.boundary', {}, { maxAttempts: 1 }),
        api.producer.enqueue('bad.input.boundary', {}, { priority: -3 }),
        api.producer.enqueue('bad.input.boundary', null),
      ]);
      expect(ok.every((r) => r.deduplicated === false)).toBe(true);
      expect(await rowsOf('bad.input.boundary')).toBe(4);
    });
  });

  describe('payload', () => {
    it('round-trips as JSON: nested objects, arrays, unicode; Dates become ISO strings; undefined keys are dropped', async () => {
      const payload = {
        nested: { deep: { deeper: { value: 1.25, flag: false, nothing: null } } },
        list: [1, 'two', { three: [3] }, [], {}],
        unicode: 'Grüße, 世界 🚀 — “quotes” \\ back\\slash\nnew line',
        when: new Date('2024-02-29T12:34:56.789Z'),
        dates: [new Date('2000-01-01T00:00:00.000Z')],
        skipped: undefined,
        big: Number.MAX_SAFE_INTEGER,
        negative: -0.5,
      };
      const expected = JSON.parse(JSON.stringify(payload));
      expect(expected.when).toBe('2024-02-29T12:34:56.789Z');
      expect('skipped' in expected).toBe(false);

      const { id } = await api.producer.enqueue('producer.echo', payload);
      const record = await completed(worker, id);
      expect(record.payload).toEqual(expected);
      expect(runs.find((r) => r.id === id)?.payload).toEqual(expected);
      expect(record.result).toEqual({ received: expected });

      // Non-object payloads too.
      for (const value of ['just a string', 42, [1, [2, [3]]], null, true]) {
        const job = await api.producer.enqueue('producer.echo', value);
        const done = await completed(worker, job.id);
        expect(done.payload).toEqual(value);
        expect(runs.find((r) => r.id === job.id)?.payload).toEqual(value);
      }
    });
  });
});
