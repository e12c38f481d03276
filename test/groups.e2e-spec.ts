import { Injectable } from '@nestjs/common';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { InvalidJobError, JobHandler, JobQueueConfigError, type JobContext } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Tenant fairness on real PostgreSQL: a type whose handler sets `groupConcurrency` starts its jobs
 * in turn across groups, so one group's backlog does not hold back another group's single job,
 * and never runs more than `groupConcurrency` of one group at once, across workers.
 */
interface Start {
  id: string;
  group: string | null;
}
const starts = new Map<string, Start[]>();
const running = new Map<string, number>();
const mostRunning = new Map<string, number>();
/** Jobs wait here until released, when a test wants them held. */
let hold: Promise<void> | null = null;

async function record(type: string, job: JobContext, group: string | null, workMs: number): Promise<void> {
  const list = starts.get(type) ?? [];
  list.push({ id: job.id, group });
  starts.set(type, list);
  const key = `${type}/${group}`;
  running.set(key, (running.get(key) ?? 0) + 1);
  mostRunning.set(key, Math.max(mostRunning.get(key) ?? 0, running.get(key)!));
  try {
    if (hold) await hold;
    await new Promise((resolve) => setTimeout(resolve, workMs));
  } finally {
    running.set(key, running.get(key)! - 1);
  }
}

interface GroupPayload {
  group: string | null;
}

@Injectable()
class TenantHandlers {
  @JobHandler('tenant.report', { groupConcurrency: 2, concurrency: 6 })
  async report(payload: GroupPayload, job: JobContext) {
    await record('tenant.report', job, payload.group, 2);
  }

  @JobHandler('tenant.sync', { groupConcurrency: 3, concurrency: 6 })
  async sync(payload: GroupPayload, job: JobContext) {
    await record('tenant.sync', job, payload.group, 1);
  }

  @JobHandler('tenant.plain', { concurrency: 1 })
  async plain(payload: GroupPayload, job: JobContext) {
    await record('tenant.plain', job, payload.group, 0);
  }
}

describe('tenant fairness (group, groupConcurrency)', () => {
  let db: TestDatabase;
  let producer: QueueApp;
  const workers: QueueApp[] = [];

  const startWorkers = async (count: number) => {
    for (let i = 0; i < count; i++) {
      workers.push(await startQueueApp(db.url, { concurrency: 6, workerId: `groups-${i}` }, [TenantHandlers]));
    }
  };
  const statuses = (type: string) =>
    db.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM job_queue.jobs WHERE type = $1 GROUP BY status ORDER BY status`, [type]);

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    producer = await startQueueApp(db.url, { runWorker: false });
  });

  afterEach(async () => {
    hold = null;
    for (const worker of workers.splice(0)) await worker.close();
  });

  afterAll(async () => {
    await producer?.close();
    await db?.drop();
  });

  it("starts each of 20 small groups' jobs within the first claims, though one group has 200 waiting ahead of them", async () => {
    const type = 'tenant.report';
    await producer.producer.enqueueMany(Array.from({ length: 200 }, () => ({ type, payload: { group: 'noisy' }, options: { group: 'noisy' } })));
    const small = Array.from({ length: 20 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    await producer.producer.enqueueMany(small.map((group) => ({ type, payload: { group }, options: { group } })));
    await startWorkers(2);
    await waitFor(() => (starts.get(type) ?? []).filter((s) => s.group !== 'noisy').length === 20, { timeoutMs: 30_000 });
    const order = starts.get(type)!;
    const positions = small.map((group) => order.findIndex((s) => s.group === group));
    // 21 groups take turns: each small group's job is among the first few dozen starts, not
    // behind the 200 (plain claim order would start them 201st to 220th).
    expect(Math.max(...positions)).toBeLessThan(60);
    await waitFor(async () => (await statuses(type)).every((s) => s.status === 'completed'), { timeoutMs: 60_000 });
    expect(await statuses(type)).toEqual([{ status: 'completed', n: 220 }]);
    // Two workers of concurrency 6 and a group cap of 2: never more than 2 of the noisy group at once, and 2 were reached.
    expect(mostRunning.get(`${type}/noisy`)).toBe(2);
    const ids = order.map((s) => s.id);
    expect(new Set(ids).size).toBe(220);
    const turn = await db.query(`SELECT last_group FROM job_queue.job_group_turns WHERE type = $1`, [type]);
    expect(turn).toHaveLength(1);
  });

  it('holds a full group back while the others run, across workers', async () => {
    const type = 'tenant.sync';
    hold = new Promise<void>(() => undefined);
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    await producer.producer.enqueueMany(Array.from({ length: 10 }, () => ({ type, payload: { group: 'big' }, options: { group: 'big' } })));
    await producer.producer.enqueueMany(['a', 'b'].map((group) => ({ type, payload: { group }, options: { group } })));
    await startWorkers(2);
    // Both workers have free slots (12), but only 3 of 'big' may run: 3 + a + b.
    await waitFor(() => (starts.get(type) ?? []).length === 5, { timeoutMs: 15_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((starts.get(type) ?? []).length).toBe(5);
    const [{ n: runningBig }] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = $1 AND group_key = 'big' AND status = 'processing'`,
      [type],
    );
    expect(runningBig).toBe(3);
    release();
    await waitFor(async () => (await statuses(type)).every((s) => s.status === 'completed'), { timeoutMs: 30_000 });
    expect(mostRunning.get(`${type}/big`)).toBe(3);
  });

  it('runs the jobs of a grouped type that have no group, between the groups', async () => {
    const type = 'tenant.sync';
    const before = (starts.get(type) ?? []).length;
    // Enqueued before any group's jobs (as if before the handler set groupConcurrency), and after.
    await producer.producer.enqueueMany(Array.from({ length: 5 }, () => ({ type, payload: { group: null } })));
    await producer.producer.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ type, payload: { group: `g${i % 3}` }, options: { group: `g${i % 3}` } })));
    await producer.producer.enqueueMany(Array.from({ length: 5 }, () => ({ type, payload: { group: null } })));
    await startWorkers(1);
    await waitFor(async () => (await statuses(type)).every((s) => s.status === 'completed'), { timeoutMs: 30_000 });
    const ran = (starts.get(type) ?? []).slice(before);
    expect(ran).toHaveLength(40);
    expect(ran.filter((s) => s.group === null)).toHaveLength(10);
  });

  it('records the group of a type without groupConcurrency and claims it in the usual order', async () => {
    const type = 'tenant.plain';
    const first = await producer.producer.enqueue(type, { group: 'x' }, { group: 'x' });
    await producer.producer.enqueueMany(Array.from({ length: 5 }, () => ({ type, payload: { group: 'x' }, options: { group: 'x' } })));
    const last = await producer.producer.enqueue(type, { group: 'y' }, { group: 'y' });
    expect((await producer.admin.getJob(first.id))?.group).toBe('x');
    await startWorkers(1);
    await waitFor(async () => (await statuses(type)).every((s) => s.status === 'completed'), { timeoutMs: 15_000 });
    const order = starts.get(type)!.map((s) => s.id);
    expect(order[0]).toBe(first.id);
    expect(order.at(-1)).toBe(last.id);
  });

  it('keeps the group through every enqueue path (one, uniform batch, mixed batch, keyed, debounced, dependent)', async () => {
    const type = 'tenant.unhandled';
    const one = await producer.producer.enqueue(type, {}, { group: 'p1' });
    const uniform = await producer.producer.enqueueMany([1, 2].map(() => ({ type, payload: {}, options: { group: 'p2' } })));
    const mixed = await producer.producer.enqueueMany([
      { type, payload: {}, options: { group: 'p3' } },
      { type, payload: {}, options: { group: 'p4', priority: 3 } },
    ]);
    const keyed = await producer.producer.enqueue(type, {}, { group: 'p5', idempotencyKey: 'k-1' });
    const debounced = await producer.producer.enqueue(type, {}, { group: 'p6', debounce: { key: 'd-1', delayMs: 60_000 } });
    const dependent = await producer.producer.enqueue(type, {}, { group: 'p7', dependsOn: [one.id] });
    const groups = await db.query<{ id: string; group_key: string }>(
      `SELECT id::text, group_key FROM job_queue.jobs WHERE type = $1 ORDER BY id`,
      [type],
    );
    const byId = new Map(groups.map((row) => [row.id, row.group_key]));
    expect(byId.get(one.id)).toBe('p1');
    expect(uniform.map((r) => byId.get(r.id))).toEqual(['p2', 'p2']);
    expect(mixed.map((r) => byId.get(r.id))).toEqual(['p3', 'p4']);
    expect(byId.get(keyed.id)).toBe('p5');
    expect(byId.get(debounced.id)).toBe('p6');
    expect(byId.get(dependent.id)).toBe('p7');
    // A debounce that replaces the waiting job's payload takes the new group too.
    await producer.producer.enqueue(type, {}, { group: 'p6b', debounce: { key: 'd-1', delayMs: 60_000 } });
    expect((await producer.admin.getJob(debounced.id))?.group).toBe('p6b');
  });

  it('refuses a bad group with InvalidJobError and writes nothing', async () => {
    const type = 'tenant.bad';
    for (const group of ['', 42, 'x'.repeat(513), 'a\u0000b']) {
      await expect(producer.producer.enqueue(type, {}, { group: group as string })).rejects.toThrow(InvalidJobError);
      await expect(producer.producer.enqueue(type, {}, { group: group as string })).rejects.toThrow(/options\.group/);
    }
    await expect(
      producer.producer.enqueueMany([
        { type, payload: {}, options: { group: 'fine' } },
        { type, payload: {}, options: { group: '' } },
      ]),
    ).rejects.toThrow(/\[1\]\.options\.group/);
    expect(await statuses(type)).toEqual([]);
  });

  it('refuses a handler whose groupConcurrency is not a positive integer', async () => {
    @Injectable()
    class BadGroupHandler {
      @JobHandler('tenant.badcap', { groupConcurrency: 0 })
      run() {}
    }
    await expect(startQueueApp(db.url, {}, [BadGroupHandler])).rejects.toThrow(JobQueueConfigError);
    await expect(startQueueApp(db.url, {}, [BadGroupHandler])).rejects.toThrow(/groupConcurrency/);
  });
});
