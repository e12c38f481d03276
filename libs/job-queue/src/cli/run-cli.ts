import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { JobQueueError } from '../errors/job-queue.error.js';
import { parseCliArguments, USAGE, type CliRequest } from './cli-arguments.js';
import { runAdminCommand, type CliOutput } from './cli-commands.js';
import { migrateSchema, openSession } from './cli-session.js';
import { CliUsageError } from './cli-usage.error.js';

export interface CliStreams {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/** Runs one command line; resolves to the exit code: 0 done, 1 an error, 2 bad usage. */
/** `script`: the CLI's own file; the nearest package.json above it gives the version. */
export async function runCli(argv: readonly string[], env: NodeJS.ProcessEnv, streams: CliStreams, script: string): Promise<number> {
  let request: CliRequest | 'help' | 'version';
  try {
    request = parseCliArguments(argv, env);
  } catch (error) {
    if (!(error instanceof CliUsageError)) throw error;
    streams.stderr(`auto-job-queue: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (request === 'help') {
    streams.stdout(`${USAGE}\n`);
    return 0;
  }
  if (request === 'version') {
    streams.stdout(`${versionNear(script)}\n`);
    return 0;
  }
  try {
    const output = await run(request);
    streams.stdout(`${request.json ? JSON.stringify(output.json, null, 2) : output.text}\n`);
    return 0;
  } catch (error) {
    if (error instanceof CliUsageError) {
      streams.stderr(`auto-job-queue: ${error.message}\n\n${USAGE}\n`);
      return 2;
    }
    streams.stderr(`auto-job-queue: ${oneLine(error, request.url!)}\n`);
    return 1;
  }
}

async function run(request: CliRequest): Promise<CliOutput> {
  if (request.command === 'migrate') {
    const { applied, statements } = await migrateSchema(request.url!, request.schema, request.flags.dryRun);
    if (request.flags.dryRun) {
      const text = applied.length === 0 ? `-- schema "${request.schema}" is up to date: nothing to run` : statements.join('\n');
      return { text, json: { pending: applied, statements } };
    }
    return { text: applied.length === 0 ? `Schema "${request.schema}" is up to date.` : `Applied: ${applied.join(', ')}.`, json: { applied } };
  }
  const session = await openSession(request.url!, request.schema);
  try {
    return await runAdminCommand(session.admin, request);
  } finally {
    await session.close();
  }
}

/** One line a person can act on: the queue's own errors as they are; a connection failure with the host. */
function oneLine(error: unknown, url: string): string {
  if (error instanceof JobQueueError) return error.message;
  const code = (error as { code?: string })?.code;
  const message = (error as Error)?.message || (error as AggregateError)?.errors?.map((e: Error) => e.message).join('; ') || String(error);
  const connection = ['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET', 'EAI_AGAIN'].includes(code ?? '') ||
    /connect|timeout|terminated|password authentication|does not exist/i.test(message);
  if (connection) return `Could not reach the database at ${where(url)}: ${message || code}`;
  return message.split('\n')[0];
}

function where(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    return 'the given URL';
  }
}

/** The version of the auto-job-queue package.json nearest above `file`. */
function versionNear(file: string): string {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string; version?: string };
      if (name === 'auto-job-queue' && version) return version;
    }
    if (path.dirname(dir) === dir) return 'unknown';
  }
}

