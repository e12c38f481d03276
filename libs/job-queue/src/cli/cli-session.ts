import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { JobQueueAdmin } from '../admin/job-queue.admin.js';
import { JobQueueModule } from '../job-queue.module.js';
import { SchemaMigrator } from '../persistence/schema-migrator.js';

/** The CLI's way in: the module's own admin API, in a process that claims and maintains nothing. */
export interface CliSession {
  admin: JobQueueAdmin;
  close(): Promise<void>;
}

/** Connections to the database fail in this long, not the driver's default minutes (a partition). */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Boots JobQueueModule as a producer-only app without LISTEN or migrations: the commands go
 * through JobQueueAdmin, with its checks, as an app's own admin endpoint would.
 */
export async function openSession(url: string, schema: string): Promise<CliSession> {
  const app: INestApplicationContext = await NestFactory.createApplicationContext(cliModule(url, schema), {
    logger: false,
    abortOnError: false,
  });
  return { admin: app.get(JobQueueAdmin), close: () => app.close() };
}

/** `migrate` and `migrate --dry-run`: a DataSource of its own, the module's migrator. */
export async function migrateSchema(url: string, schema: string, dryRun: boolean): Promise<{ applied: string[]; statements: string[] }> {
  const dataSource = new DataSource({ type: 'postgres', url, connectTimeoutMS: CONNECT_TIMEOUT_MS, poolSize: 1 });
  await dataSource.initialize();
  try {
    const migrator = new SchemaMigrator(dataSource, schema);
    return dryRun ? await migrator.dryRun() : { applied: await migrator.migrate(), statements: [] };
  } finally {
    await dataSource.destroy();
  }
}

function cliModule(url: string, schema: string) {
  class AutoJobQueueCli {}
  Module({
    imports: [
      JobQueueModule.forRoot({
        dataSource: { type: 'postgres', url, connectTimeoutMS: CONNECT_TIMEOUT_MS, poolSize: 2 },
        schema,
        runWorker: false,
        autoMigrate: false,
        listen: false,
      }),
    ],
  })(AutoJobQueueCli);
  return AutoJobQueueCli;
}
