import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { ClaimQuery } from '../libs/job-queue/src/persistence/claim-query.js';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { jobSql } from '../libs/job-queue/src/persistence/job.sql.js';
import type { ClaimRequest, TypeClaim } from '../libs/job-queue/src/persistence/job.store.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * The statements on the hot path, on real PostgreSQL: the batch insert carries every option
 * through its JSON encoding, the lease token exists exactly while a job runs, and the batched
 * fenced writes stay on the primary key on a table that has never been vacuumed or analysed
 * (where a status index full of dead entries, or a table scan, would make each write cost more
 * as the table's history grows).
 */
describe('hot path statements', () => {
  let db: TestDatabase;
  let api: QueueApp;
  const sql = jobSql('job_queue');
  const claims = new ClaimQuery('job_queue', true);
  const NO_TOKEN = '00000000-0000-4000-8000-000000000000';
  type HeldJob = { id: string; leaseToken: string };
  /** A claim request: each type with its allowance; `limit` defaults to their sum. */
  const request = (perType: TypeClaim[], limit = perType.reduce((sum, t) => sum + t.limit, 0)): ClaimRequest => ({
    workerId: 'w',
    leaseMs: 30_000,
    limit,
    perType,
  });
  /** claims.plainText's parameters for one type, with a fresh lease token. */
  const claimOf = (type: string, n: number, leaseToken: string = randomUUID()) =>
    claims.plainParams(request([{ type, limit: n, maxAttempts: 3 }]), leaseToken);
  /** Claims as the store does: the rows carry the claim's token, which the statement does not return. */
  const claim = async (type: string, n: number): Promise<HeldJob[]> => {
    const leaseToken = randomUUID();
    const rows = await db.query<{ id: string }>(claims.plainText, claimOf(type, n, leaseToken));
    return rows.map((row) => ({ ...row, leaseToken }));
  };

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    api = await startQueueApp(db.url, { runWorker: false });
  });

  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('enqueueMany without idempotency keys writes every option of every item, in input order', async () => {
    const runAt = new Date(Date.now() + 3_600_000);
    const results = await api.producer.enqueueMany([
      { type: 'hot.plain', payload: { quote: 'say "hi"\\', unicode: 'żółw 🐢', nested: [1, { a: null }] } },
      { type: 'hot."odd" type ✓', payload: 'just a string', options: { priority: -3, maxAttempts: 7 } },
      { type: 'hot.plain', payload: [1, 2, 3], options: { delayMs: 60_000, orderingKey: 'key "1"' } },
      { type: 'hot.plain', payload: null, options: { runAt } },
    ]);
    expect(results.map((r) => r.deduplicated)).toEqual([false, false, false, false]);
    const rows = await db.query(
      `SELECT id::text AS id, type, payload, priority, max_attempts, max_attempts_from_job, ordering_key, run_at,
              run_at > created_at + interval '59 seconds' AS delayed, status, attempts, lease_token
       FROM job_queue.jobs WHERE id = ANY($1::bigint[]) ORDER BY jobs.id`,
      [results.map((r) => r.id)],
    );
    expect(rows.map((r) => r.id)).toEqual(results.map((r) => r.id));
    expect(rows.map((r) => r.type)).toEqual(['hot.plain', 'hot."odd" type ✓', 'hot.plain', 'hot.plain']);
    expect(rows.map((r) => r.payload)).toEqual([
      { quote: 'say "hi"\\', unicode: 'żółw 🐢', nested: [1, { a: null }] },
      'just a string',
      [1, 2, 3],
      null,
    ]);
    expect(rows.map((r) => r.priority)).toEqual([0, -3, 0, 0]);
    expect(rows.map((r) => r.max_attempts_from_job)).toEqual([false, true, false, false]);
    expect(rows[1].max_attempts).toBe(7);
    expect(rows.map((r) => r.ordering_key)).toEqual([null, null, 'key "1"', null]);
    expect(rows.map((r) => r.delayed)).toEqual([false, false, true, true]);
    expect((rows[3].run_at as Date).getTime()).toBe(runAt.getTime());
    expect(rows.every((r) => r.status === 'pending' && r.attempts === 0 && r.lease_token === null)).toBe(true);
  });

  it('single enqueues and batches that differ only in payload write every option, in input order', async () => {
    const runAt = new Date(Date.now() + 7_200_000);
    const one = await api.producer.enqueue('hot.one', { a: 'ü "q"' }, { priority: 5, maxAttempts: 4, orderingKey: 'k1', delayMs: 60_000 });
    const two = await api.producer.enqueue('hot.one', 'plain', { runAt });
    const three = await api.producer.enqueue('hot.one', null);
    const sameOptions = { priority: 2, maxAttempts: 9, runAt };
    const batch = await api.producer.enqueueMany(
      [{ b: 1 }, 'two', [3], null, { 'e"': '\\' }].map((payload) => ({ type: 'hot.uniform', payload, options: sameOptions })),
    );
    const delayed = await api.producer.enqueueMany([1, 2].map((payload) => ({ type: 'hot.uniform', payload, options: { delayMs: 60_000 } })));
    const ids = [one, two, three, ...batch, ...delayed].map((r) => r.id);
    const rows = await db.query(
      `SELECT id::text AS id, type, payload, priority, max_attempts, max_attempts_from_job, ordering_key, run_at, notify_on_finish,
              run_at > created_at + interval '59 seconds' AS delayed, status
       FROM job_queue.jobs WHERE id = ANY($1::bigint[]) ORDER BY jobs.id`,
      [ids],
    );
    expect(rows.map((r) => r.id)).toEqual(ids);
    expect(rows.map((r) => r.payload)).toEqual([{ a: 'ü "q"' }, 'plain', null, { b: 1 }, 'two', [3], null, { 'e"': '\\' }, 1, 2]);
    expect(rows.map((r) => r.priority)).toEqual([5, 0, 0, 2, 2, 2, 2, 2, 0, 0]);
    expect(rows.map((r) => r.max_attempts_from_job)).toEqual([true, false, false, true, true, true, true, true, false, false]);
    expect(rows[0].max_attempts).toBe(4);
    expect(rows.slice(3, 8).every((r) => r.max_attempts === 9)).toBe(true);
    expect(rows.map((r) => r.ordering_key)).toEqual(['k1', null, null, null, null, null, null, null, null, null]);
    expect(rows.map((r) => r.delayed)).toEqual([true, true, false, true, true, true, true, true, true, true]);
    expect(rows.filter((r) => (r.run_at as Date).getTime() === runAt.getTime()).map((r) => r.id)).toEqual([two.id, ...batch.map((r) => r.id)]);
    expect(rows.every((r) => r.status === 'pending' && r.notify_on_finish === false)).toBe(true);
  });

  it('refuses a lease token without the processing status, and processing without a token', async () => {
    await expect(
      db.query(`INSERT INTO job_queue.jobs (type, payload, max_attempts, status) VALUES ('hot.check', '{}', 1, 'processing')`),
    ).rejects.toThrow(/jobs_lease_token_while_processing/);
    await expect(
      db.query(`INSERT INTO job_queue.jobs (type, payload, max_attempts, lease_token) VALUES ('hot.check', '{}', 1, gen_random_uuid())`),
    ).rejects.toThrow(/jobs_lease_token_while_processing/);
    const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'hot.check'`);
    expect(n).toBe(0);
  });

  it('gives each claim its own token, so an attempt whose job was claimed again completes nothing', async () => {
    await api.producer.enqueueMany([
      { type: 'hot.fence', payload: { n: 1 } },
      { type: 'hot.fence', payload: { n: 2 } },
    ]);
    const [a, b] = await claim('hot.fence', 2);
    expect(a.leaseToken).toBe(b.leaseToken);
    // a's lease is given up (as on shutdown) and a later claim takes it again: a new attempt.
    await db.query(sql.release, [[a.id], ...fence([a])]);
    const [again] = await claim('hot.fence', 2);
    expect(again.id).toBe(a.id);
    expect(again.leaseToken).not.toBe(a.leaseToken);
    const [stale] = await db.query<{ missed: string | null }>(sql.completeMany, completion([a]));
    expect(stale.missed).toBe(a.id);
    // Two claims' jobs in one batch: b's token is the usual one, again's comes from the map. Only
    // again returned something; b's result stays NULL.
    const [others, usual] = fence([b, again]);
    const withResult = JSON.stringify({ [again.id]: { v: 1 } });
    const [current] = await db.query<{ missed: string | null }>(sql.completeMany, [[b.id, again.id], others, withResult, usual]);
    expect(current.missed).toBeNull();
    const stored = await db.query<{ id: string; result: unknown; no_result: boolean }>(
      `SELECT id::text AS id, result, result IS NULL AS no_result FROM job_queue.jobs WHERE id = ANY ($1::bigint[]) ORDER BY id`,
      [[a.id, b.id]],
    );
    expect(Object.fromEntries(stored.map((r) => [r.id, r.no_result ? 'NULL' : r.result]))).toEqual({ [a.id]: { v: 1 }, [b.id]: 'NULL' });
  });

  it('wakes idle workers from the release statement itself, only when it released a job', async () => {
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (message) => heard.push(message.payload ?? ''));
    await listener.query(`LISTEN "auto_job_queue:job_queue"`);
    // Two round trips on the listening connection: a notification committed before them has arrived.
    const settle = async () => {
      await listener.query('SELECT 1');
      await listener.query('SELECT 1');
    };
    try {
      await api.producer.enqueue('hot.released', {});
      const held = await claim('hot.released', 1);
      await settle();
      heard.length = 0;
      expect(await db.query(sql.release, [held.map((j) => j.id), ...fence(held)])).toEqual([{ id: held[0].id }]);
      await settle();
      expect(heard).toEqual(['new']);
      // Its lease is gone now: the same release changes nothing and wakes nobody.
      expect(await db.query(sql.release, [held.map((j) => j.id), ...fence(held)])).toEqual([]);
      await settle();
      expect(heard).toEqual(['new']);
    } finally {
      await listener.end();
    }
  });

  it('plans claims on their tuple ids, and batched completions, renewals and releases on the primary key, of a never-vacuumed table', async () => {
    await api.producer.enqueueMany(Array.from({ length: 3_000 }, (_, i) => ({ type: 'hot.churn', payload: { i } })));
    // History the way a busy worker makes it: claimed and completed in batches, no vacuum since.
    for (let round = 0; round < 10; round++) {
      const claimed = await claim('hot.churn', 250);
      expect(claimed).toHaveLength(250);
      const [done] = await db.query<{ missed: string | null }>(sql.completeMany, completion(claimed));
      expect(done.missed).toBeNull();
    }
    const held = await claim('hot.churn', 200);
    const plans = {
      claim: await plan(claims.plainText, claimOf('hot.churn', 250)),
      completeMany: await plan(sql.completeMany, completion(held)),
      renewLeases: await plan(sql.renewLeases, renewal(held)),
      release: await plan(sql.release, [held.map((j) => j.id), ...fence(held)]),
    };
    // The claim locks on its own index and updates the locked versions by tuple id.
    expect(plans.claim).toMatch(/Index Scan using jobs_claim_idx/);
    expect(plans.claim).toMatch(/Tid Scan on jobs/);
    for (const [statement, text] of Object.entries(plans)) {
      if (statement !== 'claim') expect(text, statement).toMatch(/jobs_pkey/);
      expect(text, statement).not.toMatch(/Seq Scan on jobs|jobs_lease_idx/);
    }
    // And they are right, not just cheap: a wrong token matches nothing, whether it is the usual
    // one or the map's (which overrides the usual one); the right ones match all.
    const wrongUsual = await db.query<{ held: boolean }>(sql.renewLeases, renewal(held, ['{}', NO_TOKEN]));
    expect(wrongUsual.filter((r) => r.held)).toHaveLength(0);
    const wrongMap = JSON.stringify(Object.fromEntries(held.map((j) => [j.id, NO_TOKEN])));
    const [none] = await db.query<{ missed: string | null }>(sql.completeMany, completion(held, [wrongMap, held[0].leaseToken]));
    expect(none.missed?.split(',').sort()).toEqual(held.map((j) => j.id).sort());
    // One batch, one lease gone: only that job is reported, the other one is completed.
    const [kept, lost] = held;
    const [mixed] = await db.query<{ missed: string | null }>(
      sql.completeMany,
      completion([kept, lost], [JSON.stringify({ [lost.id]: NO_TOKEN }), kept.leaseToken]),
    );
    expect(mixed.missed).toBe(lost.id);
    const released = await db.query(sql.release, [held.map((j) => j.id), ...fence(held)]);
    expect(released).toHaveLength(199);
  });

  it('counts a rate-limited start the handler has not made yet in every window, until markStarted stamps it', async () => {
    await api.producer.enqueueMany(Array.from({ length: 6 }, (_, n) => ({ type: 'hot.rated', payload: { n } })));
    // A long window, and time made to pass by moving the start log back rather than by waiting:
    // each check then has seconds of slack, where sleeps past a 200 ms window had 100 ms.
    const windowMs = 10_000;
    const rated = (limit: number) =>
      claims.flowParams(request([{ type: 'hot.rated', limit, maxAttempts: 3, rateMax: 2, rateWindowMs: windowMs }]), randomUUID());
    const windowsPass = (windows: number) =>
      db.query(`UPDATE job_queue.job_starts SET started_at = started_at - $1 * interval '1 millisecond' WHERE type = 'hot.rated'`, [
        windows * windowMs,
      ]);
    const first = await db.query<{ id: string }>(claims.flowText, rated(6));
    expect(first).toHaveLength(2);
    // A window and a half later, neither handler has started (no markStarted): still no room.
    await windowsPass(1.5);
    expect(await db.query(claims.flowText, rated(6))).toHaveLength(0);
    // Both start now: their starts count from now, not from the claim (from which a window and
    // a half plus the next 0.7 would be over two windows, past what the claim's stamp covers).
    for (const job of first) await db.query(sql.markStarted, [job.id]);
    await windowsPass(0.7);
    expect(await db.query(claims.flowText, rated(6))).toHaveLength(0);
    // Once a whole window has passed since they started, the rate has room again.
    await windowsPass(0.5);
    expect(await db.query(claims.flowText, rated(6))).toHaveLength(2);
  });

  it('keeps every claim plan small on a long backlog, so PostgreSQL never JIT-compiles a claim', async () => {
    // 300,000 waiting jobs over three types, analysed: the planner knows how long the queue is.
    await db.query(`
      INSERT INTO job_queue.jobs (type, payload, max_attempts)
      SELECT 'hot.backlog' || (g % 3), '{}'::jsonb, 3 FROM generate_series(1, 300000) g`);
    await db.query('ANALYZE job_queue.jobs');
    const [{ jit_above_cost: jitAboveCost }] = await db.query(`SELECT current_setting('jit_above_cost')::float8 AS jit_above_cost`);
    const plain = await planJson(
      claims.plainText,
      claims.plainParams(
        request([
          { type: 'hot.backlog0', limit: 200, maxAttempts: 3 },
          { type: 'hot.backlog1', limit: 200, maxAttempts: 3 },
          { type: 'hot.backlog2', limit: 100, maxAttempts: 3 },
        ]),
        randomUUID(),
      ),
    );
    const flow = await planJson(
      claims.flowText,
      claims.flowParams(
        request([
          { type: 'hot.backlog0', limit: 10, maxAttempts: 3, rateMax: 5, rateWindowMs: 1_000 },
          { type: 'hot.backlog1', limit: 10, maxAttempts: 3, globalMax: 4 },
        ]),
        randomUUID(),
      ),
    );
    // The one-type claim, as the generic plan PostgreSQL keeps for a named statement: bounded by its cap.
    const generic = new pg.Client({ connectionString: db.url });
    await generic.connect();
    const oneType: Record<string, { Plan: Record<string, number>; JIT?: unknown }> = {};
    try {
      await generic.query('SET plan_cache_mode = force_generic_plan');
      for (const cap of [16, 1_024, 4_096]) {
        for (const smallTable of [false, true]) {
          const name = `one_${cap}_${smallTable ? 'small' : 'large'}`;
          await generic.query(`PREPARE ${name} AS ${claims.oneType(cap, smallTable)}`);
          const { rows } = await generic.query(`EXPLAIN (FORMAT JSON) EXECUTE ${name}('hot.backlog0', 200, 'w', 30000, 3, '${NO_TOKEN}', 200)`);
          oneType[`oneType cap ${cap}${smallTable ? ' small-table form' : ''}`] = rows[0]['QUERY PLAN'][0];
        }
      }
    } finally {
      await generic.end();
    }
    // Capped by a literal, not a parameter (which the planner would take for a tenth of the backlog).
    expect(oneType['oneType cap 16'].Plan['Total Cost']).toBeLessThan(1_000);
    for (const [statement, explained] of Object.entries({ plain, flow, ...oneType })) {
      expect(explained.JIT, statement).toBeUndefined();
      expect(explained.Plan['Total Cost'], statement).toBeLessThan(Math.min(jitAboveCost, 10_000));
    }
    // Capped by the total limit for the planner's sake, yet only each type's allowance is locked.
    const claimer = new pg.Client({ connectionString: db.url });
    await claimer.connect();
    try {
      await claimer.query('BEGIN');
      const { rows } = await claimer.query(claims.plainText, claims.plainParams(request([{ type: 'hot.backlog0', limit: 2, maxAttempts: 3 }], 500), randomUUID()));
      expect(rows).toHaveLength(2);
      const [{ waiting, lockable }] = await db.query(`
        SELECT (SELECT count(*) FROM job_queue.jobs WHERE type = 'hot.backlog0' AND status = 'pending')::int AS waiting,
               (SELECT count(*) FROM (SELECT id FROM job_queue.jobs WHERE type = 'hot.backlog0' AND status = 'pending'
                                      FOR UPDATE SKIP LOCKED) free)::int AS lockable`);
      // From here the two claimed rows still read as pending (not committed) and are locked; a row
      // locked beyond them would be missing from `lockable` too.
      expect(waiting - lockable).toBe(2);
      await claimer.query('ROLLBACK');
    } finally {
      await claimer.end();
    }
    await db.query(`DELETE FROM job_queue.jobs WHERE type LIKE 'hot.backlog%'`);
  });

  it('keeps one-type claim plans that can never scan a large table: guarded while the table is small, by index and tuple id once it is large', async () => {
    // One connection that is never closed for idleness, so its prepared statements stay in view.
    const dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1, idleTimeoutMillis: 0 } });
    await dataSource.initialize();
    try {
      const store = new PostgresJobStore(dataSource, 'job_queue', { prepare: true, synchronousClaims: true });
      const claimOne = async () => {
        const claimed = await store.claim(request([{ type: 'hot.growing', limit: 1, maxAttempts: 3 }]));
        for (const job of claimed) expect(job.id).toMatch(/^\d+$/);
        return claimed;
      };
      const [{ version }] = await db.query<{ version: number }>(`SELECT current_setting('server_version_num')::int AS version`);
      const statement = async (suffix: string): Promise<{ name: string; generic?: number; runs?: number } | undefined> => {
        const rows: Array<{ name: string; generic?: number; runs?: number }> = await dataSource.query(
          version >= 140_000
            ? `SELECT name, generic_plans::int AS generic, (generic_plans + custom_plans)::int AS runs FROM pg_prepared_statements`
            : `SELECT name FROM pg_prepared_statements`,
        );
        return rows.find((row) => row.name.endsWith(`_${suffix}`));
      };
      const explainGeneric = async (name: string, analyze = false) => {
        await dataSource.query('SET plan_cache_mode = force_generic_plan');
        const rows = await dataSource.query(
          `EXPLAIN ${analyze ? '(ANALYZE, COSTS OFF, TIMING OFF)' : ''} EXECUTE "${name}"('hot.growing', 1, 'w', 30000, 3, '${NO_TOKEN}', 1)`,
        );
        await dataSource.query('RESET plan_cache_mode');
        return rows.map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN']).join('\n');
      };
      await db.query(`TRUNCATE job_queue.jobs CASCADE`);
      // No autovacuum ANALYZE here: it would replace the kept plan this test looks at.
      await db.query(`ALTER TABLE job_queue.jobs SET (autovacuum_enabled = off)`);
      await api.producer.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ type: 'hot.growing', payload: { i } })));

      // A few pages: the guarded form. After five custom plans PostgreSQL keeps a generic one.
      for (let i = 0; i < 8; i++) expect(await claimOne()).toHaveLength(1);
      const small = (await statement('claimOneTypeSmall_16'))!;
      expect(small).toBeDefined();
      if (version >= 140_000) expect(small.generic).toBeGreaterThan(0);
      expect(await statement('claimPlain')).toBeUndefined();

      // Past 64 pages, that kept plan turns claims away without starting a scan of the table.
      await history(4_500);
      expect(await pages()).toBeGreaterThanOrEqual(64);
      expect(await pages()).toBeLessThan(128);
      await dataSource.query('BEGIN');
      const turnedAway = await explainGeneric(small.name, true);
      await dataSource.query('ROLLBACK');
      expect(turnedAway).toMatch(/Limit \(actual rows=0/);
      expect(turnedAway).not.toMatch(/Scan on jobs[^\n]*\(actual rows=[1-9]/);
      expect(turnedAway).not.toMatch(/Seq Scan on jobs[^\n]*\(actual/);
      // The store notices and claims in the large form at once, not at its next size read.
      expect(await claimOne()).toHaveLength(1);
      for (let i = 0; i < 8; i++) expect(await claimOne()).toHaveLength(1);
      const large = (await statement('claimOneType_16_0'))!;
      expect(large).toBeDefined();
      if (version >= 140_000) expect(large.generic).toBeGreaterThan(0);

      // The generic plan made just past 64 pages, kept while the table grows twenty-fold, reads it
      // by index and tuple id, never by a sequential scan.
      await history(80_000);
      const grown = await explainGeneric(large.name);
      expect(grown).toMatch(/Index Scan using jobs_claim_idx/);
      expect(grown).toMatch(/Tid Scan on jobs/);
      expect(grown).not.toMatch(/Seq Scan/);
      expect(await claimOne()).toHaveLength(1);

      // Truncated, the table drops its kept plans; a claim before the next size read makes a new
      // large-form plan on an empty table. Once a read has seen the table small, that plan is
      // never used again: grown back, claims run under a new name, planned at their new size.
      await db.query(`TRUNCATE job_queue.jobs CASCADE`);
      await api.producer.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ type: 'hot.growing', payload: { i } })));
      expect(await claimOne()).toHaveLength(1);
      if (version >= 140_000) {
        // Claims stop using it once the shrink has been read.
        await waitFor(
          async () => {
            const before = (await statement('claimOneType_16_0'))!.runs;
            await claimOne();
            return (await statement('claimOneType_16_0'))!.runs === before;
          },
          { message: 'claims in the guarded form on the truncated table' },
        );
      } else {
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        await claimOne();
      }
      await history(4_500);
      await waitFor(async () => (await claimOne(), (await statement('claimOneType_16_1')) !== undefined), {
        message: 'a claim under the next generation of the large form',
      });
      for (let i = 0; i < 6; i++) await claimOne();
      await history(80_000);
      const regrown = await explainGeneric((await statement('claimOneType_16_1'))!.name);
      expect(regrown).toMatch(/Tid Scan on jobs/);
      expect(regrown).not.toMatch(/Seq Scan/);
    } finally {
      await dataSource.destroy();
      await db.query(`ALTER TABLE job_queue.jobs RESET (autovacuum_enabled)`);
    }
  });

  it('checks ordering keys in one pass in the guarded form, even under a plan made on an empty table', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await db.query(`TRUNCATE job_queue.jobs CASCADE`);
      // Vacuumed while empty: from PostgreSQL 14 the planner then takes the table for empty, its
      // worst case (13 assumes 10 pages).
      await db.query(`VACUUM ANALYZE job_queue.jobs`);
      await client.query('SET plan_cache_mode = force_generic_plan');
      await client.query(`PREPARE small_on_empty AS ${claims.oneType(16, true)}`);
      const params = `('hot.keyed', 16, 'w', 30000, 3, '${NO_TOKEN}', 16)`;
      await client.query(`EXPLAIN EXECUTE small_on_empty${params}`);

      // A key whose oldest job runs, 2,000 jobs waiting behind it, then free jobs with and without keys.
      const [{ running }] = await db.query<{ running: string }>(`
        INSERT INTO job_queue.jobs (type, payload, max_attempts, status, attempts, lease_token, ordering_key)
        VALUES ('hot.keyed', '{}', 3, 'processing', 1, gen_random_uuid(), 'busy') RETURNING id::text AS running`);
      await db.query(`
        INSERT INTO job_queue.jobs (type, payload, max_attempts, ordering_key)
        SELECT 'hot.keyed', '{}', 3, 'busy' FROM generate_series(1, 2000)`);
      const free = await api.producer.enqueueMany([
        { type: 'hot.keyed', payload: { free: 1 }, options: { orderingKey: 'idle' } },
        { type: 'hot.keyed', payload: { free: 2 }, options: { orderingKey: 'idle' } },
        { type: 'hot.keyed', payload: { free: 3 } },
      ]);
      expect(await pages()).toBeLessThan(64);

      await client.query('BEGIN');
      const explained = (await client.query(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE small_on_empty${params}`)).rows
        .map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN'])
        .join('\n');
      await client.query('ROLLBACK');
      // The rule as one hashed set, its scan run once, not a scan per waiting job.
      expect(explained).toMatch(/hashed SubPlan/);
      // Every node ran once: no scan (or walk of a materialised set) per waiting job.
      const loops = [...explained.matchAll(/loops=(\d+)/g)].map((match) => Number(match[1]));
      expect(loops.length).toBeGreaterThan(3);
      expect(loops.every((n) => n === 1)).toBe(true);

      // A claim for another type never builds the set, however many keyed jobs are waiting.
      await client.query('BEGIN');
      const otherType = (await client.query(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE small_on_empty('hot.unkeyed', 16, 'w', 30000, 3, '${NO_TOKEN}', 16)`)).rows
        .map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN'])
        .join('\n');
      await client.query('ROLLBACK');
      const setScans = otherType.split('\n').filter((line) => / on jobs e\b/.test(line));
      expect(setScans.length).toBeGreaterThan(0);
      for (const line of setScans) expect(line).toMatch(/never executed/);

      const { rows } = await client.query(`EXECUTE small_on_empty${params}`);
      // The oldest job of the idle key and the job without a key; nothing behind a running job.
      expect(rows.map((row: { id: string }) => row.id).sort()).toEqual([free[0].id, free[2].id].sort());
      expect(rows.map((row: { id: string }) => row.id)).not.toContain(running);
    } finally {
      await client.end();
      await db.query(`DELETE FROM job_queue.jobs WHERE type = 'hot.keyed'`);
    }
  });

  it.each(['small', 'large'] as const)(
    'one-type claims run each ordering key one job at a time, in enqueue order, retries included, with three claimers (%s-table form)',
    async (form) => {
      await db.query(`TRUNCATE job_queue.jobs CASCADE`);
      if (form === 'large') await history(4_500);
      const keys = ['a', 'b', 'c', 'd', 'e'];
      const items: Array<{ type: string; payload: unknown; options?: { orderingKey: string } }> = [];
      for (let seq = 0; seq < 12; seq++) for (const key of keys) items.push({ type: 'hot.ordered', payload: { seq }, options: { orderingKey: key } });
      for (let i = 0; i < 15; i++) items.push({ type: 'hot.ordered', payload: { i } });
      const enqueued = await api.producer.enqueueMany(items);
      const keyOf = new Map(enqueued.map((job, i) => [job.id, items[i].options?.orderingKey ?? null]));
      // Every seventh job fails its first attempt and is retried 20 ms later, holding its key meanwhile.
      const failOnce = new Set(enqueued.filter((_, i) => i % 7 === 3).map((job) => job.id));
      const sources = await Promise.all(
        [0, 1, 2].map(async () => {
          const source = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1, idleTimeoutMillis: 0 } });
          return source.initialize();
        }),
      );
      try {
        const holding = new Map<string, string>();
        const started = new Map<string, string[]>(keys.map((key) => [key, []]));
        let completed = 0;
        const deadline = Date.now() + 20_000;
        await Promise.all(
          sources.map(async (source) => {
            const store = new PostgresJobStore(source, 'job_queue', { prepare: true, synchronousClaims: true });
            while (completed < items.length) {
              if (Date.now() > deadline) throw new Error(`only ${completed} of ${items.length} jobs completed`);
              const claimed = await store.claim(request([{ type: 'hot.ordered', limit: 3, maxAttempts: 3 }]));
              if (claimed.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
              for (const job of claimed) {
                const key = keyOf.get(job.id);
                if (!key) continue;
                // Claimed while another job of its key is held (its outcome not yet even sent).
                expect(holding.get(key), `key ${key}`).toBeUndefined();
                holding.set(key, job.id);
                started.get(key)!.push(job.id);
              }
              await new Promise((resolve) => setTimeout(resolve, 2));
              for (const job of claimed) {
                const key = keyOf.get(job.id);
                // Released as its outcome is sent: another claimer's reply may be read before this
                // write's, so waiting for the reply could see a legitimate claim as an overlap.
                // (The rows' timestamps cannot decide it either: a claim's now() is taken before
                // its snapshot, by the time it takes to plan it.)
                if (key) holding.delete(key);
                const lease = { id: job.id, leaseToken: job.leaseToken };
                if (failOnce.delete(job.id)) {
                  expect(await store.scheduleRetry(lease, 'failed once', job.attempt, 'w', 20)).toBe(true);
                } else {
                  expect((await store.completeMany([{ lease, resultJson: 'null' }])).has(job.id)).toBe(false);
                  completed++;
                }
              }
            }
          }),
        );
        for (const key of keys) {
          const inOrder = enqueued.filter((_, i) => items[i].options?.orderingKey === key).map((job) => job.id);
          // A retried job starts again before the next one of its key.
          expect(started.get(key)!.filter((id, i, all) => id !== all[i - 1])).toEqual(inOrder);
        }
        const [{ statements }] = await sources[0].query(`SELECT string_agg(name, ',') AS statements FROM pg_prepared_statements`);
        expect(statements).toContain(form === 'small' ? 'claimOneTypeSmall_16' : 'claimOneType_16_0');
        expect(statements).not.toContain('claimPlain');
      } finally {
        await Promise.all(sources.map((source) => source.destroy()));
      }
    },
  );

  it.each(['small-table', 'large-table', 'multi-type'] as const)(
    'a keyed job whose enqueue commits after a later job of its key was claimed waits until that job is done (%s claim)',
    async (form) => {
      await db.query(`TRUNCATE job_queue.jobs CASCADE`);
      if (form === 'large-table') await history(4_500);
      const source = await new DataSource({ type: 'postgres', url: db.url, extra: { max: 2 } }).initialize();
      const store = new PostgresJobStore(source, 'job_queue', { prepare: true, synchronousClaims: true });
      const types: TypeClaim[] = [{ type: 'hot.late', limit: 5, maxAttempts: 3 }];
      if (form === 'multi-type') types.push({ type: 'hot.other', limit: 5, maxAttempts: 3 });
      const late = new pg.Client({ connectionString: db.url });
      await late.connect();
      try {
        // The first job's enqueue runs in a transaction that is still open when the second one's commits.
        await late.query('BEGIN');
        const { rows } = await late.query<{ id: string }>(
          `INSERT INTO job_queue.jobs (type, payload, max_attempts, ordering_key) VALUES ('hot.late', '{}', 3, 'k') RETURNING id::text AS id`,
        );
        const first = rows[0].id;
        const [{ id: second }] = await api.producer.enqueueMany([{ type: 'hot.late', payload: {}, options: { orderingKey: 'k' } }]);
        expect(BigInt(first)).toBeLessThan(BigInt(second));
        const running = await store.claim(request(types));
        expect(running.map((job) => job.id)).toEqual([second]);
        await late.query('COMMIT');
        // The first job is now the oldest of its key, but the second one runs: it waits for it.
        expect(await store.claim(request(types))).toEqual([]);
        expect((await store.completeMany([{ lease: running[0], resultJson: 'null' }])).has(second)).toBe(false);
        expect((await store.claim(request(types))).map((job) => job.id)).toEqual([first]);
      } finally {
        await late.end();
        await source.destroy();
      }
    },
  );

  async function history(rows: number): Promise<void> {
    await db.query(`
      INSERT INTO job_queue.jobs (type, payload, max_attempts, status, attempts, completed_at)
      SELECT 'hot.history', '{}'::jsonb, 3, 'completed', 1, now() FROM generate_series(1, ${rows})`);
  }

  async function pages(): Promise<number> {
    return (await db.query<{ pages: number }>(`SELECT (pg_relation_size('job_queue.jobs') / 8192)::int AS pages`))[0].pages;
  }

  async function planJson(statement: string, params: unknown[]): Promise<{ Plan: Record<string, number>; JIT?: unknown }> {
    const [row] = await db.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, number>; JIT?: unknown }> }>(
      `EXPLAIN (FORMAT JSON) ${statement}`,
      params,
    );
    return row['QUERY PLAN'][0];
  }

  /** The batched fenced statements' tokens: the first job's as the usual one, the others mapped by id. */
  function fence(jobs: readonly HeldJob[]): [others: string, usual: string] {
    const usual = jobs[0].leaseToken;
    return [JSON.stringify(Object.fromEntries(jobs.filter((j) => j.leaseToken !== usual).map((j) => [j.id, j.leaseToken]))), usual];
  }

  /** completeMany's parameters. */
  function completion(jobs: readonly HeldJob[], [others, usual] = fence(jobs)): unknown[] {
    return [jobs.map((j) => j.id), others, results(jobs), usual];
  }

  /** renewLeases' parameters. */
  function renewal(jobs: readonly HeldJob[], [others, usual] = fence(jobs)): unknown[] {
    return [jobs.map((j) => j.id), others, 30_000, usual];
  }

  function results(jobs: ReadonlyArray<{ id: string }>): string {
    return JSON.stringify(Object.fromEntries(jobs.map((j) => [j.id, null])));
  }

  async function plan(statement: string, params: unknown[]): Promise<string> {
    const rows = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement}`, params);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  }
});
