import { Injectable } from '@nestjs/common';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { InvalidJobError, JobHandler } from '../src/index.js';
import { PostgresJobStore } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * Schedules added at run time (JobQueueAdmin.upsertSchedule) on real PostgreSQL: every worker
 * process enqueues their slots, one job per slot between them; they outlive restarts; a changed
 * timetable starts afresh; bad definitions are refused and save nothing.
 */
@Injectable()
class ScheduledHandlers {
  @JobHandler('rs.report')
  report() {}

  @JobHandler('rs.declared', { cron: '0 3 * * *', timezone: 'Europe/Paris' })
  declared() {}
}

interface Row {
  payload: { report?: string; scheduledFor: string };
  idempotency_key: string;
  priority: number;
  max_attempts: number;
  group_key: string | null;
  run_at_ms: number;
}

describe('runtime schedules', () => {
  let db: TestDatabase;
  let admin: QueueApp;
  const workers: QueueApp[] = [];

  const rows = () =>
    db.query<Row>(
      `SELECT payload, idempotency_key, priority, max_attempts, group_key, (extract(epoch FROM run_at) * 1000)::float8 AS run_at_ms
       FROM job_queue.jobs WHERE type = 'rs.report' ORDER BY run_at`,
    );
  const startWorker = async (workerId: string) => {
    const app = await startQueueApp(db.url, { workerId }, [ScheduledHandlers]);
    workers.push(app);
    return app;
  };

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    admin = await startQueueApp(db.url, { runWorker: false }, [ScheduledHandlers]);
  });

  afterEach(async () => {
    await Promise.all(workers.splice(0).map((app) => app.close()));
    for (const { name, source } of await admin.admin.schedules()) if (source === 'runtime') await admin.admin.removeSchedule(name);
    await db.query(`DELETE FROM job_queue.jobs`);
  });

  afterAll(async () => {
    await admin?.close();
    await db?.drop();
  });

  it('two worker processes enqueue each slot of a stored schedule once between them, with its payload and options', async () => {
    await startWorker('rs-a');
    await startWorker('rs-b');
    const saved = await admin.admin.upsertSchedule('every-second', {
      cron: '* * * * * *',
      type: 'rs.report',
      payload: { report: 'sales' },
      options: { priority: 5, maxAttempts: 2, group: 'acme' },
    });
    expect(saved).toMatchObject({ name: 'every-second', source: 'runtime', type: 'rs.report', timezone: 'UTC', lastSlot: null });
    expect(saved.nextSlot).toBeInstanceOf(Date);

    const slots = await waitFor(async () => ((await rows()).length >= 4 ? rows() : null), { timeoutMs: 20_000, message: 'four slots' });
    const scheduledFor = slots.map((row) => row.payload.scheduledFor);
    expect(new Set(scheduledFor).size, 'one row per slot').toBe(slots.length);
    for (const [i, row] of slots.entries()) {
      expect(row.payload).toEqual({ report: 'sales', scheduledFor: new Date(row.run_at_ms).toISOString() });
      expect(row.idempotency_key).toBe(`schedule:every-second:${row.payload.scheduledFor}`);
      expect(row).toMatchObject({ priority: 5, max_attempts: 2, group_key: 'acme' });
      if (i > 0) expect(row.run_at_ms - slots[i - 1].run_at_ms).toBe(1_000);
    }
    const listed = await waitFor(
      async () => (await admin.admin.schedules()).find((s) => s.name === 'every-second' && s.lastSlot !== null),
      { message: 'the last slot recorded' },
    );
    expect(listed!.lastSlot!.getTime()).toBeGreaterThanOrEqual(slots[slots.length - 1].run_at_ms - 1_000);
  });

  it('lists decorator and runtime schedules side by side with their next slots', async () => {
    await admin.admin.upsertSchedule('nightly', { cron: '30 2 * * *', timezone: 'America/New_York', type: 'rs.report' });
    const schedules = await admin.admin.schedules();
    expect(schedules.map(({ name, type, cron, timezone, source }) => ({ name, type, cron, timezone, source }))).toEqual([
      { name: 'rs.declared', type: 'rs.declared', cron: '0 3 * * *', timezone: 'Europe/Paris', source: 'decorator' },
      { name: 'nightly', type: 'rs.report', cron: '30 2 * * *', timezone: 'America/New_York', source: 'runtime' },
    ]);
    const nightly = schedules[1];
    expect(nightly.nextSlot!.getTime()).toBeGreaterThan(Date.now());
    expect(nightly.nextSlot!.getTime() - Date.now()).toBeLessThanOrEqual(25 * 3_600_000);
  });

  it('a schedule outlives a restart: the slot missed while no worker ran is enqueued once, none from before it existed', async () => {
    const worker = await startWorker('rs-restart');
    await admin.admin.upsertSchedule('restart', { cron: '* * * * * *', type: 'rs.report' });
    await waitFor(async () => (await rows()).length >= 1, { message: 'a first slot' });
    await worker.close();
    workers.splice(0);
    const before = (await rows()).length;
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await rows()).length).toBe(before);
    await startWorker('rs-restart-2');
    const after = await waitFor(async () => {
      const now = await rows();
      return now.length >= before + 2 ? now : null;
    }, { message: 'slots after the restart' });
    const slots = after.map((row) => row.run_at_ms);
    expect(new Set(slots).size).toBe(slots.length);
    // The first slot after the restart is the latest missed one: one job for the gap, not three.
    const gap = slots[before] - slots[before - 1];
    expect(gap).toBeGreaterThanOrEqual(2_000);
  });

  it('a changed timetable starts afresh, a removed schedule stops, and unknown names are not an error', async () => {
    await startWorker('rs-change');
    await admin.admin.upsertSchedule('change', { cron: '* * * * * *', type: 'rs.report', payload: { report: 'v1' } });
    await waitFor(async () => (await rows()).length >= 1, { message: 'a slot of v1' });
    // Once a minute from now on: no slot of the old timetable is caught up.
    await admin.admin.upsertSchedule('change', { cron: '0 0 1 1 *', type: 'rs.report', payload: { report: 'v2' } });
    const changedAt = Date.now();
    // A pass that read v1 before the change may still enqueue a slot due by then, and still be
    // recording it: the slot must not become the new timetable's last one.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const [{ lastSlot }] = (await admin.admin.schedules()).filter((s) => s.name === 'change');
    expect(lastSlot).toBeNull();
    const after = await rows();
    expect(after.every((row) => row.payload.report === 'v1')).toBe(true);
    expect(after.filter((row) => row.run_at_ms > changedAt)).toEqual([]);

    expect(await admin.admin.removeSchedule('change')).toBe(true);
    expect(await admin.admin.removeSchedule('change')).toBe(false);
    expect(await admin.admin.removeSchedule('never-was')).toBe(false);
    expect((await admin.admin.schedules()).map((s) => s.name)).toEqual(['rs.declared']);
  });

  it('a slot of the old timetable recorded after a change is not the new timetable\'s last slot', async () => {
    const dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } });
    await dataSource.initialize();
    try {
      const store = new PostgresJobStore(dataSource, 'job_queue', { prepare: false, synchronousClaims: true });
      await admin.admin.upsertSchedule('race', { cron: '* * * * * *', type: 'rs.report' });
      // A pass read this timetable, then an admin changed it before the pass recorded its slot.
      await admin.admin.upsertSchedule('race', { cron: '*/5 * * * *', type: 'rs.report' });
      const slot = new Date(Math.floor(Date.now() / 1000) * 1000);
      await store.markScheduleSlots([{ name: 'race', cron: '* * * * * *', timezone: 'UTC', slot }]);
      const lastSlotOf = async () => (await admin.admin.schedules()).find((s) => s.name === 'race')!.lastSlot;
      expect(await lastSlotOf()).toBeNull();
      // The current timetable's slot is recorded.
      await store.markScheduleSlots([{ name: 'race', cron: '*/5 * * * *', timezone: 'UTC', slot }]);
      expect((await lastSlotOf())?.getTime()).toBe(slot.getTime());
    } finally {
      await dataSource.destroy();
    }
  });

  it('refuses an invalid cron, time zone, name, type, payload or option, naming it, and saves nothing', async () => {
    const refusals: Array<[string, Parameters<QueueApp['admin']['upsertSchedule']>[1], string]> = [
      ['bad-cron', { cron: '61 * * * *', type: 'rs.report' }, 'cron'],
      ['bad-fields', { cron: '* * *', type: 'rs.report' }, 'cron'],
      ['bad-zone', { cron: '* * * * *', timezone: 'Mars/Olympus', type: 'rs.report' }, 'timezone'],
      ['bad-type', { cron: '* * * * *', type: ' ' }, 'type'],
      ['bad-payload', { cron: '* * * * *', type: 'rs.report', payload: [1] as never }, 'payload'],
      ['bad-option', { cron: '* * * * *', type: 'rs.report', options: { delayMs: 5 } as never }, 'options.delayMs'],
      ['bad-attempts', { cron: '* * * * *', type: 'rs.report', options: { maxAttempts: 0 } }, 'options.maxAttempts'],
      ['bad-group', { cron: '* * * * *', type: 'rs.report', options: { group: '' } }, 'options.group'],
    ];
    for (const [name, definition, field] of refusals) {
      const error = await admin.admin.upsertSchedule(name, definition).catch((e: unknown) => e);
      expect(error, name).toBeInstanceOf(InvalidJobError);
      expect((error as InvalidJobError).field, name).toBe(field);
      expect((error as Error).message, name).toContain('Nothing was saved.');
    }
    await expect(admin.admin.upsertSchedule('', { cron: '* * * * *', type: 'rs.report' })).rejects.toMatchObject({ field: 'name' });
    expect((await admin.admin.schedules()).filter((s) => s.source === 'runtime')).toEqual([]);
  });
});
