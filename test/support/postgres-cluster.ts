import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { waitFor } from './wait-for.js';
import { freeLoopbackPort, removeDir, serviceTempDir, serviceUserIds, signalQuietly, stopOnExit } from './service-process.js';

/** One PostgreSQL server of the cluster, on its own loopback port and data directory. */
export interface PostgresNode {
  readonly name: string;
  readonly port: number;
  /** Its `postgres` database, user postgres, no password. */
  readonly url: string;
  /** A statement on a short-lived connection of its own. */
  query<Row = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<Row[]>;
  /** The server's log so far (for a failing test's message). */
  log(): string;
}

/**
 * A primary and a streaming standby that is synchronous (`synchronous_standby_names = '*'`), so
 * every commit the primary acknowledges is on the standby's disk too: what a managed database's
 * failover promises.
 */
export interface PostgresCluster {
  readonly primary: PostgresNode;
  readonly standby: PostgresNode;
  /** `pg_ctl stop -m immediate`: the server processes end at once, as in a crash. */
  crash(node: PostgresNode): Promise<void>;
  /** `pg_ctl promote`, waiting until the node takes writes. */
  promote(node: PostgresNode): Promise<void>;
  /** Stops every server still running and removes the data directories. */
  stop(): Promise<void>;
}

/** The newest Debian PostgreSQL server binaries (AJQ_PG_BIN overrides), or null when there are none. */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  const candidates = process.env.AJQ_PG_BIN
    ? [process.env.AJQ_PG_BIN]
    : existsSync(root)
      ? readdirSync(root)
          .filter((version) => /^\d+$/.test(version))
          .sort((a, b) => Number(b) - Number(a))
          .map((version) => path.join(root, version, 'bin'))
      : [];
  return candidates.find((dir) => ['initdb', 'pg_ctl', 'pg_basebackup', 'postgres'].every((bin) => existsSync(path.join(dir, bin)))) ?? null;
}

/**
 * initdb's a primary in a temp directory, clones it with `pg_basebackup -R` into a standby that
 * streams from a replication slot, starts both on free loopback ports (as the `postgres` OS user
 * when we are root: initdb refuses root), then makes the standby synchronous and waits until the
 * primary reports it so.
 */
export async function startPostgresCluster(): Promise<PostgresCluster> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('PostgreSQL server binaries not found (Debian package postgresql-15)');
  const base = serviceTempDir('ajq-cluster-');
  const ids = serviceUserIds();
  const running = new Map<string, string>();
  const exitGuard = stopOnExit('postgres-cluster', () => {
    // SIGQUIT is the postmaster's immediate shutdown.
    for (const dataDir of running.values()) signalQuietly(postmasterPid(dataDir), 'SIGQUIT');
    removeDir(base);
  });

  const run = (tool: string, args: string[]) =>
    new Promise<void>((resolve, reject) => {
      execFile(path.join(bin, tool), args, { ...ids, cwd: base, env: { ...process.env, LC_ALL: 'C' } }, (error, stdout, stderr) =>
        error ? reject(new Error(`${tool} ${args.join(' ')} failed: ${error.message}\n${stdout}${stderr}`)) : resolve(),
      );
    });
  const node = (name: string, port: number): PostgresNode & { dataDir: string } => {
    const dataDir = path.join(base, name);
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    return {
      name,
      port,
      url,
      dataDir,
      async query<Row>(sql: string, params?: unknown[]) {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          return (await client.query(sql, params)).rows as Row[];
        } finally {
          await client.end();
        }
      },
      log: () => {
        const file = path.join(base, `${name}.log`);
        return existsSync(file) ? readFileSync(file, 'utf8') : '';
      },
    };
  };
  const start = async (target: PostgresNode & { dataDir: string }) => {
    await run('pg_ctl', ['start', '-D', target.dataDir, '-l', path.join(base, `${target.name}.log`), '-w', '-t', '60']);
    running.set(target.name, target.dataDir);
  };
  const stopNode = async (target: PostgresNode & { dataDir: string }) => {
    if (!running.has(target.name)) return;
    await run('pg_ctl', ['stop', '-D', target.dataDir, '-m', 'immediate', '-w', '-t', '30']);
    running.delete(target.name);
  };

  const [primaryPort, standbyPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
  const primary = node('primary', primaryPort);
  const standby = node('standby', standbyPort);
  try {
    await run('initdb', ['-D', primary.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    appendFileSync(
      path.join(primary.dataDir, 'postgresql.conf'),
      [
        '',
        "listen_addresses = '127.0.0.1'",
        `port = ${primaryPort}`,
        `unix_socket_directories = '${base}'`,
        'max_connections = 200',
        'shared_buffers = 32MB',
        // The tests kill server processes, never the machine: the kernel keeps what they wrote.
        'fsync = off',
        'max_wal_senders = 4',
        'max_replication_slots = 4',
        'hot_standby = on',
        '',
      ].join('\n'),
    );
    await start(primary);
    // The clone carries the primary's settings; only its port differs (the later line wins).
    await run('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', standby.dataDir, '-R', '-X', 'stream', '-C', '-S', 'ajq_standby', '-c', 'fast', '--no-sync']);
    appendFileSync(path.join(standby.dataDir, 'postgresql.conf'), `\nport = ${standbyPort}\n`);
    await start(standby);
    await waitFor(async () => (await primary.query<{ state: string }>(`SELECT state FROM pg_stat_replication`))[0]?.state === 'streaming', {
      timeoutMs: 30_000,
      message: 'the standby to stream',
    });
    // Only now, and only on the primary: its commits wait for the standby from here on, and the
    // standby, once promoted, waits for no one.
    await primary.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
    await primary.query(`SELECT pg_reload_conf()`);
    await waitFor(async () => (await primary.query<{ sync_state: string }>(`SELECT sync_state FROM pg_stat_replication`))[0]?.sync_state === 'sync', {
      timeoutMs: 30_000,
      message: 'the standby to be synchronous',
    });
  } catch (error) {
    for (const target of [standby, primary]) await stopNode(target).catch(() => undefined);
    removeDir(base);
    exitGuard.release();
    throw error;
  }

  let stopped: Promise<void> | null = null;
  return {
    primary,
    standby,
    crash: (target) => stopNode(target as PostgresNode & { dataDir: string }),
    promote: (target) => run('pg_ctl', ['promote', '-D', (target as PostgresNode & { dataDir: string }).dataDir, '-w', '-t', '60']),
    stop() {
      stopped ??= (async () => {
        try {
          for (const target of [standby, primary]) await stopNode(target).catch(() => signalQuietly(postmasterPid(target.dataDir), 'SIGQUIT'));
        } finally {
          removeDir(base);
          exitGuard.release();
        }
      })();
      return stopped;
    },
  };
}

/** The postmaster's pid from its pid file, if it is running. */
function postmasterPid(dataDir: string): number | undefined {
  try {
    return Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined;
  } catch {
    return undefined;
  }
}
