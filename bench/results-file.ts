import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** bench/results under the working directory: the repository root when run by `npm run bench` (git-ignored). */
const RESULTS_DIR = path.resolve(process.cwd(), 'bench/results');

/** Writes bench/results/<timestamp>[-<suffix>].json and returns its path. */
export function writeResults(startedAt: Date, content: unknown, suffix?: string): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${startedAt.toISOString().replace(/[:.]/g, '-')}${suffix ? `-${suffix}` : ''}.json`);
  writeFileSync(file, `${JSON.stringify(content, null, 2)}\n`);
  return file;
}
