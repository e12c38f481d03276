import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NEST_COMMONJS_TSCONFIG, NEST11_JEST_SOURCES, NEST11_TSCONFIG, nest11JestManifest } from './fixtures/packaging-nest11-jest-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

/**
 * The published package, as a user gets it: `npm pack` at the repo root, then separate NestJS
 * apps (one ESM, one CommonJS) that install the tarball plus the peers and nothing else from
 * this repo, type-check against the shipped .d.ts and run a job on a real database; and a
 * NestJS 11 starter app whose Jest specs (CommonJS, no ESM in Jest on Node 20) import it.
 */

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PEERS = ['@nestjs/common', '@nestjs/core', '@nestjs/terminus', 'typeorm', 'pg', 'reflect-metadata', 'rxjs'];
const TOOLS = ['typescript', '@types/node'];

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

/** Runs a command to its end (SIGKILL after the deadline) and keeps its stdout and stderr together. */
function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      output += `\n[killed: no end after ${options.timeoutMs} ms]`;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

/** Fails with the command's whole output, so a broken install or build explains itself. */
async function runOk(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<string> {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    throw new Error(
      `\`${command} ${args.join(' ')}\` in ${options.cwd} ended with code ${result.code} signal ${result.signal}:\n${result.output}`,
    );
  }
  return result.output;
}

/**
 * The environment for child commands, without what `npx vitest` adds: npm_config_local_prefix
 * would make `npm install` in the app's directory install into this repo instead.
 */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const keep = new Set(['npm_config_cache', 'npm_config_userconfig', 'npm_config_globalconfig', 'npm_config_cafile', 'npm_config_registry']);
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(key) && !keep.has(key.toLowerCase())) continue;
    if (key === 'INIT_CWD' || key === 'NODE_OPTIONS' || key === 'DATABASE_URL') continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

/** The exact version this repo is tested with, from package-lock.json. */
function lockedVersions(lock: { packages: Record<string, { version?: string }> }, names: string[]): Record<string, string> {
  return Object.fromEntries(
    names.map((name) => {
      const version = lock.packages[`node_modules/${name}`]?.version;
      if (!version) throw new Error(`${name} is not in package-lock.json`);
      return [name, version];
    }),
  );
}

/**
 * One source for both apps: compiled with module nodenext in a "type": "module" package it is
 * ESM; in a "type": "commonjs" package the same source compiles to require() calls.
 */
const APP_SOURCE = `import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { filter, firstValueFrom } from 'rxjs';
import {
  InvalidJobError,
  JOB_QUEUE_ENTITIES,
  JOB_QUEUE_MIGRATIONS,
  JobHandler,
  JobProducer,
  JobQueueAdmin,
  JobQueueEvents,
  JobQueueHealthIndicator,
  JobQueueModule,
  PermanentJobError,
  QueueSaturatedError,
  type JobContext,
  type JobRecord,
  type JobStatus,
} from 'auto-job-queue';

interface Hello {
  name: string;
}

@Injectable()
class Greeter {
  @JobHandler('hello.world', { maxAttempts: 2, timeoutMs: 10_000 })
  async greet(payload: Hello, job: JobContext): Promise<{ greeting: string; attempt: number }> {
    const greeting = \`hello, \${payload.name}\`;
    writeFileSync(process.env.HELLO_OUTPUT!, JSON.stringify({ jobId: job.id, type: job.type, greeting }));
    return { greeting, attempt: job.attempt };
  }
}

@Module({
  imports: [JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: process.env.DATABASE_URL! }, pollIntervalMs: 200 })],
  providers: [Greeter],
})
class AppModule {}

/** Never called: it only has to compile, which proves the published types are not \`any\`. */
export function publishedTypesAreStrict(producer: JobProducer, record: JobRecord): void {
  // @ts-expect-error a job type is a string
  void producer.enqueue(42, {});
  // @ts-expect-error JobStatus is a union of the documented statuses
  const status: JobStatus = 'exploded';
  // @ts-expect-error JobRecord has no such column
  void record.noSuchColumn;
  void status;
}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  try {
    const producer = app.get(JobProducer);
    const admin = app.get(JobQueueAdmin);
    const events = app.get(JobQueueEvents);
    const health = app.get(JobQueueHealthIndicator);

    const { id, deduplicated } = await producer.enqueue('hello.world', { name: 'packaging' } satisfies Hello);
    const completedEvent = firstValueFrom(events.events$.pipe(filter((event) => event.kind === 'completed' && event.jobId === id)));
    const deadline = Date.now() + 30_000;
    let record: JobRecord | null = await admin.getJob(id);
    while (record?.status !== 'completed') {
      if (Date.now() > deadline) throw new Error(\`job \${id} did not complete in time: \${JSON.stringify(record)}\`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      record = await admin.getJob(id);
    }
    const status: JobStatus = record.status;
    const event = await Promise.race([
      completedEvent,
      new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000).unref()),
    ]);

    let invalid: unknown;
    try {
      await producer.enqueue('', { name: 'nobody' });
    } catch (error) {
      invalid = error;
    }
    const permanent = new PermanentJobError('no retry');
    const ready = await health.isReady();
    // Readiness's type names every status it can take, degraded included (Terminus 12).
    const readyStatus: 'up' | 'down' | 'degraded' = ready['job-queue'].status;
    if (ready['job-queue'].status === 'degraded') console.log('degraded: dead letters reached the alert threshold');

    // The package loaded the other way as well (require() from ESM, import() from CommonJS) hands
    // out the very same objects: one copy of each class, so DI finds a provider by either.
    const required: Record<string, unknown> = createRequire(join(process.cwd(), 'package.json'))('auto-job-queue');
    const imported: Record<string, unknown> = await import('auto-job-queue');
    const names = Object.keys(required).sort();
    const sameCopy = {
      names: names.length > 10 && JSON.stringify(Object.keys(imported).filter((name) => name !== 'default').sort()) === JSON.stringify(names),
      objects: names.every((name) => imported[name] === required[name]) && imported.default === required,
      ours: required.JobProducer === JobProducer && required.JobQueueModule === JobQueueModule,
      injection: app.get(required.JobProducer as typeof JobProducer) === producer,
    };

    const exported = {
      QueueSaturatedError: typeof QueueSaturatedError === 'function' && QueueSaturatedError.prototype instanceof Error,
      PermanentJobError: permanent instanceof PermanentJobError && permanent instanceof Error,
      InvalidJobError: invalid instanceof InvalidJobError,
      JOB_QUEUE_ENTITIES: Array.isArray(JOB_QUEUE_ENTITIES) && JOB_QUEUE_ENTITIES.length > 0,
      JOB_QUEUE_MIGRATIONS: Array.isArray(JOB_QUEUE_MIGRATIONS) && JOB_QUEUE_MIGRATIONS.length > 0,
      JobQueueHealthIndicator: health instanceof JobQueueHealthIndicator,
      JobQueueEvents: events instanceof JobQueueEvents,
    };
    console.log('RESULT ' + JSON.stringify({
      id,
      deduplicated,
      status,
      result: record.result,
      attempts: record.attempts,
      completedEvent: event?.kind ?? null,
      ready: readyStatus,
      exported,
      sameCopy,
    }));
  } finally {
    await app.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
`;

const TSCONFIG_BASE = {
  target: 'ES2023',
  outDir: 'dist',
  rootDir: 'src',
  strict: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  // As `nest new` sets it; a separate test checks the shipped .d.ts files without it.
  skipLibCheck: true,
  types: ['node'],
};

interface ConsumerApp {
  kind: 'esm' | 'commonjs';
  dir: string;
  packageType: 'module' | 'commonjs';
  tsconfig: Record<string, unknown>;
  /** Further `tsc --noEmit` runs with other common settings for this kind of app. */
  alsoCheckWith: Array<Record<string, string>>;
}

describe('the packed tarball, installed by separate NestJS apps', () => {
  let tmp: string;
  let tarball: string;
  let entries: string[];
  let distExisted: boolean;
  const databases: TestDatabase[] = [];
  let apps: ConsumerApp[];
  let installs: Map<ConsumerApp['kind'] | 'nest11-jest', Promise<string>>;
  let nest11Dir: string;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'ajq-packaging-'));
    distExisted = existsSync(path.join(REPO, 'dist'));

    // `npm pack` runs prepack, which builds dist/ with tsconfig.build.json.
    await runOk('npm', ['pack', '--pack-destination', tmp], { cwd: REPO, timeoutMs: 75_000 });
    const tarballs = (await readdir(tmp)).filter((name) => name.endsWith('.tgz'));
    expect(tarballs).toHaveLength(1);
    tarball = path.join(tmp, tarballs[0]);
    entries = (await runOk('tar', ['tzf', tarball], { cwd: tmp, timeoutMs: 30_000 })).split('\n').filter(Boolean);

    const lock = JSON.parse(await readFile(path.join(REPO, 'package-lock.json'), 'utf8'));
    const peers = lockedVersions(lock, PEERS);
    const tools = lockedVersions(lock, TOOLS);

    apps = [
      {
        kind: 'esm',
        dir: path.join(tmp, 'esm-app'),
        packageType: 'module',
        // What `nest new` generates for NestJS 12.
        tsconfig: { ...TSCONFIG_BASE, module: 'nodenext', moduleResolution: 'nodenext' },
        alsoCheckWith: [],
      },
      {
        kind: 'commonjs',
        dir: path.join(tmp, 'cjs-app'),
        packageType: 'commonjs',
        // NestJS 11's starter: nodenext settings in a package without "type": "module" → CommonJS output.
        tsconfig: { ...TSCONFIG_BASE, module: 'nodenext', moduleResolution: 'nodenext' },
        // Older starters: module commonjs (node10 resolution, which reads "types" instead of "exports").
        alsoCheckWith: [{ module: 'commonjs', moduleResolution: 'node10' }],
      },
    ];
    for (const app of apps) {
      await mkdir(path.join(app.dir, 'src'), { recursive: true });
      const manifest = {
        name: `ajq-packaging-${app.kind}-app`,
        version: '0.0.0',
        private: true,
        type: app.packageType,
        dependencies: { 'auto-job-queue': `file:${tarball}`, ...peers },
        devDependencies: tools,
      };
      await writeFile(path.join(app.dir, 'package.json'), JSON.stringify(manifest, null, 2));
      await writeFile(path.join(app.dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: app.tsconfig, include: ['src'] }, null, 2));
      await writeFile(path.join(app.dir, 'src', 'main.ts'), APP_SOURCE);
    }
    // The NestJS 11 starter, as `nest new` writes it (its own ^11 ranges, not this repo's versions).
    nest11Dir = path.join(tmp, 'nest11-jest-app');
    await mkdir(path.join(nest11Dir, 'src'), { recursive: true });
    await writeFile(path.join(nest11Dir, 'package.json'), JSON.stringify(nest11JestManifest(tarball), null, 2));
    await writeFile(path.join(nest11Dir, 'tsconfig.json'), JSON.stringify(NEST11_TSCONFIG, null, 2));
    for (const [name, source] of Object.entries(NEST11_JEST_SOURCES)) await writeFile(path.join(nest11Dir, 'src', name), source);
    // docs/testing.md's Jest example, as it is: the testing kit through `require`.
    for (const [from, to] of [['signup.service.ts', 'signup.service.ts'], ['welcome.mailer.ts', 'welcome.mailer.ts'], ['signup.jest.spec.ts', 'signup.service.spec.ts']]) {
      await writeFile(path.join(nest11Dir, 'src', to), await readFile(path.join(REPO, 'examples/testing', from), 'utf8'));
    }

    // All installs at once; each test awaits its own (rejections are observed there).
    const installIn = (dir: string): Promise<string> => {
      const install = runOk('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: dir, timeoutMs: 150_000 });
      install.catch(() => undefined);
      return install;
    };
    installs = new Map([...apps.map((app) => [app.kind, installIn(app.dir)] as const), ['nest11-jest', installIn(nest11Dir)] as const]);
  }, 90_000);

  afterAll(async () => {
    await Promise.allSettled(installs?.values() ?? []);
    for (const db of databases) await db.drop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
    // Leave the repo as found: prepack's dist/ goes again unless it was there before.
    if (distExisted === false) await rm(path.join(REPO, 'dist'), { recursive: true, force: true });
  }, 60_000);

  it('is auto-job-queue with its types and nothing but the build', async () => {
    const manifest = JSON.parse((await runOk('tar', ['xzf', tarball, '-O', 'package/package.json'], { cwd: tmp, timeoutMs: 30_000 })));
    expect(manifest.name).toBe('auto-job-queue');
    expect(path.basename(tarball)).toBe(`auto-job-queue-${manifest.version}.tgz`);
    // One implementation, CommonJS, for both conditions; `import` gets a thin ESM entry over it.
    expect(manifest.type).toBe('module');
    expect(manifest.exports['.']).toEqual({
      types: './dist/cjs/src/index.d.ts',
      import: './dist/index.mjs',
      require: './dist/cjs/src/index.js',
      default: './dist/cjs/src/index.js',
    });
    expect(manifest.exports['./testing']).toEqual({
      types: './dist/cjs/src/testing.d.ts',
      import: './dist/testing.mjs',
      require: './dist/cjs/src/testing.js',
      default: './dist/cjs/src/testing.js',
    });
    expect(manifest.bin).toEqual({ 'auto-job-queue': './dist/cjs/src/cli.js' });
    expect(entries).toContain('package/dist/cjs/src/cli.js');
    expect(manifest.main).toBe(manifest.exports['.'].require);
    expect(manifest.types).toBe(manifest.exports['.'].types);
    // Whatever package.json points at is in the tarball.
    for (const target of [manifest.main, manifest.types, ...Object.values<string>(manifest.exports['.']), ...Object.values<string>(manifest.exports['./testing'])]) {
      expect(entries).toContain(path.posix.join('package', target));
    }
    // dist/cjs says it is CommonJS (the package itself is "type": "module"), so Node, Jest and
    // TypeScript all read its .js and .d.ts files as CommonJS.
    const cjsManifest = JSON.parse(await runOk('tar', ['xzf', tarball, '-O', 'package/dist/cjs/package.json'], { cwd: tmp, timeoutMs: 30_000 }));
    expect(cjsManifest).toEqual({ type: 'commonjs' });
    const entry = await runOk('tar', ['xzf', tarball, '-O', 'package/dist/index.mjs'], { cwd: tmp, timeoutMs: 30_000 });
    expect(entry).toMatch(/^import api from '\.\/cjs\/src\/index\.js';$/m);
    // Every module ships its declarations, and there is one set of them: no .d.mts or .d.cts.
    const js = entries.filter((entry) => /\.[cm]?js$/.test(entry));
    expect(js.length).toBeGreaterThan(10);
    const esmEntries = ['package/dist/index.mjs', 'package/dist/testing.mjs'];
    expect(js.filter((entry) => !esmEntries.includes(entry) && !entry.startsWith('package/dist/cjs/'))).toEqual([]);
    expect(js.filter((entry) => entry.endsWith('.js') && !entries.includes(entry.replace(/\.js$/, '.d.ts')))).toEqual([]);
    expect(entries.filter((entry) => /\.d\.[cm]ts$/.test(entry))).toEqual([]);

    expect(entries.filter((entry) => /^package\/(test|apps|bench|tools|build|node_modules|libs)\//.test(entry))).toEqual([]);
    expect(entries.filter((entry) => /\.spec\.|e2e-spec|fixtures?\//.test(entry))).toEqual([]);
    expect(entries.filter((entry) => !/^package\/(dist\/|package\.json$|README\.md$|LICENSE$|CHANGELOG\.md$)/.test(entry))).toEqual([]);
    expect(entries).toEqual(expect.arrayContaining(['package/LICENSE', 'package/CHANGELOG.md']));
  });

  it('ships declarations that compile on their own, also without skipLibCheck', async () => {
    // Strict apps check library declarations too: a published .d.ts that imports a module
    // whose types the user never installed (an @types package that is no dependency) fails here.
    // The .d.ts files sit under dist/cjs, so every app reads them as CommonJS: one app checks them.
    const app = apps.find((candidate) => candidate.kind === 'esm')!;
    await installs.get(app.kind);
    const tsc = path.join(app.dir, 'node_modules/typescript/bin/tsc');
    await runOk(process.execPath, [tsc, '--noEmit', '-p', '.', '--skipLibCheck', 'false'], { cwd: app.dir, timeoutMs: 60_000 });
  }, 120_000);

  it.each(['esm', 'commonjs'] as const)(
    'works in the %s NestJS app: it type-checks and runs a job to completed',
    async (kind) => {
      const app = apps.find((candidate) => candidate.kind === kind)!;
      await installs.get(kind);
      const installed = JSON.parse(await readFile(path.join(app.dir, 'node_modules/auto-job-queue/package.json'), 'utf8'));
      expect(installed.name).toBe('auto-job-queue');

      const tsc = path.join(app.dir, 'node_modules/typescript/bin/tsc');
      await runOk(process.execPath, [tsc, '--noEmit', '-p', '.'], { cwd: app.dir, timeoutMs: 60_000 });
      for (const overrides of app.alsoCheckWith) {
        const flags = Object.entries(overrides).flatMap(([name, value]) => [`--${name}`, value]);
        await runOk(process.execPath, [tsc, '--noEmit', '-p', '.', ...flags], { cwd: app.dir, timeoutMs: 60_000 });
      }
      await runOk(process.execPath, [tsc, '-p', '.'], { cwd: app.dir, timeoutMs: 60_000 });

      const compiled = await readFile(path.join(app.dir, 'dist/main.js'), 'utf8');
      if (kind === 'esm') expect(compiled).toMatch(/from ["']auto-job-queue["']/);
      else expect(compiled).toMatch(/require\(["']auto-job-queue["']\)/);

      const db = await createTestDatabase(inject('adminUrl'));
      databases.push(db);
      const outputFile = path.join(app.dir, 'hello.json');
      const result = await run(process.execPath, ['dist/main.js'], {
        cwd: app.dir,
        env: childEnv({ DATABASE_URL: db.url, HELLO_OUTPUT: outputFile }),
        timeoutMs: 45_000,
      });
      const failure = `the ${kind} app (exit code ${result.code}, signal ${result.signal}) printed:\n${result.output}`;
      expect(result.code, failure).toBe(0);

      const line = result.output.split('\n').find((text) => text.startsWith('RESULT '));
      expect(line, failure).toBeDefined();
      const report = JSON.parse(line!.slice('RESULT '.length));
      expect(report, failure).toEqual({
        id: expect.any(String),
        deduplicated: false,
        status: 'completed',
        result: { greeting: 'hello, packaging', attempt: 1 },
        attempts: 1,
        completedEvent: 'completed',
        ready: 'up',
        exported: {
          QueueSaturatedError: true,
          PermanentJobError: true,
          InvalidJobError: true,
          JOB_QUEUE_ENTITIES: true,
          JOB_QUEUE_MIGRATIONS: true,
          JobQueueHealthIndicator: true,
          JobQueueEvents: true,
        },
        sameCopy: { names: true, objects: true, ours: true, injection: true },
      });

      // The handler's side effect and the row, seen from outside the app.
      expect(JSON.parse(await readFile(outputFile, 'utf8'))).toEqual({ jobId: report.id, type: 'hello.world', greeting: 'hello, packaging' });
      const rows = await db.query(`SELECT type, status, attempts, result FROM job_queue.jobs ORDER BY id`);
      expect(rows).toEqual([{ type: 'hello.world', status: 'completed', attempts: 1, result: { greeting: 'hello, packaging', attempt: 1 } }]);

      // The package's bin, as `npx auto-job-queue` runs it from the app.
      const bin = (args: string[]) => run('npx', ['--no-install', 'auto-job-queue', ...args], { cwd: app.dir, env: childEnv({ DATABASE_URL: db.url }), timeoutMs: 45_000 });
      const version = await bin(['--version']);
      expect(version.output.trim(), version.output).toBe(installed.version);
      const stats = await bin(['stats', '--json']);
      expect(stats.code, stats.output).toBe(0);
      expect(JSON.parse(stats.output)).toMatchObject({ completed: 1, byType: { 'hello.world': { completed: 1 } } });
    },
    120_000,
  );

  it('passes the Jest specs of a NestJS 11 starter app (CommonJS, ts-jest) that uses it', async () => {
    await installs.get('nest11-jest');
    const installed = async (name: string): Promise<string> =>
      JSON.parse(await readFile(path.join(nest11Dir, 'node_modules', name, 'package.json'), 'utf8')).version;
    expect(await installed('@nestjs/core')).toMatch(/^11\./);
    expect(await installed('jest')).toMatch(/^30\./);

    const db = await createTestDatabase(inject('adminUrl'));
    databases.push(db);
    const tsc = path.join(nest11Dir, 'node_modules/typescript/bin/tsc');
    // Today's starter tsconfig (nodenext, isolatedModules: ts-jest only transpiles), then the
    // older one (module commonjs: ts-jest type-checks every spec through the shipped .d.ts).
    for (const [starter, tsconfig] of [['nodenext', NEST11_TSCONFIG], ['commonjs', NEST_COMMONJS_TSCONFIG]] as const) {
      await writeFile(path.join(nest11Dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
      // The app's own tsc run (nest build's), against NestJS 11's types rather than 12's.
      await runOk(process.execPath, [tsc, '--noEmit', '-p', '.'], { cwd: nest11Dir, timeoutMs: 60_000 });

      // Plain `npx jest` with the starter's config: Jest require()s the specs' imports, and on
      // Node 20 it cannot require an ES module, so this passes only if `require` gets CommonJS.
      const result = await run('npx', ['jest'], { cwd: nest11Dir, env: childEnv({ DATABASE_URL: db.url }), timeoutMs: 90_000 });
      const failure = `\`npx jest\` with the ${starter} tsconfig (exit code ${result.code}, signal ${result.signal}) printed:\n${result.output}`;
      expect(result.code, failure).toBe(0);
      expect(result.output, failure).toMatch(/Tests:\s+5 passed, 5 total/);
    }

    // Each run's end-to-end spec: one job through the controller, one enqueued and awaited.
    const rows = await db.query(`SELECT type, status, attempts, result FROM job_queue.jobs ORDER BY id`);
    const run1 = [
      { type: 'mail.send', status: 'completed', attempts: 1, result: { delivered: 'grace@example.com', attempt: 1 } },
      { type: 'mail.send', status: 'completed', attempts: 1, result: { delivered: 'hopper@example.com', attempt: 1 } },
    ];
    expect(rows).toEqual([...run1, ...run1]);
  }, 240_000);
});
