import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The library's layers, lowest first. A file may import from its own folder and from folders
 * below its own, never from one above or beside it: that keeps the engine plain TypeScript under
 * the Nest wiring, and lets each layer be read (and tested) without the ones above it.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['base'],
  ['errors'],
  ['options'],
  ['migrations'],
  ['persistence'],
  ['connection'],
  ['events'],
  ['tracing'],
  ['notifications'],
  ['decorators'],
  ['schedules'],
  ['engine'],
  ['discovery'],
  ['producer'],
  ['maintenance'],
  ['metrics'],
  ['orchestrator'],
  ['health', 'admin', 'http'],
  ['dashboard', 'testing'],
  ['.'],
  // The command line boots the module itself.
  ['cli'],
];

/** Only the persistence layer talks to the driver. */
const DRIVER_PACKAGES = ['pg', 'pg-pool', 'pg-protocol'];

const root = dirname(fileURLToPath(import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

function folderOf(file: string): string {
  const parts = relative(root, file).split('/');
  return parts.length === 1 ? '.' : parts[0];
}

function layerOf(folder: string): number {
  const layer = LAYERS.findIndex((folders) => folders.includes(folder));
  if (layer < 0) throw new Error(`Folder ${folder}/ has no layer: add it to LAYERS in architecture.spec.ts.`);
  return layer;
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'([^']+)'/g), ...text.matchAll(/import\(\s*'([^']+)'\s*\)/g)].map(
    (match) => match[1],
  );
}

const files = sourceFiles(root);

describe('library layers', () => {
  it('every import points to the same folder or a lower layer', () => {
    const upward: string[] = [];
    for (const file of files) {
      const from = folderOf(file);
      for (const specifier of importsOf(file)) {
        if (!specifier.startsWith('.')) continue;
        const to = folderOf(resolve(dirname(file), specifier));
        if (to !== from && layerOf(to) >= layerOf(from)) upward.push(`${relative(root, file)} imports ${specifier}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('only persistence/ imports the PostgreSQL driver', () => {
    const outside = files.flatMap((file) =>
      importsOf(file)
        .filter((specifier) => DRIVER_PACKAGES.includes(specifier) && folderOf(file) !== 'persistence')
        .map((specifier) => `${relative(root, file)} imports ${specifier}`),
    );
    expect(outside).toEqual([]);
  });

  it('no source file is over 400 lines', () => {
    const long = files.filter((file) => readFileSync(file, 'utf8').split('\n').length > 400).map((file) => relative(root, file));
    expect(long).toEqual([]);
  });
});
