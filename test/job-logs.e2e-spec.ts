import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler, type JobContext } from '../src/index.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * job.log() on real PostgreSQL: lines formatted as console.log would, the last 100 kept, each cut
 * at 2 KB, every attempt's lines labelled, the lines logged just before the handler returns kept,
 * and a log write that fails never failing the job.
 */
@Injectable()
class LoggingHandlers {
  @JobHandler('logs.chatty')
  chatty(payload: { lines: number }, job: JobContext) {
    job.log('starting', { lines: payload.lines }, 42, null);
    for (let i = 1; i <= payload.lines; i++) job.log(`line ${i}`);
    job.log('done: %d lines', payload.lines);
  }

  @JobHandler('logs.long')
  long(_payload: unknown, job: JobContext) {
    job.log('x'.repeat(5_000));
    job.log('é'.repeat(1_500));
    job.log('lone \uD800 surrogate');
  }

  @JobHandler('logs.retried', { baseDelayMs: 10, maxDelayMs: 20 })
  retried(_payload: unknown, job: JobContext) {
    job.log(`attempt ${job.attempt} begins`);
    if (job.attempt === 1) throw new Error('first attempt fails');
  }
}

describe('job.log()', () => {
  let db: TestDatabase;
  let app: QueueApp;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    app = await startQueueApp(db.url, {}, [LoggingHandlers]);
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const logsOf = async (id: string, count: number) =>
    waitFor(
      async () => {
        const job = await app.admin.getJob(id);
        return job?.status === 'completed' && job.logs.length === count ? job.logs : null;
      },
      { message: `${count} log lines of a completed job` },
    );

  it('formats like console.log, keeps the last 100 lines in order, and keeps those logged just before the return', async () => {
    const { id } = await app.producer.enqueue('logs.chatty', { lines: 150 });
    const logs = await logsOf(id, 100);
    expect(logs[0].message).toBe('line 52');
    expect(logs[98].message).toBe('line 150');
    expect(logs[99].message).toBe('done: 150 lines');
    expect(logs.every((line) => line.attempt === 1 && !Number.isNaN(Date.parse(line.at)))).toBe(true);

    const { id: few } = await app.producer.enqueue('logs.chatty', { lines: 1 });
    const short = await logsOf(few, 3);
    expect(short.map((line) => line.message)).toEqual(['starting { lines: 1 } 42 null', 'line 1', 'done: 1 lines']);
  });

  it('cuts each line at 2 KB of UTF-8, never in a character, and stores a lone surrogate as a replacement', async () => {
    const { id } = await app.producer.enqueue('logs.long', {});
    const [ascii, accented, surrogate] = await logsOf(id, 3);
    expect(ascii.message).toBe('x'.repeat(2_048));
    expect(accented.message).toBe('é'.repeat(1_024));
    expect(surrogate.message).toBe('lone \uFFFD surrogate');
  });

  it("keeps every attempt's lines, each labelled with its attempt", async () => {
    const { id } = await app.producer.enqueue('logs.retried', {});
    const logs = await logsOf(id, 2);
    expect(logs.map((line) => [line.attempt, line.message])).toEqual([
      [1, 'attempt 1 begins'],
      [2, 'attempt 2 begins'],
    ]);
  });

  it('a log write that fails never fails the job', async () => {
    await db.query(`CREATE FUNCTION refuse_logs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'logs refused'; END $$`);
    await db.query(
      `CREATE TRIGGER refuse_logs BEFORE UPDATE ON job_queue.jobs FOR EACH ROW WHEN (NEW.logs IS DISTINCT FROM OLD.logs) EXECUTE FUNCTION refuse_logs()`,
    );
    try {
      const { id } = await app.producer.enqueue('logs.chatty', { lines: 3 });
      const job = await waitFor(async () => ((await app.admin.getJob(id))?.status === 'completed' ? app.admin.getJob(id) : null), {
        message: 'the job completed',
      });
      expect(job?.logs).toEqual([]);
      expect(job?.attempts).toBe(1);
    } finally {
      await db.query('DROP TRIGGER refuse_logs ON job_queue.jobs');
      await db.query('DROP FUNCTION refuse_logs()');
    }
  });
});
