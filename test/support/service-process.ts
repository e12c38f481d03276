import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * What the servers a test starts itself (PgBouncer, PostgreSQL nodes) share: a free loopback
 * port, a temp directory, the `postgres` OS user they must run as when we are root (both refuse
 * root), and a last-resort stop if the test process ends without its afterAll.
 */

/** A port free on 127.0.0.1 right now. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** The ids to run a server as: the `postgres` user's when we are root, none (ourselves) otherwise. */
export function serviceUserIds(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  try {
    return {
      uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
      gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
    };
  } catch {
    throw new Error('running as root, and there is no `postgres` OS user to run PostgreSQL and PgBouncer as');
  }
}

/** A temp directory the service user owns (so the server can write its files and sockets there). */
export function serviceTempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const { uid, gid } = serviceUserIds();
  if (uid !== undefined && gid !== undefined) chownSync(dir, uid, gid);
  return dir;
}

const leftovers = new Map<string, () => void>();
let exitHookInstalled = false;

/**
 * Runs `stop` (synchronous: signals and rmSync only) if this process exits before `release()`
 * is called: a test that crashed or timed out past its hooks must not leave servers behind.
 */
export function stopOnExit(name: string, stop: () => void): { release(): void } {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const last of leftovers.values()) {
        try {
          last();
        } catch {
          // Best effort: the process is ending.
        }
      }
    });
  }
  const key = `${name}:${Math.random()}`;
  leftovers.set(key, stop);
  return { release: () => void leftovers.delete(key) };
}

/** Sends `signal` to `pid` unless it is gone already. */
export function signalQuietly(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** Removes a temp directory, whatever is left in it. */
export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Whether a spec whose servers are missing is skipped: on a developer's machine yes (the suite
 * needs no installed server), in CI never (.ci/run installs them; a skip there would hide a gap).
 */
export function skipWithout(what: string, found: unknown): boolean {
  if (found) return false;
  if (process.env.CI) throw new Error(`${what} is not installed; .ci/run installs it`);
  console.warn(`skipped: ${what} is not installed (see CONTRIBUTING.md, "Run the tests")`);
  return true;
}
