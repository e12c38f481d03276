import { readdirSync, readFileSync } from 'node:fs';
import type { BenchDatabase } from '../bench-database.js';
import { WORKER_APPLICATION_NAME } from '../workers/worker-protocol.js';

/** What a run cost the database server: its WAL, its CPU, and the worker processes' connections. */
export interface DatabaseCosts {
  /** WAL written by the whole server meanwhile (pg_current_wal_lsn before and after). */
  walBytes: number;
  /** CPU time of every PostgreSQL process of the server meanwhile; null when /proc cannot show it. */
  cpuMs: number | null;
  /** Connections the worker processes hold at the end (their pools do not shrink within seconds). */
  workerConnections: number;
}

/**
 * Starts measuring: call before the run, and `end()` after it. The server's WAL position and its
 * processes' CPU are server-wide, so other databases' work on the same server counts too: take
 * these figures on a server of the benchmark's own (no DATABASE_URL: the embedded one).
 *
 * CPU is read from /proc (the server must run on this machine): the postmaster's own time plus
 * what it collected from children that exited (cutime, cstime), plus every live child's time.
 */
export async function measureDatabaseCosts(db: BenchDatabase): Promise<{ end(): Promise<DatabaseCosts> }> {
  const postmaster = await postmasterPid(db);
  const [{ lsn: walFrom }] = await db.query<{ lsn: string }>(`SELECT pg_current_wal_lsn()::text AS lsn`);
  const cpuFrom = postmaster === null ? null : serverCpuTicks(postmaster);
  return {
    async end() {
      const cpuTo = postmaster === null ? null : serverCpuTicks(postmaster);
      const [{ wal }] = await db.query<{ wal: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS wal`, [walFrom]);
      const [{ n }] = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
        [WORKER_APPLICATION_NAME],
      );
      const cpuMs = cpuFrom === null || cpuTo === null ? null : ((cpuTo - cpuFrom) * 1000) / CLOCK_TICKS_PER_SECOND;
      return { walBytes: Number(wal), cpuMs, workerConnections: n };
    },
  };
}

/** Linux's USER_HZ, 100 on every common configuration. */
const CLOCK_TICKS_PER_SECOND = 100;

async function postmasterPid(db: BenchDatabase): Promise<number | null> {
  const [{ pid }] = await db.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`);
  const stat = readStat(pid);
  return stat ? stat.ppid : null;
}

interface ProcStat {
  ppid: number;
  utime: number;
  stime: number;
  cutime: number;
  cstime: number;
}

/** Fields of /proc/<pid>/stat after the command (which may hold spaces, inside parentheses). */
function readStat(pid: number): ProcStat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): ppid is field 4, utime … cstime fields 14 … 17.
    return { ppid: Number(fields[1]), utime: Number(fields[11]), stime: Number(fields[12]), cutime: Number(fields[13]), cstime: Number(fields[14]) };
  } catch {
    return null;
  }
}

function serverCpuTicks(postmaster: number): number | null {
  const own = readStat(postmaster);
  if (!own) return null;
  let ticks = own.utime + own.stime + own.cutime + own.cstime;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat && stat.ppid === postmaster) ticks += stat.utime + stat.stime;
  }
  return ticks;
}
