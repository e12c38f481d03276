import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ClaimQuery } from '../libs/job-queue/src/persistence/claim-query.js';
import { jobSql } from '../libs/job-queue/src/persistence/job.sql.js';
import { LEASE_EXPIRIES_BEYOND_ATTEMPTS } from '../libs/job-queue/src/persistence/maintenance.sql.js';
import { type ChildWorker, spawnWorker } from './support/child-worker.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Attempts are charged when a job starts, not when it is claimed (docs/decisions/0090): a
 * SIGKILLed worker's prefetched, never-started jobs go back with their attempts, however often
 * that happens; the jobs it had started count that run; a job that kills its worker still ends in
 * the dead letters.
 */

const LEASE_MS = 1_500;
const MAX_ATTEMPTS = 3;
const env = { AJQ_FIXTURE_MAX_ATTEMPTS: String(MAX_ATTEMPTS) };

describe('attempts charged at start', () => {
  let db: TestDatabase;
  let api: QueueApp;
  const children: ChildWorker[] = [];
  const sql = jobSql('job_queue');

  async function child(workerId: string, options: Record<string, unknown> = {}): Promise<ChildWorker> {
    const worker = await spawnWorker(
      { url: db.url, workerId, leaseMs: LEASE_MS, maintenanceIntervalMs: 60_000, pollIntervalMs: 200, drainTimeoutMs: 2_000, ...options },
      env,
    );
    children.push(worker);
    return worker;
  }

  /** The dead worker's leases run out (it renews nothing any more), and the reaper's statement runs, as a maintenance pass would. */
  async function reapAfterDeath(workerId: string) {
    await db.query(`UPDATE job_queue.jobs SET lease_expires_at = now() - interval '1 second' WHERE worker_id = $1 AND status = 'processing'`, [
      workerId,
    ]);
    return db.query<{ id: string; status: string }>(sql.reapExpiredLeases, [4_000]);
  }

  async function rows(ids: readonly string[]) {
    return db.query<{ id: string; status: string; attempts: number; worker_id: string | null; last_error: string | null; errors: unknown[] }>(
      `SELECT id::text AS id, status, attempts, worker_id, last_error, errors FROM job_queue.jobs WHERE id = ANY($1::bigint[]) ORDER BY id`,
      [ids],
    );
  }

  async function runsOf(ids: readonly string[]) {
    return db.query<{ job_id: string; attempt: number; worker_id: string }>(
      `SELECT job_id::text AS job_id, attempt, worker_id FROM fixture_invocations WHERE job_id = ANY($1::bigint[]) ORDER BY id`,
      [ids],
    );
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    api = await startQueueApp(db.url, { runWorker: false });
  });
  afterAll(async () => {
    await db?.query(`INSERT INTO fixture_gates (name) SELECT 'hang-' || n FROM generate_series(1, 10) n ON CONFLICT DO NOTHING`).catch(() => undefined);
    await Promise.all(children.map((w) => w.stop()));
    await api?.close();
    await db?.drop();
  });

  it('a worker SIGKILLed five times holding prefetched jobs costs them no attempt; the jobs it started count theirs', async () => {
    // The innocents: lowest priority, so every worker below claims them behind its blockers.
    const innocents = (await api.producer.enqueueMany(Array.from({ length: 20 }, (_, n) => ({ type: 'fixture.work', payload: { innocent: n } })))).map(
      (job) => job.id,
    );
    const blockers: string[][] = [];
    for (let round = 1; round <= 5; round++) {
      // Short jobs first grow the worker's prefetch; then two blockers take both of its slots
      // until their gate opens, and the innocents wait in its buffer behind them.
      await api.producer.enqueueMany(
        Array.from({ length: 200 }, (_, n) => ({ type: 'fixture.work', payload: { n }, options: { priority: 20 } })),
      );
      const blocking = (
        await api.producer.enqueueMany([1, 2].map(() => ({ type: 'fixture.work', payload: { gate: `hang-${round}` }, options: { priority: 10 } })))
      ).map((job) => job.id);
      blockers.push(blocking);
      const workerId = `prefetcher-${round}`;
      const worker = await child(workerId, { concurrency: 2 });
      await waitFor(
        async () => {
          const started = (await runsOf(blocking)).length === 2;
          const held = await db.query(`SELECT 1 FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND worker_id = $2 AND status = 'processing'`, [
            innocents,
            workerId,
          ]);
          // The blockers' starts are charged a few ms after they start.
          const charged = (await rows(blocking)).every((row) => row.attempts === 1);
          return started && charged && held.length > 0;
        },
        { timeoutMs: 20_000, intervalMs: 20, message: `${workerId} running its blockers and holding innocents` },
      );
      worker.kill('SIGKILL');
      expect(await worker.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const heldAtDeath = (await rows(innocents)).filter((row) => row.worker_id === workerId).map((row) => row.id);
      expect(heldAtDeath.length, `innocents held by ${workerId}`).toBeGreaterThan(0);

      const reaped = await reapAfterDeath(workerId);
      expect(reaped.map((row) => row.id)).toEqual(expect.arrayContaining([...blocking, ...heldAtDeath]));
      // Never started there: back in line as if never claimed, nothing recorded against them.
      for (const row of await rows(innocents)) {
        expect(row, `innocent ${row.id} after round ${round}`).toMatchObject({ status: 'pending', attempts: 0, worker_id: null, last_error: null });
        expect(row.errors).toEqual([]);
      }
      // Started there: the lost run counts.
      for (const row of await rows(blocking)) {
        expect(row).toMatchObject({ status: 'failed', attempts: 1 });
        expect(row.last_error).toMatch(new RegExp(`^worker lost: ${workerId} `));
      }
      // The blockers run to completion in a later round.
      await db.query(`INSERT INTO fixture_gates (name) VALUES ($1)`, [`hang-${round}`]);
    }
    expect(await runsOf(innocents)).toEqual([]);

    // A healthy worker runs every innocent once, as attempt 1; the blockers as attempt 2.
    const finisher = await child('finisher');
    const all = [...innocents, ...blockers.flat()];
    await waitFor(async () => (await rows(all)).every((row) => row.status === 'completed'), { timeoutMs: 30_000, message: 'every job completed' });
    for (const row of await rows(innocents)) expect(row).toMatchObject({ status: 'completed', attempts: 1, worker_id: 'finisher' });
    expect((await runsOf(innocents)).map((run) => [run.attempt, run.worker_id])).toEqual(innocents.map(() => [1, 'finisher']));
    for (const row of await rows(blockers.flat())) expect(row).toMatchObject({ status: 'completed', attempts: 2 });
    await finisher.stop();
  });

  it('a job that kills its worker as it starts from the buffer is dead-lettered, worker lost, after its attempts', async () => {
    const [crasher] = (await api.producer.enqueueMany([{ type: 'fixture.work', payload: { crash: true } }])).map((job) => job.id);
    let dead = false;
    for (let round = 1; round <= MAX_ATTEMPTS + 3 && !dead; round++) {
      // Short jobs ahead of it: the crasher is claimed into the buffer and started from there.
      await api.producer.enqueueMany(Array.from({ length: 100 }, (_, n) => ({ type: 'fixture.work', payload: { n }, options: { priority: 5 } })));
      const workerId = `victim-${round}`;
      let worker: ChildWorker;
      try {
        worker = await child(workerId, { concurrency: 2 });
        await waitFor(() => worker.process.exitCode !== null || worker.process.signalCode !== null, { timeoutMs: 20_000, message: `${workerId} to die` });
      } catch (error) {
        // A worker may claim and die before it printed READY; that is the same crash.
        if (!/exited before READY \(code null, signal SIGKILL\)/.test(String(error))) throw error;
      }
      await reapAfterDeath(workerId);
      dead = (await rows([crasher]))[0].status === 'dead';
    }
    const [row] = await rows([crasher]);
    expect(row.status).toBe('dead');
    expect(row.last_error).toMatch(/^worker lost: victim-\d+ stopped renewing its lease on attempt 3 /);
    expect(row.attempts).toBe(MAX_ATTEMPTS);
    // At most one run went uncharged (its first, started from the buffer and killed before its
    // start was written); after a lost worker its starts are charged before it runs.
    const runs = await runsOf([crasher]);
    expect(runs.length).toBeGreaterThanOrEqual(MAX_ATTEMPTS);
    expect(runs.length).toBeLessThanOrEqual(MAX_ATTEMPTS + 1);
    expect(runs.at(-1)!.attempt).toBe(MAX_ATTEMPTS);
  });

  it('a completion statement charges the prefetched jobs it completes and the started ones it confirms, each once, fenced by token', async () => {
    const claims = new ClaimQuery('job_queue', true);
    const jobs = await api.producer.enqueueMany([1, 2, 3, 4].map((n) => ({ type: 'confirm.work', payload: { n } })));
    const token = randomUUID();
    const request = { workerId: 'confirmer', leaseMs: 60_000, limit: 4, startNow: 1, perType: [{ type: 'confirm.work', limit: 4, maxAttempts: 3 }] };
    const claimed = await db.query<{ id: string; attempt: number; prefetched: boolean }>(claims.plainText, claims.plainParams(request, token));
    // The first in claim order starts at once and is charged; the rest are prefetched, each reading as attempt 1.
    expect(claimed.map((row) => [row.attempt, row.prefetched])).toEqual([
      [1, false],
      [1, true],
      [1, true],
      [1, true],
    ]);
    const [charged, done, confirmed, stale] = claimed.map((row) => row.id);
    expect((await rows([charged, done, confirmed, stale])).map((row) => row.attempts)).toEqual([1, 0, 0, 0]);
    // charged and done complete; confirmed's start is confirmed; stale's confirm presents a wrong token.
    const others = JSON.stringify({ [stale]: randomUUID() });
    const [reply] = await db.query<{ missed: string | null }>(sql.completeManyConfirming, [[charged, done], others, '{}', token, [confirmed, stale]]);
    expect(reply.missed).toBeNull();
    expect((await rows([charged, done, confirmed, stale])).map((row) => [row.status, row.attempts])).toEqual([
      ['completed', 1],
      ['completed', 1],
      ['processing', 1],
      ['processing', 0],
    ]);
    // A second confirm of the same start charges nothing more; released, a charged start is refunded, a prefetched one keeps its attempts.
    await db.query(sql.confirmStarts, [[confirmed], '{}', token]);
    const released = await db.query<{ id: string }>(sql.release, [[confirmed, stale], '{}', token]);
    expect(released).toHaveLength(2);
    expect((await rows([confirmed, stale])).map((row) => [row.status, row.attempts])).toEqual([
      ['pending', 0],
      ['pending', 0],
    ]);
  });

  it('the backstop dead-letters a job that loses its worker again and again before its start is charged', async () => {
    const claims = new ClaimQuery('job_queue', true);
    const [{ id }] = await api.producer.enqueueMany([{ type: 'backstop.work', payload: {} }]);
    const claimPrefetched = async (worker: string) => {
      const request = { workerId: worker, leaseMs: 60_000, limit: 1, startNow: 0, perType: [{ type: 'backstop.work', limit: 1, maxAttempts: MAX_ATTEMPTS }] };
      const claimed = await db.query<{ attempt: number; prefetched: boolean }>(claims.plainText, claims.plainParams(request, randomUUID()));
      expect(claimed).toMatchObject([{ attempt: 1, prefetched: true }]);
    };
    const bound = MAX_ATTEMPTS + LEASE_EXPIRIES_BEYOND_ATTEMPTS;
    for (let expiry = 1; expiry < bound; expiry++) {
      await claimPrefetched(`held-${expiry}`);
      await reapAfterDeath(`held-${expiry}`);
      expect((await rows([id]))[0]).toMatchObject({ status: 'pending', attempts: 0 });
    }
    await claimPrefetched('last-holder');
    await reapAfterDeath('last-holder');
    const [row] = await rows([id]);
    expect(row).toMatchObject({ status: 'dead', attempts: 0 });
    expect(row.last_error).toBe(
      `worker lost: the job lost its worker ${bound} times, its start recorded or not (it may be killing its worker as it starts); last last-holder`,
    );
  });
});
