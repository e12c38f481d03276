import { spawn } from 'node:child_process';
import { chownSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freeLoopbackPort, removeDir, serviceTempDir, serviceUserIds, signalQuietly, stopOnExit } from './service-process.js';

/** A real PgBouncer in transaction mode on a loopback port, in front of one PostgreSQL server. */
export interface PgBouncerServer {
  readonly port: number;
  /** `url` (a database on the server behind it) as reached through PgBouncer. */
  urlFor(url: string): string;
  /** Transactions PgBouncer has passed on to `database` so far (SHOW STATS on its admin console). */
  transactions(database: string): Promise<number>;
  /** What PgBouncer logged so far (for a failing test's message). */
  log(): string;
  /** Stops PgBouncer (closing every client and server connection) and removes its directory. */
  stop(): Promise<void>;
}

/** The PgBouncer binary (AJQ_PGBOUNCER overrides), or null when it is not installed. */
export function pgbouncerBinary(): string | null {
  const candidates = [process.env.AJQ_PGBOUNCER, '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];
  return candidates.find((file): file is string => !!file && existsSync(file)) ?? null;
}

const STOP_TIMEOUT_MS = 5_000;

/**
 * Starts PgBouncer with `pool_mode = transaction` for every database of the server at
 * `serverUrl` (its user and password are what PgBouncer logs in with), clients admitted without
 * a password. Its ini and user list live in a temp directory; it runs as the `postgres` OS user
 * when we are root, which it insists on.
 */
export async function startPgBouncer(serverUrl: string): Promise<PgBouncerServer> {
  const binary = pgbouncerBinary();
  if (!binary) throw new Error('PgBouncer is not installed (Debian package pgbouncer)');
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const dir = serviceTempDir('ajq-pgbouncer-');
  const port = await freeLoopbackPort();
  const ini = path.join(dir, 'pgbouncer.ini');
  const users = path.join(dir, 'userlist.txt');
  const quote = (value: string) => `'${value.replace(/'/g, "''")}'`;
  writeFileSync(
    ini,
    [
      '[databases]',
      // Any database name a client asks for, on that server, as that user.
      `* = host=${server.hostname} port=${server.port || 5432} user=${quote(user)}${password ? ` password=${quote(password)}` : ''}`,
      '',
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'pool_mode = transaction',
      'auth_type = trust',
      `auth_file = ${users}`,
      `admin_users = ${user}`,
      'max_client_conn = 1000',
      // Server connections per database: enough for every process's transactional handlers at once.
      'default_pool_size = 60',
      'ignore_startup_parameters = extra_float_digits',
      'logfile =',
      'pidfile =',
      '',
    ].join('\n'),
  );
  writeFileSync(users, `"${user.replace(/"/g, '""')}" ""\n`);
  const ids = serviceUserIds();
  if (ids.uid !== undefined) for (const file of [ini, users]) chownSync(file, ids.uid, ids.gid!);

  const child = spawn(binary, [ini], { ...ids, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const exitGuard = stopOnExit('pgbouncer', () => {
    signalQuietly(child.pid, 'SIGKILL');
    removeDir(dir);
  });
  let output = '';
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (error) => {
      output += `${error.message}\n`;
      resolve();
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`PgBouncer did not start in time:\n${output}`)), 15_000);
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('process up')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`PgBouncer exited during start:\n${output}`));
      });
    });
  } catch (error) {
    signalQuietly(child.pid, 'SIGKILL');
    await exited;
    removeDir(dir);
    exitGuard.release();
    throw error;
  }

  let stopped: Promise<void> | null = null;
  return {
    port,
    urlFor(url: string) {
      const parsed = new URL(url);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(port);
      return parsed.toString();
    },
    async transactions(database: string) {
      const adminConsole = new pg.Client({ host: '127.0.0.1', port, user, database: 'pgbouncer' });
      await adminConsole.connect();
      try {
        const { rows } = await adminConsole.query(`SHOW STATS`);
        return Number(rows.find((row) => row.database === database)?.total_xact_count ?? 0);
      } finally {
        await adminConsole.end();
      }
    },
    log: () => output,
    stop() {
      stopped ??= (async () => {
        // SIGTERM: PgBouncer's immediate shutdown; SIGKILL if it lingers.
        signalQuietly(child.pid, 'SIGTERM');
        const timer = setTimeout(() => signalQuietly(child.pid, 'SIGKILL'), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
        removeDir(dir);
        exitGuard.release();
      })();
      return stopped;
    },
  };
}
