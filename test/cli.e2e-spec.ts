import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The `auto-job-queue` command as a real child process (the compiled bin) against real
 * PostgreSQL: migrations (dry run first), every admin command in text and JSON, and the exit codes
 * for bad usage (2) and errors (1).
 */
const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../build/src/cli.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, DATABASE_URL: undefined, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the auto-job-queue command', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  const json = async <T>(args: string[]): Promise<T> => {
    const run = await cli([...args, '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    return JSON.parse(run.stdout) as T;
  };

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    env = { DATABASE_URL: db.url };
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('migrate --dry-run prints the SQL and creates nothing; migrate applies it; a second migrate has nothing to do', async () => {
    const dry = await cli(['migrate', '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('CREATE TABLE IF NOT EXISTS "job_queue".jobs');
    expect(dry.stdout).toContain('-- JobQueueRuntimeSchedules1765267200000');
    const [{ present }] = await db.query<{ present: boolean }>(`SELECT to_regnamespace('job_queue') IS NOT NULL AS present`);
    expect(present).toBe(false);

    const applied = await json<{ applied: string[] }>(['migrate']);
    expect(applied.applied).toContain('CreateJobQueueJobs1764403200000');
    expect(await json<{ applied: string[] }>(['migrate'])).toEqual({ applied: [] });
    expect((await cli(['migrate', '--dry-run'], env)).stdout).toContain('is up to date');
  });

  it('stats, jobs, job, retry, retry-dead, cancel, pause, resume, workers and purge, as tables and as JSON', async () => {
    await db.query(
      `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, dead_at, last_error, completed_at, created_at)
       VALUES ('cli.mail', '{"to":"ada"}', 'dead', 3, 3, now(), 'smtp down', NULL, now()),
              ('cli.mail', '{"to":"bo"}', 'dead', 3, 3, now(), 'smtp down', NULL, now()),
              ('cli.report', '{}', 'dead', 1, 1, now(), 'no data', NULL, now()),
              ('cli.report', '{}', 'pending', 0, 3, NULL, NULL, NULL, now()),
              ('cli.report', '{}', 'completed', 1, 3, NULL, NULL, now() - interval '10 days', now() - interval '10 days'),
              ('cli.report', '{}', 'completed', 1, 3, NULL, NULL, now(), now())`,
    );
    const stats = await cli(['stats'], env);
    expect(stats.code, stats.stderr).toBe(0);
    expect(stats.stdout.split('\n')[0]).toMatch(/^type\s+pending\s+processing\s+completed\s+failed\s+dead\s+cancelled\s+blocked$/);
    expect(stats.stdout).toMatch(/cli\.mail\s+0\s+0\s+0\s+0\s+2\s+0/);
    expect((await json<{ dead: number }>(['stats'])).dead).toBe(3);

    const page = await json<{ jobs: Array<{ id: string; type: string }>; nextCursor: string | null }>(['jobs', '--status', 'dead', '--limit', '2']);
    expect(page.jobs).toHaveLength(2);
    expect(page.nextCursor).not.toBeNull();
    const rest = await json<{ jobs: unknown[]; nextCursor: string | null }>(['jobs', '--status', 'dead', '--cursor', page.nextCursor!]);
    expect(rest).toMatchObject({ jobs: [expect.anything()], nextCursor: null });
    expect((await cli(['jobs', '--type', 'cli.mail'], env)).stdout).toMatch(/smtp down/);

    const [first] = page.jobs;
    const shown = await cli(['job', first.id], env);
    expect(shown.stdout).toMatch(/^id\s+\d+/m);
    expect(shown.stdout).toMatch(/^status\s+dead$/m);
    expect((await json<{ id: string }>(['job', first.id])).id).toBe(first.id);

    const retried = await cli(['retry', first.id], env);
    expect(retried.stdout).toMatch(/is pending again/);
    // Newest first: the first page's first job is the report; the two mails are still dead.
    expect(first.type).toBe('cli.report');
    expect(await json<{ retried: number }>(['retry-dead', '--type', 'cli.mail'])).toEqual({ retried: 2 });
    expect(await json<{ retried: number }>(['retry-dead'])).toEqual({ retried: 0 });

    const [{ id: pending }] = await db.query<{ id: string }>(`SELECT id::text FROM job_queue.jobs WHERE status = 'pending' LIMIT 1`);
    expect((await cli(['cancel', pending], env)).stdout).toMatch(/is cancelled/);

    expect(await json<{ paused: string[] }>(['pause', 'cli.mail'])).toEqual({ paused: ['cli.mail'] });
    expect(await json<{ paused: string[] }>(['resume', 'cli.mail'])).toEqual({ paused: [] });
    expect((await cli(['workers'], env)).stdout).toMatch(/No live worker/);
    expect(await json<unknown[]>(['workers'])).toEqual([]);

    expect(await json<{ deleted: number }>(['purge', '--status', 'completed', '--type', 'cli.report', '--older-than', '7d'])).toEqual({ deleted: 1 });
    expect((await cli(['purge', '--status', 'cancelled'], env)).stdout).toMatch(/Deleted 1 cancelled job/);
  });

  it('bad usage prints the usage and exits 2, changing nothing', async () => {
    for (const args of [['bogus'], ['stats', '--frobnicate'], ['job'], ['retry', '1', '2'], ['stats', '--status', 'dead'], ['purge', '--older-than', '7d'], ['purge', '--status', 'completed', '--older-than', 'soon']]) {
      const run = await cli(args, env);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toContain('Usage: auto-job-queue <command>');
    }
    expect((await cli(['purge', '--older-than', '7d'], env)).stderr).toContain('purge needs --status');
    const [{ completed }] = await db.query<{ completed: number }>(`SELECT count(*)::int AS completed FROM job_queue.jobs WHERE status = 'completed'`);
    expect(completed).toBe(1);
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('migrate');
    expect((await cli(['stats'])).stderr).toContain('No database: set DATABASE_URL or pass --url');
  });

  it('an error is one line on stderr and exit 1: an unknown job, a job in the wrong state, a bad filter, an unreachable database', async () => {
    const unknown = await cli(['job', '999999'], env);
    expect(unknown).toMatchObject({ code: 1, stderr: 'auto-job-queue: No job with id 999999.\n' });
    const [{ id }] = await db.query<{ id: string }>(`SELECT id::text FROM job_queue.jobs WHERE status = 'completed' LIMIT 1`);
    const wrongState = await cli(['retry', id], env);
    expect(wrongState.code).toBe(1);
    expect(wrongState.stderr).toMatch(/only dead jobs can be retried/);
    expect(wrongState.stderr.trim().split('\n')).toHaveLength(1);
    const badStatus = await cli(['jobs', '--status', 'lost'], env);
    expect(badStatus.code).toBe(1);
    expect(badStatus.stderr).toMatch(/status must be one of/);

    const away = await cli(['stats', '--url', 'postgres://postgres@127.0.0.1:1/nowhere']);
    expect(away.code).toBe(1);
    expect(away.stderr).toMatch(/^auto-job-queue: Could not reach the database at 127\.0\.0\.1:1\/nowhere: .*ECONNREFUSED/);
    expect(away.stderr.trim().split('\n')).toHaveLength(1);
  });
});
