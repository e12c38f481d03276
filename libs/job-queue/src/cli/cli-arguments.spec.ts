import { describe, expect, it } from 'vitest';
import { parseCliArguments } from './cli-arguments.js';
import { CliUsageError } from './cli-usage.error.js';
import { parseDuration } from './duration.js';

const env = { DATABASE_URL: 'postgres://db/app' };

describe('parseCliArguments', () => {
  it('reads a command, its argument and its flags; the URL comes from --url, else DATABASE_URL', () => {
    expect(parseCliArguments(['jobs', '--status', 'dead', '--type', 'mail', '--limit', '5', '--json'], env)).toMatchObject({
      command: 'jobs',
      positionals: [],
      url: 'postgres://db/app',
      schema: 'job_queue',
      json: true,
      flags: { status: 'dead', type: 'mail', limit: '5', dryRun: false },
    });
    expect(parseCliArguments(['job', '42', '--url', 'postgres://other/x', '--schema', 'q'], env)).toMatchObject({
      command: 'job',
      positionals: ['42'],
      url: 'postgres://other/x',
      schema: 'q',
    });
    expect(parseCliArguments(['migrate', '--dry-run'], env)).toMatchObject({ flags: { dryRun: true } });
    expect(parseCliArguments([], env)).toBe('help');
    expect(parseCliArguments(['--version'], {})).toBe('version');
  });

  it.each([
    [['bogus'], 'Unknown command "bogus"'],
    [['stats', '--frobnicate'], "Unknown option '--frobnicate'"],
    [['job'], 'job takes <id> (got 0)'],
    [['stats', 'extra'], 'stats takes no arguments (got 1)'],
    [['stats', '--status', 'dead'], 'stats does not take --status'],
    [['migrate', '--older-than', '1d'], 'migrate does not take --older-than'],
  ])('%j is bad usage: %s', (argv, message) => {
    expect(() => parseCliArguments(argv, env)).toThrow(CliUsageError);
    expect(() => parseCliArguments(argv, env)).toThrow(message);
  });

  it('needs a database', () => {
    expect(() => parseCliArguments(['stats'], {})).toThrow('No database: set DATABASE_URL or pass --url');
  });
});

describe('parseDuration', () => {
  it.each([
    ['7d', 604_800_000],
    ['12h', 43_200_000],
    ['30m', 1_800_000],
    ['45s', 45_000],
    ['500ms', 500],
    ['2w', 1_209_600_000],
    ['1.5h', 5_400_000],
    ['250', 250],
  ])('%s is %d ms', (text, ms) => expect(parseDuration('older-than', text)).toBe(ms));

  it.each(['soon', '-1d', '7 days', '', 'd'])('refuses %j', (text) => {
    expect(() => parseDuration('older-than', text)).toThrow('--older-than takes a duration such as 7d');
  });
});
