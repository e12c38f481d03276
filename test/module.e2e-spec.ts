import { ConsoleLogger, Inject, Injectable, Logger, Scope } from '@nestjs/common';
import { REQUEST } from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import {
  DuplicateJobHandlerError,
  JOB_QUEUE_ENTITIES,
  JOB_QUEUE_MIGRATIONS,
  JobEntity,
  JobHandler,
  JobProducer,
  JobQueueAdmin,
  JobQueueConfigError,
  JobQueueModule,
  type JobContext,
  type JobQueueOptions,
} from '../src/index.js';
import { bootTestingModule, startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/** Keeps an expected boot failure out of the test output. */
class NoopLogger extends ConsoleLogger {
  override error(): void {}
  override warn(): void {}
  override log(): void {}
}

/** The error a promise rejects with; fails the test when it resolves instead. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  let outcome: unknown;
  try {
    outcome = await promise;
  } catch (error) {
    return error as Error;
  }
  // Resolved: close whatever booted so the test does not leak it, then fail.
  await (outcome as { close?: () => Promise<void> } | undefined)?.close?.().catch(() => undefined);
  throw new Error('expected the boot to fail, but it succeeded');
}

/** Every migration the library ships, by name, sorted: each must be recorded exactly once. */
function migrationNames(): string[] {
  const names = JOB_QUEUE_MIGRATIONS.map((Migration) => new Migration().name ?? Migration.name);
  expect(names.length).toBeGreaterThan(0);
  return [...names].sort();
}

async function connectionsNamed(db: TestDatabase, applicationName: string): Promise<number> {
  const [row] = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [applicationName]);
  return row.n;
}

async function completed(admin: JobQueueAdmin, id: string) {
  return waitFor(
    async () => {
      const job = await admin.getJob(id);
      return job?.status === 'completed' ? job : null;
    },
    { timeoutMs: 15_000, message: `job ${id} completed` },
  );
}

// ---------------------------------------------------------------------------------------------
// Handler providers used by the tests below. Each app gets only the classes its test names.
// ---------------------------------------------------------------------------------------------

@Injectable()
class Greeting {
  prefix = 'hello';
}

const featureCalls: Array<{ type: string; text: string; job: JobContext }> = [];

@Injectable()
class FeatureHandlers {
  constructor(private readonly greeting: Greeting) {}

  @JobHandler('discovery.first')
  async first(payload: { name: string }, job: JobContext) {
    // `this` must be the provider instance Nest built, with its injected dependency.
    featureCalls.push({ type: 'discovery.first', text: `${this.greeting.prefix} ${payload.name}`, job });
    return { ok: 1 };
  }

  @JobHandler('discovery.second', { maxAttempts: 2 })
  second(payload: { name: string }, job: JobContext) {
    featureCalls.push({ type: 'discovery.second', text: `${this.greeting.prefix} again ${payload.name}`, job });
  }

  /** Not a handler: must not be registered or called. */
  helper() {
    throw new Error('helper() is not a job handler');
  }
}

@Injectable()
class FirstDuplicate {
  @JobHandler('dup.type')
  run() {}
}

@Injectable()
class SecondDuplicate {
  @JobHandler('dup.type')
  handle() {}
}

@Injectable({ scope: Scope.REQUEST })
class RequestScopedHandlers {
  @JobHandler('scoped.request')
  run() {}
}

/** Request-scoped by dependency: it injects REQUEST, so Nest builds one per request. */
@Injectable()
class RequestDependentHandlers {
  constructor(@Inject(REQUEST) readonly request: unknown) {}

  @JobHandler('scoped.dependent')
  run() {}
}

const asyncCalls: string[] = [];

@Injectable()
class AsyncConfiguredHandlers {
  @JobHandler('async.configured')
  run(_payload: unknown, job: JobContext) {
    asyncCalls.push(job.id);
  }
}

const ownedCalls: string[] = [];

@Injectable()
class AppDataSourceHandlers {
  @JobHandler('app-ds.work')
  run(_payload: unknown, job: JobContext) {
    ownedCalls.push(job.id);
  }
}

const schemaCalls: string[] = [];

@Injectable()
class CustomSchemaHandlers {
  @JobHandler('custom-schema.work')
  run(_payload: unknown, job: JobContext) {
    schemaCalls.push(job.id);
  }
}

// ---------------------------------------------------------------------------------------------

describe('JobQueueModule boot', () => {
  let adminUrl: string;
  let db: TestDatabase;

  beforeAll(async () => {
    adminUrl = inject('adminUrl');
    db = await createTestDatabase(adminUrl);
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('handler discovery', () => {
    it('finds every @JobHandler method on a provider of an imported module and calls it on that instance', async () => {
      const queue = await startQueueApp(db.url, { workerId: 'discovery-worker' }, [Greeting, FeatureHandlers]);
      try {
        const first = await queue.producer.enqueue('discovery.first', { name: 'ada' });
        const second = await queue.producer.enqueue('discovery.second', { name: 'grace' });
        await completed(queue.admin, first.id);
        const secondRecord = await completed(queue.admin, second.id);

        expect(featureCalls.map((c) => [c.type, c.text])).toEqual([
          ['discovery.first', 'hello ada'],
          ['discovery.second', 'hello again grace'],
        ]);
        expect(featureCalls[0].job).toMatchObject({ id: first.id, type: 'discovery.first', attempt: 1 });
        // The handler's own options were discovered with it.
        expect(featureCalls[1].job.maxAttempts).toBe(2);
        expect(secondRecord.maxAttempts).toBe(2);
        expect((await queue.admin.getJob(first.id))?.result).toEqual({ ok: 1 });
      } finally {
        await queue.close();
      }
    });

    it('refuses two handlers for one type, naming the type and both locations', async () => {
      const error = await rejectionOf(
        bootTestingModule({
          imports: [
            JobQueueModule.forRoot({
              dataSource: { type: 'postgres', url: db.url, applicationName: 'ajq-dup-boot' },
              pollIntervalMs: 200,
            }),
          ],
          providers: [FirstDuplicate, SecondDuplicate],
        }),
      );
      expect(error).toBeInstanceOf(DuplicateJobHandlerError);
      const duplicate = error as DuplicateJobHandlerError;
      expect(duplicate.type).toBe('dup.type');
      expect([duplicate.first, duplicate.second].sort()).toEqual(['FirstDuplicate.run', 'SecondDuplicate.handle']);
      expect(error.message).toContain('dup.type');
      expect(error.message).toContain('FirstDuplicate.run');
      expect(error.message).toContain('SecondDuplicate.handle');
      // The failed app was closed, and with it the DataSource the module had opened.
      await waitFor(async () => (await connectionsNamed(db, 'ajq-dup-boot')) === 0, { message: 'module connections closed' });
    });

    it('closes the DataSource it opened when the boot fails, even if the app is never closed', async () => {
      // As with NestFactory.create(…, { abortOnError: false }): the boot rejects, and there is no
      // app instance to close.
      const moduleRef = await Test.createTestingModule({
        imports: [
          JobQueueModule.forRoot({
            dataSource: { type: 'postgres', url: db.url, applicationName: 'ajq-dup-unclosed' },
            pollIntervalMs: 200,
          }),
        ],
        providers: [FirstDuplicate, SecondDuplicate],
      })
        .setLogger(new NoopLogger())
        .compile();
      await expect(moduleRef.init()).rejects.toBeInstanceOf(DuplicateJobHandlerError);
      await waitFor(async () => (await connectionsNamed(db, 'ajq-dup-unclosed')) === 0, {
        timeoutMs: 3_000,
        message: 'the module connections closed without app.close()',
      });
    });

    it('refuses a handler on a request-scoped provider', async () => {
      const error = await rejectionOf(
        bootTestingModule({
          imports: [JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: db.url }, pollIntervalMs: 200 })],
          providers: [RequestScopedHandlers],
        }),
      );
      expect(error).toBeInstanceOf(JobQueueConfigError);
      expect(error.message).toContain('scoped.request');
      expect(error.message).toContain('RequestScopedHandlers.run');
      expect(error.message).toMatch(/request/i);
    });

    it('refuses a handler on a provider that is request-scoped through its dependencies', async () => {
      const error = await rejectionOf(
        bootTestingModule({
          imports: [JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: db.url }, pollIntervalMs: 200 })],
          providers: [RequestDependentHandlers],
        }),
      );
      expect(error).toBeInstanceOf(JobQueueConfigError);
      expect(error.message).toContain('scoped.dependent');
      expect(error.message).toContain('RequestDependentHandlers.run');
    });
  });

  describe('configuration', () => {
    it('forRootAsync({ imports, inject, useFactory }) builds the options from an imported provider', async () => {
      const QUEUE_SETTINGS = Symbol('QUEUE_SETTINGS');
      class QueueSettingsModule {}
      const settingsModule = {
        module: QueueSettingsModule,
        providers: [{ provide: QUEUE_SETTINGS, useValue: { url: db.url, workerId: 'async-configured-worker' } }],
        exports: [QUEUE_SETTINGS],
      };
      let factoryCalls = 0;
      const app = await bootTestingModule({
        imports: [
          JobQueueModule.forRootAsync({
            imports: [settingsModule],
            inject: [QUEUE_SETTINGS],
            useFactory: async (settings: { url: string; workerId: string }): Promise<JobQueueOptions> => {
              factoryCalls++;
              return { dataSource: { type: 'postgres', url: settings.url }, workerId: settings.workerId, pollIntervalMs: 200 };
            },
          }),
        ],
        providers: [AsyncConfiguredHandlers],
      });
      try {
        expect(factoryCalls).toBe(1);
        const { id } = await app.get(JobProducer).enqueue('async.configured', {});
        const record = await completed(app.get(JobQueueAdmin), id);
        expect(record.workerId).toBe('async-configured-worker');
        expect(asyncCalls).toEqual([id]);
      } finally {
        await app.close();
      }
    });

    it('warns of option keys it does not know (a typo from a config factory), and boots', async () => {
      const warn = vi.spyOn(Logger.prototype, 'warn');
      try {
        const queue = await startQueueApp(db.url, { runWorker: false, concurrenc: 5 } as unknown as Partial<JobQueueOptions>);
        await queue.close();
        const messages = warn.mock.calls.map(([message]) => String(message));
        expect(messages.some((m) => m.includes('Unknown JobQueueModule option(s) ignored: concurrenc.'))).toBe(true);
      } finally {
        warn.mockRestore();
      }
    });

    it('runs on an app-owned DataSource from TypeOrmModule that lists JOB_QUEUE_ENTITIES', async () => {
      const app = await bootTestingModule({
        imports: [
          TypeOrmModule.forRoot({
            type: 'postgres',
            url: db.url,
            entities: [...JOB_QUEUE_ENTITIES],
            synchronize: false,
            retryAttempts: 0,
          }),
          JobQueueModule.forRootAsync({
            inject: [DataSource],
            useFactory: (dataSource: DataSource): JobQueueOptions => ({ dataSource, pollIntervalMs: 200, workerId: 'app-ds-worker' }),
          }),
        ],
        providers: [AppDataSourceHandlers],
      });
      const dataSource = app.get(DataSource);
      try {
        const producer = app.get(JobProducer);
        const { id } = await producer.enqueue('app-ds.work', { n: 1 });
        await completed(app.get(JobQueueAdmin), id);
        expect(ownedCalls).toEqual([id]);
        // The app reads the job table through its own TypeORM entity metadata.
        const entity = await dataSource.getRepository(JobEntity).findOneByOrFail({ id });
        expect(entity).toMatchObject({ id, type: 'app-ds.work', status: 'completed', attempts: 1, workerId: 'app-ds-worker' });
        // And enqueues inside its own transactions on that DataSource.
        const inTx = await dataSource.transaction((manager) => producer.enqueue('app-ds.work', { n: 2 }, { manager }));
        await completed(app.get(JobQueueAdmin), inTx.id);
        expect(dataSource.isInitialized).toBe(true);
      } finally {
        await app.close();
      }
      // TypeOrmModule, which owns it, closed it once; the queue added no error on the way.
      expect(dataSource.isInitialized).toBe(false);
    });

    it('never destroys a DataSource the app owns', async () => {
      const dataSource = await new DataSource({
        type: 'postgres',
        url: db.url,
        entities: [...JOB_QUEUE_ENTITIES],
        applicationName: 'ajq-app-owned',
      }).initialize();
      try {
        const queue = await startQueueApp(db.url, { dataSource, runWorker: true });
        const { id } = await queue.producer.enqueue('app-owned.unhandled', { kept: true });
        await queue.close();
        expect(dataSource.isInitialized).toBe(true);
        const [row] = await dataSource.query(`SELECT status FROM job_queue.jobs WHERE id = $1`, [id]);
        expect(row).toEqual({ status: 'pending' });
      } finally {
        await dataSource.destroy();
      }
    });

    it('refuses an app-owned DataSource without the job entities and says to add JOB_QUEUE_ENTITIES', async () => {
      let appDataSource: DataSource | undefined;
      try {
        const error = await rejectionOf(
          bootTestingModule({
            imports: [
              TypeOrmModule.forRootAsync({
                useFactory: () => ({ type: 'postgres', url: db.url, entities: [], synchronize: false, retryAttempts: 0 }),
                dataSourceFactory: async (options) => {
                  appDataSource = await new DataSource(options as DataSourceOptions).initialize();
                  return appDataSource;
                },
              }),
              JobQueueModule.forRootAsync({
                inject: [DataSource],
                useFactory: (dataSource: DataSource): JobQueueOptions => ({ dataSource }),
              }),
            ],
          }),
        );
        expect(error).toBeInstanceOf(JobQueueConfigError);
        expect(error.message).toContain('JOB_QUEUE_ENTITIES');
        // The module did not close a DataSource it does not own, even on failure.
        expect(appDataSource?.isInitialized).toBe(true);
      } finally {
        if (appDataSource?.isInitialized) await appDataSource.destroy();
      }
    });

    it.each([
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: 1.5 }, 'concurrency'],
      [{ schema: 'Bad-Name' }, 'schema'],
      [{ schema: '' }, 'schema'],
      [{ pollIntervalMs: -5 }, 'pollIntervalMs'],
      [{ leaseMs: 0 }, 'leaseMs'],
      [{ retry: { maxAttempts: 0 } }, 'retry.maxAttempts'],
      [{ runWorker: 'yes' }, 'runWorker'],
      [{ maxQueueDepth: 0 }, 'maxQueueDepth'],
    ] as Array<[Record<string, unknown>, string]>)('refuses invalid options %j, naming %s', async (bad, name) => {
      const error = await rejectionOf(
        startQueueApp(db.url, {
          ...(bad as Partial<JobQueueOptions>),
          dataSource: { type: 'postgres', url: db.url, applicationName: 'ajq-invalid-options' },
        }),
      );
      expect(error).toBeInstanceOf(JobQueueConfigError);
      expect(error.message).toContain(name);
      // Options are checked before any connection is opened.
      expect(await connectionsNamed(db, 'ajq-invalid-options')).toBe(0);
    });
  });

  describe('schema creation', () => {
    it('autoMigrate: false on an empty database is a boot error; it boots once JOB_QUEUE_MIGRATIONS ran', async () => {
      const empty = await createTestDatabase(adminUrl);
      try {
        const error = await rejectionOf(
          startQueueApp(empty.url, {
            autoMigrate: false,
            dataSource: { type: 'postgres', url: empty.url, applicationName: 'ajq-no-migrate' },
          }),
        );
        expect(error).toBeInstanceOf(JobQueueConfigError);
        expect(error.message).toContain('autoMigrate');
        expect(error.message).toContain('jobs');
        // Nothing was created, and the module's connection was closed.
        const [state] = await empty.query(`SELECT to_regclass('job_queue.jobs') IS NULL AS no_table,
          NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'job_queue') AS no_schema`);
        expect(state).toEqual({ no_table: true, no_schema: true });
        await waitFor(async () => (await connectionsNamed(empty, 'ajq-no-migrate')) === 0, { message: 'connections closed' });

        // The app runs the exported migrations itself; then autoMigrate: false boots and works.
        const migrator = await new DataSource({
          type: 'postgres',
          url: empty.url,
          entities: [...JOB_QUEUE_ENTITIES],
          migrations: JOB_QUEUE_MIGRATIONS,
        }).initialize();
        try {
          await migrator.runMigrations();
        } finally {
          await migrator.destroy();
        }
        const queue = await startQueueApp(empty.url, { autoMigrate: false, runWorker: false });
        try {
          const { id } = await queue.producer.enqueue('after.migrations', {});
          expect((await queue.admin.getJob(id))?.status).toBe('pending');
        } finally {
          await queue.close();
        }
      } finally {
        await empty.drop();
      }
    });

    it('ten modules booting at once on a fresh database all succeed and record the migration once', async () => {
      const fresh = await createTestDatabase(adminUrl);
      const apps: QueueApp[] = [];
      try {
        const boots = await Promise.allSettled(
          Array.from({ length: 10 }, (_, i) =>
            startQueueApp(fresh.url, {
              runWorker: i % 2 === 0,
              workerId: `boot-${i}`,
              dataSource: { type: 'postgres', url: fresh.url, extra: { max: 3 } },
            }),
          ),
        );
        for (const boot of boots) if (boot.status === 'fulfilled') apps.push(boot.value);
        const failures = boots.flatMap((b) => (b.status === 'rejected' ? [String(b.reason?.stack ?? b.reason)] : []));
        expect(failures).toEqual([]);
        expect(apps).toHaveLength(10);

        const migrations = await fresh.query(`SELECT name FROM job_queue.schema_migrations ORDER BY name`);
        expect(migrations.map((m) => m.name)).toEqual(migrationNames());
        // Every instance works on the one table.
        const ids = await Promise.all(apps.map((a, i) => a.producer.enqueue('boot.check', { i })));
        const [count] = await fresh.query(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE type = 'boot.check'`);
        expect(count.n).toBe(10);
        expect(new Set(ids.map((r) => r.id)).size).toBe(10);
      } finally {
        await Promise.all(apps.map((a) => a.close()));
        await fresh.drop();
      }
    });

    it('a custom schema option puts the tables in that schema, and jobs run there', async () => {
      const fresh = await createTestDatabase(adminUrl);
      try {
        const queue = await startQueueApp(fresh.url, { schema: 'tenant_jobs' }, [CustomSchemaHandlers]);
        try {
          const { id } = await queue.producer.enqueue('custom-schema.work', { x: 1 });
          await completed(queue.admin, id);
          expect(schemaCalls).toEqual([id]);
          const [tables] = await fresh.query(`SELECT to_regclass('tenant_jobs.jobs') IS NOT NULL AS jobs,
            to_regclass('job_queue.jobs') IS NULL AS no_default_table,
            NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'job_queue') AS no_default_schema`);
          expect(tables).toEqual({ jobs: true, no_default_table: true, no_default_schema: true });
          const rows = await fresh.query(`SELECT id::text AS id, status FROM tenant_jobs.jobs`);
          expect(rows).toEqual([{ id, status: 'completed' }]);
          const migrations = await fresh.query(`SELECT name FROM tenant_jobs.schema_migrations ORDER BY name`);
          expect(migrations.map((m) => m.name)).toEqual(migrationNames());
        } finally {
          await queue.close();
        }
      } finally {
        await fresh.drop();
      }
    });
  });
});
