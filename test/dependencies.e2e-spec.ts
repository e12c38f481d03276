import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { InvalidJobError, JobHandler, PermanentJobError, type JobContext } from '../src/index.js';
import { RetentionPruner } from '../libs/job-queue/src/maintenance/retention-pruner.js';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Job dependencies on real PostgreSQL: a job waits `blocked` until what it depends on has
 * completed, and becomes pending in the transaction that completes the last one; a failed
 * dependency cancels it (and what depends on it) or lets it run; fan-out and fan-in of 10,000;
 * an enqueue racing the completion of what it depends on never leaves a job blocked for good.
 */
const runs: Array<{ type: string; id: string; payload: { n?: number } }> = [];
const seen = new Map<string, Array<{ id: string; type: string; status: string; result: unknown }>>();
const gates = new Map<number, () => void>();
const started = new Set<number>();

@Injectable()
class WorkflowHandlers {
  @JobHandler('wf.step', { concurrency: 8 })
  step(payload: { n: number }, job: JobContext) {
    runs.push({ type: 'wf.step', id: job.id, payload });
    return { n: payload.n };
  }

  @JobHandler('wf.final')
  async final(payload: { n?: number }, job: JobContext) {
    runs.push({ type: 'wf.final', id: job.id, payload });
    seen.set(job.id, await job.dependencies());
    return { sum: (await job.dependencies<{ n: number } | null>()).reduce((sum, d) => sum + (d.result?.n ?? 0), 0) };
  }

  @JobHandler('wf.fail', { maxAttempts: 1 })
  fail() {
    throw new PermanentJobError('the invoice is malformed');
  }

  @JobHandler('wf.gate')
  async gate(payload: { n: number }) {
    started.add(payload.n);
    await new Promise<void>((resolve) => gates.set(payload.n, resolve));
    return { n: payload.n };
  }
}

describe('job dependencies', () => {
  let db: TestDatabase;
  let worker: QueueApp;
  let producer: QueueApp;
  let appDataSource: DataSource;

  const statusOf = async (id: string) => (await producer.admin.getJob(id))?.status;
  const job = (id: string) => producer.admin.getJob(id);
  const finalRuns = (id: string) => runs.filter((r) => r.id === id).length;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    producer = await startQueueApp(db.url, { runWorker: false });
    worker = await startQueueApp(db.url, { workerId: 'wf-worker', concurrency: 16 }, [WorkflowHandlers]);
    appDataSource = await new DataSource({ type: 'postgres', url: db.url, extra: { max: 3 } }).initialize();
  });

  afterEach(() => {
    for (const open of gates.values()) open();
    gates.clear();
  });

  afterAll(async () => {
    for (const open of gates.values()) open();
    await worker?.close();
    await producer?.close();
    await appDataSource?.destroy();
    await db?.drop();
  });

  it('runs a chain in order: blocked until the job before it completed, then pending, and reads its result', async () => {
    const a = await producer.producer.enqueue('wf.gate', { n: 1 });
    const b = await producer.producer.enqueue('wf.final', {}, { dependsOn: [a.id] });
    const c = await producer.producer.enqueue('wf.final', {}, { dependsOn: [b.id] });
    await waitFor(() => started.has(1), { message: 'the first job to start' });
    expect(await statusOf(b.id)).toBe('blocked');
    expect(await statusOf(c.id)).toBe('blocked');
    expect((await producer.admin.stats()).byType['wf.final'].blocked).toBe(2);
    expect((await producer.admin.listJobs({ status: 'blocked', type: 'wf.final' })).jobs.map((j) => j.id)).toEqual([c.id, b.id]);
    gates.get(1)!();
    await waitFor(async () => (await statusOf(c.id)) === 'completed', { message: 'the chain to finish' });
    expect(seen.get(b.id)).toEqual([{ id: a.id, type: 'wf.gate', status: 'completed', result: { n: 1 } }]);
    expect((await job(c.id))!.result).toEqual({ sum: 0 });
    expect(seen.get(c.id)).toEqual([{ id: b.id, type: 'wf.final', status: 'completed', result: { sum: 1 } }]);
    const [rowA, rowB, rowC] = [await job(a.id), await job(b.id), await job(c.id)];
    expect(rowB!.claimedAt!.getTime()).toBeGreaterThanOrEqual(rowA!.completedAt!.getTime());
    expect(rowC!.claimedAt!.getTime()).toBeGreaterThanOrEqual(rowB!.completedAt!.getTime());
    expect(finalRuns(b.id)).toBe(1);
    expect(finalRuns(c.id)).toBe(1);
  });

  it('fans in: a final job waits for 10,000 jobs, enqueued with them in one transaction, and reads every result', async () => {
    const count = 10_000;
    const { finalId, stepIds } = await appDataSource.transaction(async (manager) => {
      const steps = await producer.producer.enqueueMany(
        Array.from({ length: count }, (_, n) => ({ type: 'wf.step', payload: { n: n + 1 }, options: { manager } })),
      );
      const final = await producer.producer.enqueue('wf.final', {}, { dependsOn: steps.map((s) => s.id), manager });
      return { finalId: final.id, stepIds: steps.map((s) => s.id) };
    });
    expect(await statusOf(finalId)).toBe('blocked');
    await waitFor(async () => (await statusOf(finalId)) === 'completed', { timeoutMs: 120_000, message: 'the final job after 10,000 steps' });
    expect(finalRuns(finalId)).toBe(1);
    expect((await job(finalId))!.result).toEqual({ sum: (count * (count + 1)) / 2 });
    const read = seen.get(finalId)!;
    expect(read).toHaveLength(count);
    expect(read.map((d) => d.id)).toEqual([...stepIds].sort((x, y) => Number(x) - Number(y)));
    expect(read.every((d) => d.status === 'completed')).toBe(true);
  }, 180_000);

  it('fans out: 10,000 jobs wait for one, all released by its completion, each run once', async () => {
    const count = 10_000;
    const parent = await producer.producer.enqueue('wf.gate', { n: 2 });
    const children = await producer.producer.enqueueMany(
      Array.from({ length: count }, (_, n) => ({ type: 'wf.step', payload: { n: -(n + 1) }, options: { dependsOn: [parent.id] } })),
    );
    const [{ blocked }] = await db.query<{ blocked: number }>(
      `SELECT count(*)::int AS blocked FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'blocked'`,
      [children.map((c) => c.id)],
    );
    expect(blocked).toBe(count);
    await waitFor(() => gates.has(2), { message: 'the parent to start' });
    gates.get(2)!();
    await waitFor(
      async () => {
        const [{ done }] = await db.query<{ done: number }>(
          `SELECT count(*)::int AS done FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'`,
          [children.map((c) => c.id)],
        );
        return done === count;
      },
      { timeoutMs: 120_000, message: '10,000 children to complete' },
    );
    const childIds = new Set(children.map((c) => c.id));
    const childRuns = runs.filter((r) => childIds.has(r.id));
    expect(childRuns).toHaveLength(count);
    expect(new Set(childRuns.map((r) => r.id)).size).toBe(count);
  }, 180_000);

  it('cancels the dependants of a dead-lettered job, and theirs, naming it; one that runs anyway sees it dead', async () => {
    const bad = await producer.producer.enqueue('wf.fail', {});
    const cancelled = await producer.producer.enqueue('wf.final', {}, { dependsOn: [bad.id] });
    const below = await producer.producer.enqueue('wf.final', {}, { dependsOn: [cancelled.id] });
    const anyway = await producer.producer.enqueue('wf.final', {}, { dependsOn: [bad.id], onDependencyFailure: 'run' });
    await waitFor(async () => (await statusOf(anyway.id)) === 'completed', { message: 'the job that runs anyway' });
    expect(await statusOf(bad.id)).toBe('dead');
    const first = await job(cancelled.id);
    expect(first).toMatchObject({ status: 'cancelled', lastError: `dependency ${bad.id} (wf.fail) was dead-lettered` });
    expect(await job(below.id)).toMatchObject({ status: 'cancelled', lastError: `dependency ${cancelled.id} (wf.final) was cancelled` });
    expect(finalRuns(cancelled.id) + finalRuns(below.id)).toBe(0);
    expect(seen.get(anyway.id)).toEqual([{ id: bad.id, type: 'wf.fail', status: 'dead', result: null }]);

    // Retrying the dead job un-cancels nothing: its dependants were settled when it died.
    await producer.admin.retryDead(bad.id);
    await waitFor(async () => (await statusOf(bad.id)) === 'dead', { message: 'the retried job to die again' });
    expect(await statusOf(cancelled.id)).toBe('cancelled');
    expect(finalRuns(anyway.id)).toBe(1);
  });

  it('settles at enqueue what has already finished: completed → pending, dead → cancelled (or pending with run)', async () => {
    const done = await producer.producer.enqueue('wf.step', { n: 7 });
    const bad = await producer.producer.enqueue('wf.fail', {});
    await waitFor(async () => (await statusOf(done.id)) === 'completed' && (await statusOf(bad.id)) === 'dead', { message: 'both to finish' });
    const after = await producer.producer.enqueue('wf.final', {}, { dependsOn: [done.id] });
    const doomed = await producer.producer.enqueue('wf.final', {}, { dependsOn: [done.id, bad.id] });
    const anyway = await producer.producer.enqueue('wf.final', {}, { dependsOn: [bad.id, done.id], onDependencyFailure: 'run' });
    expect(await job(doomed.id)).toMatchObject({ status: 'cancelled', lastError: `dependency ${bad.id} (wf.fail) was dead-lettered` });
    await waitFor(async () => (await statusOf(after.id)) === 'completed' && (await statusOf(anyway.id)) === 'completed', {
      message: 'the jobs after finished ones',
    });
    expect(seen.get(anyway.id)!.map((d) => d.status)).toEqual(['completed', 'dead']);
  });

  it('an operator cancelling a job cancels its blocked dependants, or lets those that run anyway go on', async () => {
    const parent = await producer.producer.enqueue('wf.step', { n: 1 }, { delayMs: 3_600_000 });
    const cancels = await producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id] });
    const runsAnyway = await producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id], onDependencyFailure: 'run' });
    const blockedChild = await producer.producer.enqueue('wf.final', {}, { dependsOn: [cancels.id] });
    // A blocked job can itself be cancelled.
    const spare = await producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id] });
    expect((await producer.admin.cancel(spare.id)).status).toBe('cancelled');

    await producer.admin.cancel(parent.id);
    expect(await job(cancels.id)).toMatchObject({ status: 'cancelled', lastError: `dependency ${parent.id} (wf.step) was cancelled` });
    expect(await statusOf(blockedChild.id)).toBe('cancelled');
    await waitFor(async () => (await statusOf(runsAnyway.id)) === 'completed', { message: 'the job that runs anyway' });
  });

  it('a job deleted before it finished releases its dependants as a cancelled one would', async () => {
    const parent = await producer.producer.enqueue('wf.step', { n: 1 }, { delayMs: 3_600_000 });
    const child = await producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id] });
    await db.query(`DELETE FROM job_queue.jobs WHERE id = $1`, [parent.id]);
    expect(await job(child.id)).toMatchObject({ status: 'cancelled', lastError: `dependency ${parent.id} (wf.step) was deleted` });
  });

  it('an enqueueMany mixing a debounced job and a dependent one keeps both rules, on the pool and in a transaction', async () => {
    const parent = await producer.producer.enqueue('wf.step', { n: 1 }, { delayMs: 3_600_000 });
    const check = async (batch: Array<{ id: string }>, key: string) => {
      const [debounced, dependent] = batch;
      const [row] = await db.query<{ debounce_key: string | null }>(`SELECT debounce_key FROM job_queue.jobs WHERE id = $1`, [debounced.id]);
      expect(row.debounce_key).toBe(key);
      expect(await statusOf(dependent.id)).toBe('blocked');
      expect((await producer.admin.dependencies(dependent.id)).map((d) => d.id)).toEqual([parent.id]);
    };
    const items = (key: string, manager?: import('typeorm').EntityManager) => [
      { type: 'wf.final', payload: {}, options: { debounce: { key, delayMs: 3_600_000 }, manager } },
      { type: 'wf.final', payload: {}, options: { dependsOn: [parent.id], manager } },
    ];
    await check(await producer.producer.enqueueMany(items('mixed-pool')), 'mixed-pool');
    await check(await appDataSource.transaction((manager) => producer.producer.enqueueMany(items('mixed-tx', manager))), 'mixed-tx');
    await producer.admin.cancel(parent.id);
  });

  it('refuses unknown ids, non-ids, too many ids and bad combinations, naming the field, and writes nothing', async () => {
    const parent = await producer.producer.enqueue('wf.step', { n: 1 }, { delayMs: 3_600_000 });
    const [{ total: before }] = await db.query<{ total: number }>(`SELECT count(*)::int AS total FROM job_queue.jobs`);
    const refusals: Array<[() => Promise<unknown>, string, RegExp]> = [
      [() => producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id, '999999999'] }), 'options.dependsOn', /999999999/],
      [
        () => producer.producer.enqueueMany([
          { type: 'wf.final', payload: {}, options: { dependsOn: [parent.id] } },
          { type: 'wf.final', payload: {}, options: { dependsOn: ['888888888'] } },
        ]),
        'jobs[1].options.dependsOn',
        /888888888/,
      ],
      [() => producer.producer.enqueue('wf.final', {}, { dependsOn: [Number(parent.id)] as never }), 'options.dependsOn[0]', /job id/],
      [() => producer.producer.enqueue('wf.final', {}, { dependsOn: ['01'] }), 'options.dependsOn[0]', /job id/],
      [() => producer.producer.enqueue('wf.final', {}, { dependsOn: parent.id as never }), 'options.dependsOn', /array/],
      [() => producer.producer.enqueue('wf.final', {}, { dependsOn: Array.from({ length: 10_001 }, () => parent.id) }), 'options.dependsOn', /10,000/],
      [() => producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id], onDependencyFailure: 'skip' as never }), 'options.onDependencyFailure', /cancel/],
      [() => producer.producer.enqueue('wf.final', {}, { onDependencyFailure: 'run' }), 'options.onDependencyFailure', /dependsOn/],
      [
        () => producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id], debounce: { key: 'k', delayMs: 0 } }),
        'options.dependsOn',
        /debounce/,
      ],
    ];
    for (const [attempt, field, message] of refusals) {
      const error = await attempt().catch((e: unknown) => e);
      expect(error, field).toBeInstanceOf(InvalidJobError);
      expect((error as InvalidJobError).field).toBe(field);
      expect((error as Error).message).toMatch(message);
    }
    const [{ total: after }] = await db.query<{ total: number }>(`SELECT count(*)::int AS total FROM job_queue.jobs`);
    expect(after).toBe(before);
    const [{ marked, edges }] = await db.query<{ marked: boolean; edges: number }>(
      `SELECT (SELECT has_dependants FROM job_queue.jobs WHERE id = $1) AS marked, (SELECT count(*)::int FROM job_queue.job_dependencies WHERE depends_on = $1) AS edges`,
      [parent.id],
    );
    expect({ marked, edges }).toEqual({ marked: false, edges: 0 });

    // A workflow built in a transaction that rolls back leaves nothing.
    await appDataSource
      .transaction(async (manager) => {
        const first = await producer.producer.enqueue('wf.step', { n: 1 }, { manager });
        await producer.producer.enqueue('wf.final', {}, { dependsOn: [first.id], manager });
        throw new Error('the business write failed');
      })
      .catch(() => undefined);
    const [{ total: afterRollback }] = await db.query<{ total: number }>(`SELECT count(*)::int AS total FROM job_queue.jobs`);
    expect(afterRollback).toBe(before);
  });

  it('an enqueue holding the lock on a running job makes its completion wait, and the completion then releases the new job', async () => {
    const parent = await producer.producer.enqueue('wf.gate', { n: 3 });
    await waitFor(() => gates.has(3), { message: 'the parent to run' });
    let childId = '';
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const transaction = appDataSource.transaction(async (manager) => {
      childId = (await producer.producer.enqueue('wf.final', {}, { dependsOn: [parent.id], manager })).id;
      await held;
    });
    await waitFor(() => childId !== '', { message: 'the child enqueued, not committed' });
    gates.get(3)!();
    // The completion waits for the enqueue's transaction (the parent's row lock).
    await waitFor(
      async () =>
        (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))[0].n > 0,
      { message: 'the completion to wait for the lock' },
    );
    expect(await statusOf(parent.id)).toBe('processing');
    release();
    await transaction;
    await waitFor(async () => (await statusOf(childId)) === 'completed', { message: 'the child released by the completion' });
  });

  it('under concurrent enqueues and completions, no job waits for a dependency that has finished', async () => {
    const parents = await producer.producer.enqueueMany(Array.from({ length: 300 }, (_, n) => ({ type: 'wf.step', payload: { n } })));
    const children: string[] = [];
    for (let round = 0; round < 30; round++) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, (_, i) => {
          const on = [parents[(round * 10 + i) % 300].id, parents[(round * 7 + i * 13) % 300].id];
          return producer.producer.enqueue('wf.final', {}, { dependsOn: on });
        }),
      );
      children.push(...batch.map((b) => b.id));
    }
    await waitFor(
      async () => {
        const [{ done }] = await db.query<{ done: number }>(
          `SELECT count(*)::int AS done FROM job_queue.jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'`,
          [children],
        );
        return done === children.length;
      },
      { timeoutMs: 60_000, message: 'every child to complete' },
    );
    expect(new Set(runs.filter((r) => children.includes(r.id)).map((r) => r.id)).size).toBe(children.length);
    expect(runs.filter((r) => children.includes(r.id))).toHaveLength(children.length);
  });
});

describe('job dependencies with retention.completedMs 0', () => {
  let db: TestDatabase;
  let app: QueueApp;
  let appDataSource: DataSource;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    app = await startQueueApp(db.url, { workerId: 'wf-deleting', retention: { completedMs: 0 } }, [WorkflowHandlers]);
    appDataSource = await new DataSource({ type: 'postgres', url: db.url, extra: { max: 2 } }).initialize();
  });

  afterAll(async () => {
    for (const open of gates.values()) open();
    await app?.close();
    await appDataSource?.destroy();
    await db?.drop();
  });

  it('keeps what a job depends on until it has read the results, then deletes all of it', async () => {
    // In one transaction: a job completed and deleted first could not be depended on any more.
    const dataSource = await new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } }).initialize();
    const final = await dataSource
      .transaction(async (manager) => {
        const steps = await app.producer.enqueueMany([1, 2, 3].map((n) => ({ type: 'wf.step', payload: { n }, options: { manager } })));
        return app.producer.enqueue('wf.final', {}, { dependsOn: steps.map((s) => s.id), manager });
      })
      .finally(() => dataSource.destroy());
    const plain = await app.producer.enqueue('wf.step', { n: 9 });
    await waitFor(async () => (await app.admin.getJob(final.id))?.status === 'completed', { message: 'the final job' });
    expect(seen.get(final.id)!.map((d) => d.result)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    // A job without dependants goes with its completion.
    await waitFor(async () => (await app.admin.getJob(plain.id)) === null, { message: 'the plain job deleted on completion' });
    // The workflow was kept for the final job; the next retention pass deletes it, edges included.
    // (The worker's own passes rest a minute between walks with completedMs 0: run one here.)
    const store = new PostgresJobStore(appDataSource, 'job_queue', { prepare: false, synchronousClaims: true });
    await waitFor(
      async () => {
        await db.query(`DELETE FROM job_queue.retention_walk`);
        await store.asMaintenanceLeader((leader) => new RetentionPruner({ completedMs: 0, deadMs: 3_600_000, startsMs: 0 }).runOnce(leader));
        const [{ rows, edges }] = await db.query<{ rows: number; edges: number }>(
          `SELECT (SELECT count(*)::int FROM job_queue.jobs) AS rows, (SELECT count(*)::int FROM job_queue.job_dependencies) AS edges`,
        );
        return rows === 0 && edges === 0;
      },
      { message: 'retention to delete the workflow' },
    );
  });
});

describe('job dependencies and retention', () => {
  let db: TestDatabase;
  let app: QueueApp;
  let dataSource: DataSource;
  let store: PostgresJobStore;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    app = await startQueueApp(db.url, { runWorker: false });
    dataSource = await new DataSource({ type: 'postgres', url: db.url, extra: { max: 2 } }).initialize();
    store = new PostgresJobStore(dataSource, 'job_queue', { prepare: false, synchronousClaims: true });
  });

  afterAll(async () => {
    await app?.close();
    await dataSource?.destroy();
    await db?.drop();
  });

  /** One retention pass over the whole (small) table, everything created three hours ago. */
  const prune = async () => {
    await db.query(`UPDATE job_queue.jobs SET created_at = now() - interval '3 hours'`);
    await db.query(`DELETE FROM job_queue.retention_walk`);
    return store.asMaintenanceLeader((leader) => new RetentionPruner({ completedMs: 3_600_000, deadMs: 3_600_000, startsMs: 0 }).runOnce(leader));
  };
  const statusOf = async (id: string) => (await app.admin.getJob(id))?.status ?? null;

  it('keeps a finished job while a job that depends on it has not finished, then deletes both, edges included', async () => {
    const done = await app.producer.enqueue('wf.step', { n: 5 }, { delayMs: 3_600_000 });
    const later = await app.producer.enqueue('wf.step', { n: 6 }, { delayMs: 3_600_000 });
    const child = await app.producer.enqueue('wf.final', {}, { dependsOn: [done.id, later.id] });
    // The first completes (as a worker's completion would: the trigger counts the child down).
    await db.query(`UPDATE job_queue.jobs SET status = 'completed', completed_at = now() - interval '2 hours' WHERE id = $1`, [done.id]);
    expect((await app.admin.getJob(child.id))!.status).toBe('blocked');
    expect((await prune())?.completed).toBe(0);
    expect(await statusOf(done.id)).toBe('completed');

    await app.admin.cancel(later.id);
    expect(await statusOf(child.id)).toBe('cancelled');
    expect(await prune()).toMatchObject({ completed: 1, cancelled: 2 });
    expect([await statusOf(done.id), await statusOf(later.id), await statusOf(child.id)]).toEqual([null, null, null]);
    const [{ edges }] = await db.query<{ edges: number }>(`SELECT count(*)::int AS edges FROM job_queue.job_dependencies`);
    expect(edges).toBe(0);
  });
});
