import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { QueueSaturatedError } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

describe('backpressure under concurrent enqueues in one process', () => {
  let db: TestDatabase;
  let queue: QueueApp;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    queue = await startQueueApp(db.url, { runWorker: false, maxQueueDepth: 10, maxQueueDepthByType: { 'limited.type': 3 } });
  });
  afterAll(async () => {
    await queue?.close();
    await db?.drop();
  });

  it('admits exactly up to the limit when 30 enqueues race for the last places', async () => {
    const outcomes = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => queue.producer.enqueue('bulk.type', { i })),
    );
    const refused = outcomes.filter((o) => o.status === 'rejected');
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(10);
    expect(refused).toHaveLength(20);
    for (const outcome of refused) {
      const error = (outcome as PromiseRejectedResult).reason;
      expect(error).toBeInstanceOf(QueueSaturatedError);
      expect(error).toMatchObject({ limit: 10 });
      expect(error.depth).toBeGreaterThanOrEqual(10);
    }
    const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs`);
    expect(n).toBe(10);
  });

  it('deduplicated enqueues do not use up places', async () => {
    await db.query(`DELETE FROM job_queue.jobs`);
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // let the cached depth expire (depthRefreshMs 1000)
    const first = await queue.producer.enqueue('limited.type', {}, { idempotencyKey: 'same' });
    for (let i = 0; i < 5; i++) {
      const again = await queue.producer.enqueue('limited.type', {}, { idempotencyKey: 'same' });
      expect(again).toEqual({ id: first.id, deduplicated: true });
    }
    await queue.producer.enqueue('limited.type', {});
    await queue.producer.enqueue('limited.type', {});
    await expect(queue.producer.enqueue('limited.type', {})).rejects.toMatchObject({ limit: 3 });
    const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'limited.type'`);
    expect(n).toBe(3);
  });

  it('while saturated, answers a repeated idempotent enqueue with its job, and refuses what would add a row', async () => {
    // limited.type is full (the test before): 'same' is one of its three jobs.
    const [{ id }] = await db.query(`SELECT id::text FROM job_queue.jobs WHERE type = 'limited.type' AND idempotency_key = 'same'`);
    await expect(queue.producer.enqueue('limited.type', {}, { idempotencyKey: 'same' })).resolves.toEqual({ id, deduplicated: true });
    await expect(queue.producer.enqueue('limited.type', {}, { idempotencyKey: 'new-key' })).rejects.toBeInstanceOf(QueueSaturatedError);
    // In one call: the existing one takes no place, the new one still has none.
    const mixed = queue.producer.enqueueMany([
      { type: 'limited.type', payload: {}, options: { idempotencyKey: 'same' } },
      { type: 'limited.type', payload: {}, options: { idempotencyKey: 'another-new-key' } },
    ]);
    await expect(mixed).rejects.toBeInstanceOf(QueueSaturatedError);
    await expect(
      queue.producer.enqueueMany([
        { type: 'limited.type', payload: {}, options: { idempotencyKey: 'same' } },
        { type: 'limited.type', payload: {}, options: { idempotencyKey: 'same' } },
      ]),
    ).resolves.toEqual([
      { id, deduplicated: true },
      { id, deduplicated: true },
    ]);
    const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'limited.type'`);
    expect(n).toBe(3);
  });
});

describe('the cached depth under a wall-clock step (NTP, a resumed VM)', () => {
  let db: TestDatabase;
  let queue: QueueApp;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    queue = await startQueueApp(db.url, { runWorker: false, maxQueueDepth: 5, depthRefreshMs: 50 });
  });
  afterAll(async () => {
    await queue?.close();
    await db?.drop();
  });

  it('is counted again on time when the clock steps back, not kept for the hour', async () => {
    // Only the wall clock is faked (Date, moving with real time); timers keep real time.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    try {
      await queue.producer.enqueue('step.type', {}); // counts the queue: nothing waiting
      vi.setSystemTime(Date.now() - 3_600_000);
      // Other processes fill the queue meanwhile.
      await db.query(`INSERT INTO job_queue.jobs (type, payload, max_attempts) SELECT 'step.type', '{}', 3 FROM generate_series(1, 10)`);
      await new Promise((resolve) => setTimeout(resolve, 200)); // past depthRefreshMs
      await expect(queue.producer.enqueue('step.type', {})).rejects.toBeInstanceOf(QueueSaturatedError);
    } finally {
      vi.useRealTimers();
    }
  });
});
