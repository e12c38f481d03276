import { beforeEach, describe, expect, it } from 'vitest';
import type { RegisteredHandler } from '../base/registered-handler.js';
import type { EngineLogger } from '../base/logger.js';
import type { EnqueuedJob, JobStore, NewJob } from '../persistence/job.store.js';
import { CronSchedule } from './cron-schedule.js';
import { CronScheduler } from './cron-scheduler.js';

const HOUR_MS = 3_600_000;

/**
 * In-memory stand-in for the one store call the scheduler makes: enqueue, with the unique
 * (type, idempotency key) rule of the jobs table, so a slot is one row however often it is enqueued.
 */
class FakeStore {
  readonly rows: NewJob[] = [];
  readonly calls: NewJob[][] = [];
  /** Fails the next enqueue (the database away). */
  failNext = false;

  async enqueue(jobs: readonly NewJob[]): Promise<EnqueuedJob[]> {
    this.calls.push([...jobs]);
    if (this.failNext) {
      this.failNext = false;
      throw new Error('connection refused');
    }
    return jobs.map((job) => {
      const existing = this.rows.findIndex((row) => row.type === job.type && row.idempotencyKey === job.idempotencyKey);
      if (existing >= 0) return { id: String(existing + 1), deduplicated: true };
      this.rows.push(job);
      return { id: String(this.rows.length), deduplicated: false };
    });
  }

  slots(type?: string): string[] {
    return this.rows.filter((row) => !type || row.type === type).map((row) => JSON.parse(row.payloadJson).scheduledFor);
  }
}

const logger: EngineLogger = { log() {}, warn() {}, error() {}, debug() {} };

function handler(type: string, cron: string, timezone = 'UTC', maxAttempts = 3): RegisteredHandler {
  return { type, schedule: CronSchedule.parse(cron, timezone), maxAttempts } as unknown as RegisteredHandler;
}

describe('CronScheduler.runOnce', () => {
  let store: FakeStore;
  let now: number;
  const clock = () => now;
  const scheduler = (handlers: RegisteredHandler[], catchUpMs = HOUR_MS) =>
    new CronScheduler(handlers, store as unknown as JobStore, logger, catchUpMs, clock);

  beforeEach(() => {
    store = new FakeStore();
    now = Date.parse('2025-06-02T10:17:30Z');
  });

  it('at start, enqueues only the latest missed slot of the catch-up window', async () => {
    const cron = scheduler([handler('report.five', '*/5 * * * *')]);
    expect(await cron.runOnce()).toBe(1);
    expect(store.slots()).toEqual(['2025-06-02T10:15:00.000Z']);
  });

  it('at start, enqueues nothing when no slot falls within the catch-up window', async () => {
    // Daily at 03:00: the last slot was 7 hours ago, the window is one hour.
    const cron = scheduler([handler('report.daily', '0 3 * * *')]);
    expect(await cron.runOnce()).toBe(0);
    expect(store.rows).toEqual([]);
    // …and the next pass does not dig it up either.
    now += 60_000;
    expect(await cron.runOnce()).toBe(0);
    expect(store.rows).toEqual([]);
  });

  it('at start, takes the latest slot even when it is exactly now', async () => {
    now = Date.parse('2025-06-02T10:15:00Z');
    const cron = scheduler([handler('report.five', '*/5 * * * *')]);
    await cron.runOnce();
    expect(store.slots()).toEqual(['2025-06-02T10:15:00.000Z']);
  });

  it('on later passes, enqueues every slot since the previous pass, each once', async () => {
    const cron = scheduler([handler('report.five', '*/5 * * * *')]);
    await cron.runOnce();
    now = Date.parse('2025-06-02T10:19:59Z');
    expect(await cron.runOnce()).toBe(0);
    now = Date.parse('2025-06-02T10:31:00Z');
    expect(await cron.runOnce()).toBe(3);
    expect(store.slots()).toEqual([
      '2025-06-02T10:15:00.000Z',
      '2025-06-02T10:20:00.000Z',
      '2025-06-02T10:25:00.000Z',
      '2025-06-02T10:30:00.000Z',
    ]);
    // A pass at the same moment adds nothing, and does not even call the store.
    const callsBefore = store.calls.length;
    expect(await cron.runOnce()).toBe(0);
    expect(store.calls.length).toBe(callsBefore);
    // The slot at exactly `now` is due.
    now = Date.parse('2025-06-02T10:35:00Z');
    expect(await cron.runOnce()).toBe(1);
    expect(store.slots().at(-1)).toBe('2025-06-02T10:35:00.000Z');
  });

  it('with seconds, enqueues every second since the previous pass without gaps or repeats', async () => {
    now = Date.parse('2025-06-02T10:00:00.400Z');
    const cron = scheduler([handler('tick', '* * * * * *')]);
    await cron.runOnce();
    for (const step of [700, 300, 1_000, 2_600, 10, 990, 5_000]) {
      now += step;
      await cron.runOnce();
    }
    const slots = store.slots();
    expect(slots[0]).toBe('2025-06-02T10:00:00.000Z');
    expect(slots.at(-1)).toBe(new Date(Math.floor(now / 1000) * 1000).toISOString());
    for (let i = 1; i < slots.length; i++) expect(Date.parse(slots[i]) - Date.parse(slots[i - 1])).toBe(1000);
    expect(new Set(slots).size).toBe(slots.length);
  });

  it('writes one job per slot: payload { scheduledFor } in ISO with Z, key cron:<slot>, runAt at the slot', async () => {
    const cron = scheduler([handler('report.five', '*/5 * * * *', 'Europe/Paris', 7)]);
    await cron.runOnce();
    now = Date.parse('2025-06-02T10:25:00Z');
    await cron.runOnce();
    expect(store.rows).toHaveLength(3);
    for (const job of store.rows) {
      const payload = JSON.parse(job.payloadJson);
      expect(Object.keys(payload)).toEqual(['scheduledFor']);
      expect(payload.scheduledFor).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.000Z$/);
      expect(job).toMatchObject({
        type: 'report.five',
        idempotencyKey: `cron:${payload.scheduledFor}`,
        maxAttempts: 7,
        maxAttemptsFromJob: false,
        orderingKey: null,
        priority: 0,
      });
      expect(job.runAt?.toISOString()).toBe(payload.scheduledFor);
    }
    expect(store.rows.map((r) => r.idempotencyKey)).toEqual([
      'cron:2025-06-02T10:15:00.000Z',
      'cron:2025-06-02T10:20:00.000Z',
      'cron:2025-06-02T10:25:00.000Z',
    ]);
  });

  it('gives slots in a time zone as UTC instants', async () => {
    // 12:00 in Paris (summer) is 10:00 UTC.
    now = Date.parse('2025-06-02T10:00:05Z');
    const cron = scheduler([handler('lunch', '0 12 * * *', 'Europe/Paris')]);
    await cron.runOnce();
    expect(store.slots()).toEqual(['2025-06-02T10:00:00.000Z']);
  });

  it('counts only new rows: a second process enqueueing the same slots adds nothing', async () => {
    const first = scheduler([handler('report.five', '*/5 * * * *')]);
    const second = scheduler([handler('report.five', '*/5 * * * *')]);
    expect(await first.runOnce()).toBe(1);
    expect(await second.runOnce()).toBe(0);
    now = Date.parse('2025-06-02T10:30:00Z');
    expect(await second.runOnce()).toBe(3);
    expect(await first.runOnce()).toBe(0);
    expect(store.slots()).toHaveLength(4);
  });

  it('keeps each schedule on its own track', async () => {
    const cron = scheduler([handler('every.five', '*/5 * * * *'), handler('every.ten', '*/10 * * * *')]);
    await cron.runOnce();
    now = Date.parse('2025-06-02T10:40:00Z');
    await cron.runOnce();
    expect(store.slots('every.five')).toEqual([
      '2025-06-02T10:15:00.000Z',
      '2025-06-02T10:20:00.000Z',
      '2025-06-02T10:25:00.000Z',
      '2025-06-02T10:30:00.000Z',
      '2025-06-02T10:35:00.000Z',
      '2025-06-02T10:40:00.000Z',
    ]);
    expect(store.slots('every.ten')).toEqual([
      '2025-06-02T10:10:00.000Z',
      '2025-06-02T10:20:00.000Z',
      '2025-06-02T10:30:00.000Z',
      '2025-06-02T10:40:00.000Z',
    ]);
  });

  it('after a long stall, catches up at most 100 slots per pass and loses none over the next passes', async () => {
    now = Date.parse('2025-06-02T10:00:00Z');
    const cron = scheduler([handler('tick', '* * * * * *')]);
    await cron.runOnce();
    now += 250_000; // 250 s without a pass
    expect(await cron.runOnce()).toBe(100);
    expect(await cron.runOnce()).toBe(100);
    expect(await cron.runOnce()).toBe(50);
    expect(await cron.runOnce()).toBe(0);
    const slots = store.slots();
    expect(slots).toHaveLength(251);
    for (let i = 1; i < slots.length; i++) expect(Date.parse(slots[i]) - Date.parse(slots[i - 1])).toBe(1000);
  });

  it('a pass whose enqueue fails leaves its slots to the next pass', async () => {
    const cron = scheduler([handler('report.minute', '* * * * *')]);
    await cron.runOnce();
    now += 60_000;
    store.failNext = true;
    await expect(cron.runOnce()).rejects.toThrow('connection refused');
    now += 60_000;
    expect(await cron.runOnce()).toBe(2);
    expect(store.slots()).toEqual(['2025-06-02T10:17:00.000Z', '2025-06-02T10:18:00.000Z', '2025-06-02T10:19:00.000Z']);
  });

  it('lists its schedules with the next slot after now', () => {
    const cron = scheduler([handler('report.five', '*/5 * * * *', 'Europe/Paris')]);
    expect(cron.schedules).toEqual([
      { type: 'report.five', cron: '*/5 * * * *', timezone: 'Europe/Paris', nextRunAt: new Date('2025-06-02T10:20:00Z') },
    ]);
    expect(cron.msUntilNextSlot()).toBe(150_000);
  });
});
