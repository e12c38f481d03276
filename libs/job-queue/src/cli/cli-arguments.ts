import { parseArgs } from 'node:util';
import { CliUsageError } from './cli-usage.error.js';

/** What the command line asked for, checked: a command, its positionals and its flags. */
export interface CliRequest {
  command: string;
  positionals: string[];
  url: string | null;
  schema: string;
  json: boolean;
  flags: { status?: string; type?: string; limit?: string; cursor?: string; olderThan?: string; dryRun: boolean };
}

/** Each command: its positional arguments and the flags it takes, beyond the global ones. */
export const COMMANDS: Readonly<Record<string, { args: readonly string[]; flags: readonly string[]; about: string }>> = {
  stats: { args: [], flags: [], about: 'jobs per type and status' },
  jobs: { args: [], flags: ['status', 'type', 'limit', 'cursor'], about: 'jobs, newest first (--limit 1-500, default 50)' },
  job: { args: ['id'], flags: [], about: "one job: its columns, errors, progress and logs" },
  retry: { args: ['id'], flags: [], about: 'a dead job back to pending' },
  'retry-dead': { args: [], flags: ['type'], about: 'every dead job (of a type) back to pending' },
  cancel: { args: ['id'], flags: [], about: 'cancel a waiting or running job' },
  pause: { args: ['type'], flags: [], about: 'no worker starts jobs of the type' },
  resume: { args: ['type'], flags: [], about: 'workers start jobs of the type again' },
  workers: { args: [], flags: [], about: 'live worker processes' },
  migrate: { args: [], flags: ['dry-run'], about: "apply the module's migrations (--dry-run: print their SQL)" },
  purge: { args: [], flags: ['status', 'type', 'older-than'], about: 'delete completed, dead or cancelled jobs (--status required)' },
};

export const USAGE = `Usage: auto-job-queue <command> [arguments] [flags]

Commands:
${Object.entries(COMMANDS)
  .map(([name, { args, about }]) => `  ${`${name} ${args.map((a) => `<${a}>`).join(' ')}`.padEnd(22)}${about}`)
  .join('\n')}

Flags:
  --url <url>           the database (default: DATABASE_URL)
  --schema <name>       the module's schema (default: job_queue)
  --json                print JSON instead of tables
  --status <status>     jobs: a status; purge: completed, dead or cancelled
  --type <type>         only this job type
  --limit <n>           jobs: how many (1-500)
  --cursor <id>         jobs: the next page (printed after a full page)
  --older-than <time>   purge: only jobs older than this (7d, 12h, 30m)
  --dry-run             migrate: print the SQL, change nothing
  --help, --version

Exit codes: 0 done, 1 an error (one line on stderr), 2 bad usage.`;

/** Checks argv against the commands; throws CliUsageError for anything it does not know. */
export function parseCliArguments(argv: readonly string[], env: NodeJS.ProcessEnv): CliRequest | 'help' | 'version' {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new CliUsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.version) return 'version';
  if (values.help || positionals.length === 0 || positionals[0] === 'help') return 'help';
  const [command, ...rest] = positionals;
  const spec = COMMANDS[command];
  if (!spec) throw new CliUsageError(`Unknown command "${command}".`);
  if (rest.length !== spec.args.length) {
    throw new CliUsageError(`${command} takes ${spec.args.length === 0 ? 'no arguments' : spec.args.map((a) => `<${a}>`).join(' ')} (got ${rest.length}).`);
  }
  const given = (['status', 'type', 'limit', 'cursor', 'older-than', 'dry-run'] as const).filter((flag) => values[flag] !== undefined);
  const stray = given.filter((flag) => !spec.flags.includes(flag));
  if (stray.length > 0) throw new CliUsageError(`${command} does not take --${stray.join(', --')}.`);
  const url = values.url ?? env.DATABASE_URL ?? null;
  if (!url && command !== 'help') throw new CliUsageError('No database: set DATABASE_URL or pass --url postgres://…');
  return {
    command,
    positionals: rest,
    url,
    schema: values.schema ?? 'job_queue',
    json: values.json ?? false,
    flags: {
      status: values.status,
      type: values.type,
      limit: values.limit,
      cursor: values.cursor,
      olderThan: values['older-than'],
      dryRun: values['dry-run'] ?? false,
    },
  };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      url: { type: 'string' },
      schema: { type: 'string' },
      json: { type: 'boolean' },
      status: { type: 'string' },
      type: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      'older-than': { type: 'string' },
      'dry-run': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
    },
  });
}
