import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler, type JobContext } from '../src/index.js';
import { jobSql } from '../libs/job-queue/src/persistence/job.sql.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

const ran = new Map<string, number>();

@Injectable()
class DeletingHandlers {
  @JobHandler('doc.noop')
  noop(payload: { n: number }): { n: number } {
    ran.set(`noop:${payload.n}`, (ran.get(`noop:${payload.n}`) ?? 0) + 1);
    return { n: payload.n };
  }

  @JobHandler('doc.tx', { transactional: true })
  async tx(payload: { n: number }, job: JobContext): Promise<string> {
    await job.manager!.query(`INSERT INTO doc_effects (job_id, n) VALUES ($1, $2)`, [job.id, payload.n]);
    return 'written';
  }

  @JobHandler('doc.once')
  async once(payload: { n: number }, job: JobContext): Promise<number> {
    return job.once('the-effect', async () => payload.n * 2);
  }

  @JobHandler('doc.answer')
  answer(payload: { question: string }): { answer: string } {
    return { answer: `${payload.question}: 42` };
  }
}

/**
 * `retention.completedMs: 0`: a completion deletes its job in the same fenced statement (batched
 * and transactional completions alike), except a job an enqueueAndWait caller waits for, which
 * is kept until that caller has read its result.
 */
describe('retention.completedMs 0: delete on complete', () => {
  let db: TestDatabase;
  let app: QueueApp | undefined;
  const sql = jobSql('job_queue');

  const rowsOf = async (type: string) =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = $1`, [type]))[0].n;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    await (await startQueueApp(db.url, { runWorker: false })).close();
    await db.query(`CREATE TABLE doc_effects (job_id bigint NOT NULL, n int NOT NULL)`);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  afterAll(async () => {
    await db?.drop();
  });

  /** Processing rows as a claim leaves them, each with its own token; `awaited` ones have a waiter. */
  async function processingRows(count: number, awaited: (i: number) => boolean = () => false) {
    const rows = await db.query<{ id: string; token: string }>(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, worker_id, lease_token, lease_expires_at,
                                   claimed_at, notify_on_finish)
       SELECT 'doc.sql', '{}'::jsonb, 'processing', 1, 3, 'w', gen_random_uuid(), now() + interval '1 minute', now(), a
       FROM unnest($1::boolean[]) WITH ORDINALITY AS t(a, n) ORDER BY n
       RETURNING id::text, lease_token::text AS token`,
      [Array.from({ length: count }, (_, i) => awaited(i))],
    );
    return rows;
  }

  /** A session that LISTENs on the schema's channel and collects the payloads. */
  async function listener() {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const payloads: string[] = [];
    client.on('notification', (message) => payloads.push(message.payload ?? ''));
    await client.query(`LISTEN "auto_job_queue:job_queue"`);
    return { payloads, close: () => client.end() };
  }

  it('completeManyDeleting: deletes the jobs held by their tokens, keeps and notifies the awaited one, reports a lost lease', async () => {
    const rows = await processingRows(5, (i) => i === 3);
    const listening = await listener();
    try {
      const [usual] = rows.map((r) => r.token);
      // Rows 1, 3 and 4 carry tokens of their own (the `others` map); row 2's is wrong (its lease is gone).
      const others = { [rows[1].id]: rows[1].token, [rows[2].id]: '00000000-0000-0000-0000-000000000000', [rows[3].id]: rows[3].token, [rows[4].id]: rows[4].token };
      const results = { [rows[3].id]: { answer: 7 } };
      const [reply] = await db.query(sql.completeManyDeleting, [rows.map((r) => r.id), JSON.stringify(others), JSON.stringify(results), usual]);
      expect(reply).toEqual({ missed: rows[2].id, notified: 1 });
      const left = await db.query<{ id: string; status: string; result: unknown; lease_token: string | null }>(
        `SELECT id::text, status, result, lease_token::text FROM job_queue.jobs WHERE type = 'doc.sql' ORDER BY id`,
      );
      expect(left).toEqual([
        { id: rows[2].id, status: 'processing', result: null, lease_token: rows[2].token },
        { id: rows[3].id, status: 'completed', result: { answer: 7 }, lease_token: null },
      ]);
      await waitFor(() => listening.payloads.includes(`finished:${rows[3].id}`), { message: 'the awaited job notified' });
      expect(listening.payloads.filter((p) => p.startsWith('finished:'))).toEqual([`finished:${rows[3].id}`]);

      // Every completion applied: the usual one-NULL reply.
      const [again] = await db.query(sql.completeManyDeleting, [[rows[2].id], '{}', '{}', rows[2].token]);
      expect(again).toEqual({ missed: null, notified: 0 });
      expect(await rowsOf('doc.sql')).toBe(1);
    } finally {
      await listening.close();
      await db.query(`DELETE FROM job_queue.jobs WHERE type = 'doc.sql'`);
    }
  });

  it('completeDeleting (the transactional completion): fenced by the token; deletes, or completes an awaited job', async () => {
    const [plain, awaited] = await processingRows(2, (i) => i === 1);
    try {
      expect(await db.query(sql.completeDeleting, [plain.id, '00000000-0000-0000-0000-000000000000', 'null'])).toEqual([
        { applied: 0, notified: 0 },
      ]);
      expect(await db.query(sql.completeDeleting, [plain.id, plain.token, '{"a":1}'])).toEqual([{ applied: 1, notified: 0 }]);
      expect(await db.query(sql.completeDeleting, [awaited.id, awaited.token, '{"a":2}'])).toEqual([{ applied: 1, notified: 1 }]);
      expect(await db.query(`SELECT id::text, status, result FROM job_queue.jobs WHERE type = 'doc.sql'`)).toEqual([
        { id: awaited.id, status: 'completed', result: { a: 2 } },
      ]);
    } finally {
      await db.query(`DELETE FROM job_queue.jobs WHERE type = 'doc.sql'`);
    }
  });

  it('a worker deletes every job it completes, in batches and in transactional handlers, each run once', async () => {
    app = await startQueueApp(db.url, { concurrency: 20, retention: { completedMs: 0 } }, [DeletingHandlers]);
    const completed: string[] = [];
    const subscription = app.events.events$.subscribe((event) => {
      if (event.kind === 'completed' && event.jobId) completed.push(event.jobId);
    });
    try {
      await app.producer.enqueueMany(Array.from({ length: 500 }, (_, n) => ({ type: 'doc.noop', payload: { n } })));
      await app.producer.enqueueMany(Array.from({ length: 20 }, (_, n) => ({ type: 'doc.tx', payload: { n } })));
      await waitFor(async () => (await rowsOf('doc.noop')) === 0 && (await rowsOf('doc.tx')) === 0, { message: 'every job deleted' });
      await waitFor(() => completed.length === 520, { message: 'a completed event per job' });
      expect([...ran.values()].every((runs) => runs === 1)).toBe(true);
      expect(ran.size).toBe(500);
      // The transactional handlers' writes committed with the deleting completion.
      const [{ n }] = await db.query<{ n: number }>(`SELECT count(DISTINCT n)::int AS n FROM doc_effects`);
      expect(n).toBe(20);
    } finally {
      subscription.unsubscribe();
    }
  });

  it("a deleted job's effect-ledger rows go with it, whichever statement deletes it", async () => {
    app = await startQueueApp(db.url, { retention: { completedMs: 0 } }, [DeletingHandlers]);
    const effects = async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.job_effects`))[0].n;
    await app.producer.enqueueMany(Array.from({ length: 30 }, (_, n) => ({ type: 'doc.once', payload: { n } })));
    await waitFor(async () => (await rowsOf('doc.once')) === 0, { message: 'the jobs deleted as they completed' });
    expect(await effects()).toBe(0);

    // The retention walk and admin deletes too: a finished row with a ledger entry, deleted by the chunk statement.
    const [{ id }] = await db.query<{ id: string }>(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, created_at, completed_at)
       VALUES ('doc.walk', '{}', 'completed', 1, 3, now() - interval '2 hours', now() - interval '2 hours') RETURNING id::text`,
    );
    await db.query(`INSERT INTO job_queue.job_effects (job_id, key, result, attempt) VALUES ($1, 'a', '1', 1), ($1, 'b', '2', 1)`, [id]);
    const [chunk] = await db.query(sql.pruneFinishedChunk, [(BigInt(id) - 1n).toString(), 10, 3_600_000, 0]);
    expect(chunk).toMatchObject({ completed: 1 });
    expect(await effects()).toBe(0);
  });

  it('enqueueAndWait gets its result; the row stays until the waiter has read it, then the retention walk deletes it', async () => {
    app = await startQueueApp(db.url, { maintenanceIntervalMs: 50, retention: { completedMs: 0 } }, [DeletingHandlers]);
    const answer = await app.producer.enqueueAndWait('doc.answer', { question: 'six by seven' }, { timeoutMs: 15_000 });
    expect(answer).toEqual({ answer: 'six by seven: 42' });
    const [row] = await db.query<{ id: string; status: string; notify_on_finish: boolean }>(
      `SELECT id::text, status, notify_on_finish FROM job_queue.jobs WHERE type = 'doc.answer'`,
    );
    // Read: now an ordinary finished job. The walk rests a minute between walks with completedMs 0;
    // ending its rest here stands for that minute passing.
    expect(row).toMatchObject({ status: 'completed', notify_on_finish: false });
    // Ended at each look: a pass already under way when the rest ends began before the result was
    // read, so it keeps the row and rests again.
    await waitFor(
      async () => {
        await db.query(`UPDATE job_queue.retention_walk SET rest_until = '-infinity'`);
        return (await rowsOf('doc.answer')) === 0;
      },
      { message: 'the read result deleted by the walk' },
    );
  });

  it('the walk keeps an awaited result nobody has read for an hour, and deletes cancelled jobs and read results at once', async () => {
    const ids = await db.query<{ id: string }>(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, created_at, completed_at, notify_on_finish)
       VALUES ('doc.walk', '{}', 'completed', 1, 3, now() - interval '2 minutes', now() - interval '1 minute', true),
              ('doc.walk', '{}', 'completed', 1, 3, now() - interval '2 hours', now() - interval '61 minutes', true),
              ('doc.walk', '{}', 'completed', 1, 3, now() - interval '2 minutes', now() - interval '1 minute', false),
              ('doc.walk', '{}', 'cancelled', 0, 3, now() - interval '1 second', NULL, false),
              ('doc.walk', '{}', 'pending', 0, 3, now() - interval '2 hours', NULL, true)
       RETURNING id::text`,
    );
    try {
      const before = (BigInt(ids[0].id) - 1n).toString();
      const [chunk] = await db.query(sql.pruneFinishedChunk, [before, 1_000, 0, 3_600_000]);
      expect(chunk).toMatchObject({ scanned: 5, completed: 2, cancelled: 1, reached_recent: false });
      const left = await db.query<{ id: string }>(`SELECT id::text FROM job_queue.jobs WHERE type = 'doc.walk' ORDER BY id`);
      expect(left.map((r) => r.id)).toEqual([ids[0].id, ids[4].id]);
    } finally {
      await db.query(`DELETE FROM job_queue.jobs WHERE type = 'doc.walk'`);
    }
  });

  it('an idempotency key dedupes while its job waits, and not once the completed job is deleted', async () => {
    const producerOnly = await startQueueApp(db.url, { runWorker: false, retention: { completedMs: 0 } });
    try {
      const first = await producerOnly.producer.enqueue('doc.noop', { n: 10_000 }, { idempotencyKey: 'once' });
      expect(await producerOnly.producer.enqueue('doc.noop', { n: 10_000 }, { idempotencyKey: 'once' })).toEqual({
        id: first.id,
        deduplicated: true,
      });
      app = await startQueueApp(db.url, { retention: { completedMs: 0 } }, [DeletingHandlers]);
      await waitFor(async () => (await rowsOf('doc.noop')) === 0, { message: 'the job run and deleted' });
      const second = await producerOnly.producer.enqueue('doc.noop', { n: 10_001 }, { idempotencyKey: 'once' });
      expect(second.deduplicated).toBe(false);
      expect(second.id).not.toBe(first.id);
      await waitFor(async () => (await rowsOf('doc.noop')) === 0, { message: 'the second job run and deleted' });
    } finally {
      await producerOnly.close();
    }
  });
});
