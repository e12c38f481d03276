import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');

function compile(project: string): { code: number | null; output: string } {
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'test/type-fixtures', project)], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

/**
 * Typed jobs by declaration merging, checked by the compiler on fixtures that declare
 * `JobTypes` as an application would (`declare module 'auto-job-queue'`).
 */
describe('typed jobs (JobTypes)', () => {
  it('compiles right payloads, undeclared types and the explicit payload parameter; every wrong payload is an error', () => {
    // typed-right.ts marks each wrong payload @ts-expect-error: one that compiled would fail this run.
    const result = compile('tsconfig.json');
    expect(result.output).toBe('');
    expect(result.code).toBe(0);
  });

  it('refuses a wrong payload for a declared type, naming the property', () => {
    const result = compile('tsconfig.wrong.json');
    expect(result.code).not.toBe(0);
    expect(result.output).toContain("typed-wrong.ts(6,41): error TS2561: Object literal may only specify known properties, but 'mail' does not exist");
  });
});
