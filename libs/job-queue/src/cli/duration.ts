import { CliUsageError } from './cli-usage.error.js';

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `7d`, `12h`, `30m`, `45s`, `500ms`, `2w` (or a plain number of milliseconds) in milliseconds. */
export function parseDuration(flag: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)?$/.exec(text.trim());
  const value = match ? Number(match[1]) * UNITS[match[2] ?? 'ms'] : Number.NaN;
  if (!Number.isFinite(value) || !Number.isSafeInteger(Math.round(value))) {
    throw new CliUsageError(`--${flag} takes a duration such as 7d, 12h, 30m or 45s (got "${text}").`);
  }
  return Math.round(value);
}
