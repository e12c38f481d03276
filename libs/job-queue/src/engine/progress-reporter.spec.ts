import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Lease } from '../persistence/job.store.js';
import { PROGRESS_WRITE_INTERVAL_MS, ProgressReporter } from './progress-reporter.js';
import { quietLogger } from './scripted-store.stub.js';

const lease = { id: '7', leaseToken: 't', type: 'export' };

describe('ProgressReporter', () => {
  afterEach(() => vi.useRealTimers());

  it('writes the first value at once and coalesces the rest: the latest wins, one write per interval', async () => {
    vi.useFakeTimers();
    const writes: string[] = [];
    const reporter = new ProgressReporter(
      { reportProgress: async (_lease: Lease, json: string) => (writes.push(json), true) },
      lease,
      quietLogger,
      () => Date.now(),
    );
    const first = reporter.report('1');
    await vi.advanceTimersByTimeAsync(0);
    expect(writes).toEqual(['1']);
    reporter.report('2');
    reporter.report('3');
    const last = reporter.report('4');
    await vi.advanceTimersByTimeAsync(PROGRESS_WRITE_INTERVAL_MS - 1);
    expect(writes).toEqual(['1']);
    await vi.advanceTimersByTimeAsync(1);
    await Promise.all([first, last]);
    expect(writes).toEqual(['1', '4']);
  });

  it('logs a failed write and resolves: the handler never sees it', async () => {
    const warnings: string[] = [];
    const reporter = new ProgressReporter(
      {
        reportProgress: async () => {
          throw new Error('connection reset');
        },
      },
      lease,
      { ...quietLogger, warn: (message: string) => warnings.push(message) },
    );
    await expect(reporter.report('50')).resolves.toBeUndefined();
    expect(warnings).toEqual(['Could not store the progress of job 7 (export): connection reset']);
  });
});
