import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler, type JobContext } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

const seen: Array<{ payload: unknown; job: JobContext }> = [];

@Injectable()
class Mailer {
  @JobHandler('email.welcome')
  async welcome(payload: { to: string }, job: JobContext) {
    seen.push({ payload, job });
    return { sent: payload.to };
  }
}

describe('enqueue → handler → completed', () => {
  let db: TestDatabase;
  let queue: QueueApp;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    queue = await startQueueApp(db.url, { workerId: 'worker-a' }, [Mailer]);
  });
  afterAll(async () => {
    await queue?.close();
    await db?.drop();
  });

  it('runs the handler once and fills the contract columns', async () => {
    const { id, deduplicated } = await queue.producer.enqueue('email.welcome', { to: 'ada@example.com' });
    expect(deduplicated).toBe(false);
    const record = await waitFor(async () => {
      const job = await queue.admin.getJob(id);
      return job?.status === 'completed' ? job : null;
    });
    expect(seen).toHaveLength(1);
    expect(seen[0].payload).toEqual({ to: 'ada@example.com' });
    expect(seen[0].job).toMatchObject({ id, type: 'email.welcome', attempt: 1, maxAttempts: 5, idempotencyKey: null });
    expect(record).toMatchObject({
      id,
      type: 'email.welcome',
      status: 'completed',
      attempts: 1,
      maxAttempts: 5,
      lastError: null,
      workerId: 'worker-a',
      retryAfter: null,
      deadAt: null,
      result: { sent: 'ada@example.com' },
    });
    expect(record.createdAt).toBeInstanceOf(Date);
    expect(record.claimedAt!.getTime()).toBeGreaterThanOrEqual(record.createdAt.getTime());
    expect(record.completedAt!.getTime()).toBeGreaterThanOrEqual(record.claimedAt!.getTime());
    const [row] = await db.query(`SELECT status, attempts, max_attempts, last_error, created_at, claimed_at, completed_at,
      retry_after, worker_id FROM job_queue.jobs WHERE id = $1`, [id]);
    expect(row).toMatchObject({ status: 'completed', attempts: 1, max_attempts: 5, worker_id: 'worker-a' });
  });

  it('returns null for unknown ids', async () => {
    expect(await queue.admin.getJob('999999')).toBeNull();
    expect(await queue.admin.getJob('not-an-id')).toBeNull();
  });
});
