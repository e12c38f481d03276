import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { InvalidJobError, JobFailedError, JobHandler, JobQueueConfigError, PermanentJobError, type JobContext } from '../src/index.js';
import { createTestDatabase as createKitDatabase, JobQueueTester } from '../src/testing.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The testing kit (`auto-job-queue/testing`) on real PostgreSQL: with `runWorker: 'manual'`
 * nothing runs until JobQueueTester.drain(), which runs the due jobs and those they enqueue;
 * perform() runs one job through the whole pipeline; createTestDatabase() gives a fresh database.
 */
const ran: string[] = [];

@Injectable()
class Signups {
  @JobHandler('kit.signup')
  async signup(payload: { email: string }, job: JobContext) {
    ran.push(`signup ${payload.email}`);
    await job.enqueue('kit.welcome', { email: payload.email });
    return { signedUp: payload.email };
  }

  @JobHandler('kit.welcome')
  welcome(payload: { email: string }) {
    ran.push(`welcome ${payload.email}`);
  }

  @JobHandler('kit.flaky', { baseDelayMs: 60_000, maxDelayMs: 60_000 })
  flaky() {
    throw new Error('smtp timeout');
  }

  @JobHandler('kit.poison')
  poison() {
    throw new PermanentJobError('no such account');
  }

  @JobHandler('kit.checked', {
    schema: {
      parse(input: unknown) {
        const value = input as { n?: unknown };
        if (typeof value?.n !== 'number') throw new Error('n must be a number');
        return { n: value.n };
      },
    },
  })
  checked(payload: { n: number }) {
    return payload.n * 2;
  }
}

describe('the testing kit', () => {
  let db: TestDatabase;
  let app: QueueApp;
  let tester: JobQueueTester;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    app = await startQueueApp(db.url, { runWorker: 'manual' }, [Signups]);
    tester = app.app.get(JobQueueTester);
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('runs nothing on its own; drain runs the due jobs and the jobs they enqueue, and counts what ran', async () => {
    ran.length = 0;
    await app.producer.enqueue('kit.signup', { email: 'ada@example.com' });
    await app.producer.enqueue('kit.welcome', { email: 'later@example.com' }, { delayMs: 3_600_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(ran).toEqual([]);
    expect((await tester.enqueued()).map((job) => job.type)).toEqual(['kit.signup', 'kit.welcome']);

    expect(await tester.drain()).toEqual({ completed: 2, failed: 0, dead: 0 });
    expect(ran).toEqual(['signup ada@example.com', 'welcome ada@example.com']);
    // The delayed job is not due: it still waits.
    const waiting = await tester.enqueued({ type: 'kit.welcome' });
    expect(waiting.map((job) => job.payload)).toEqual([{ email: 'later@example.com' }]);
    expect(await tester.drain()).toEqual({ completed: 0, failed: 0, dead: 0 });
  });

  it('drains only the types asked for; a failure counts once and its retry waits; a permanent one is dead', async () => {
    ran.length = 0;
    await app.producer.enqueue('kit.signup', { email: 'bo@example.com' });
    await app.producer.enqueue('kit.flaky', {});
    await app.producer.enqueue('kit.poison', {});
    expect(await tester.drain({ types: ['kit.flaky', 'kit.poison'] })).toEqual({ completed: 0, failed: 1, dead: 1 });
    expect(ran).toEqual([]);
    const [flaky] = await tester.enqueued({ type: 'kit.flaky' });
    expect(flaky).toMatchObject({ status: 'failed', attempts: 1, lastError: expect.stringContaining('smtp timeout') });
    expect(await tester.drain({ types: ['kit.signup'] })).toEqual({ completed: 1, failed: 0, dead: 0 });
  });

  it('stops when the jobs left are held back, rather than wait for them', async () => {
    // The first of an ordering key fails and waits an hour for its retry: the second cannot start.
    await app.producer.enqueue('kit.flaky', {}, { orderingKey: 'account-7' });
    await app.producer.enqueue('kit.welcome', { email: 'held@example.com' }, { orderingKey: 'account-7' });
    const counts = await tester.drain();
    expect(counts.failed).toBeGreaterThanOrEqual(1);
    expect((await tester.enqueued({ type: 'kit.welcome' })).some((job) => (job.payload as { email: string }).email === 'held@example.com')).toBe(true);
  });

  it('perform runs one job through the schema, the context and the handler, and returns its result or its failure', async () => {
    expect(await tester.perform('kit.checked', { n: 21 })).toBe(42);
    expect(await tester.perform('kit.signup', { email: 'cy@example.com' })).toEqual({ signedUp: 'cy@example.com' });
    const invalid = await tester.perform('kit.checked', { n: 'x' }).catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(JobFailedError);
    expect((invalid as Error).message).toMatch(/dead-lettered: invalid payload.*n must be a number/);
    await expect(tester.perform('kit.poison', {})).rejects.toThrow(/no such account/);
    await expect(tester.perform('kit.unknown', {})).rejects.toBeInstanceOf(InvalidJobError);
    await expect(tester.drain({ types: ['kit.unknown'] })).rejects.toMatchObject({ field: 'types' });
  });

  it('refuses to drain in an app whose worker runs on its own', async () => {
    const other = await startQueueApp(db.url, { runWorker: false }, []);
    try {
      await expect(other.app.get(JobQueueTester).drain()).rejects.toBeInstanceOf(JobQueueConfigError);
    } finally {
      await other.close();
    }
  });

  it("createTestDatabase gives a fresh database on DATABASE_URL's server, and drops it", async () => {
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = inject('adminUrl');
    try {
      const scratch = await createKitDatabase();
      const name = new URL(scratch.url).pathname.slice(1);
      expect(name).toMatch(/^ajq_test_[0-9a-f]{12}$/);
      const kitApp = await startQueueApp(scratch.url, { runWorker: 'manual' }, [Signups]);
      try {
        expect(await kitApp.app.get(JobQueueTester).perform('kit.checked', { n: 2 })).toBe(4);
      } finally {
        await kitApp.close();
      }
      await scratch.drop();
      const [{ exists }] = await db.query<{ exists: boolean }>(`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS exists`, [name]);
      expect(exists).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = saved;
    }
  });

  it('the testing page shows the example files as they are, so what it teaches is what runs', () => {
    const page = readFileSync(new URL('../docs/testing.md', import.meta.url), 'utf8');
    for (const file of ['signup.service.ts', 'welcome.mailer.ts', 'signup.vitest.spec.ts', 'signup.jest.spec.ts']) {
      const source = readFileSync(new URL(`../examples/testing/${file}`, import.meta.url), 'utf8').trimEnd();
      expect(page.includes(source), `docs/testing.md shows examples/testing/${file} as it is`).toBe(true);
    }
  });
});
