import { describe, expect, it } from 'vitest';
import type { JobQueueOptions } from './job-queue-options.js';
import { unknownOptionKeys } from './unknown-options.js';

const dataSource = { type: 'postgres', url: 'postgres://user@localhost:5432/app' } as JobQueueOptions['dataSource'];

describe('unknownOptionKeys', () => {
  it('finds nothing in valid options, forRoot’s isGlobal included', () => {
    const options = { dataSource, concurrency: 5, retry: { maxAttempts: 3 }, retention: { deadMs: 1 }, isGlobal: true };
    expect(unknownOptionKeys(options as JobQueueOptions)).toEqual([]);
  });

  it('names misspelt keys, nested ones by their path', () => {
    const options = { dataSource, concurrenc: 5, retry: { maxAttemps: 3 }, retention: { completed: 1 } };
    expect(unknownOptionKeys(options as unknown as JobQueueOptions)).toEqual(['concurrenc', 'retry.maxAttemps', 'retention.completed']);
  });
});
