import { describe, expect, it } from 'vitest';
import { JobQueueEvents } from '../events/job-queue.events.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore } from '../persistence/job.store.js';
import { Backpressure } from './backpressure.js';

/** A store whose queue reads answer only when the test says so (a database slow to answer). */
function slowStore() {
  let reads = 0;
  const answers: Array<() => void> = [];
  const store = {
    queueSnapshot: () => {
      reads++;
      return new Promise((resolve) => answers.push(() => resolve({ depth: 3, deadLastHour: 0 })));
    },
    depthByType: async () => new Map<string, number>(),
    openCircuits: async () => [],
  } as unknown as JobStore;
  return { store, reads: () => reads, answer: () => answers.shift()?.() };
}

const options = {
  maxQueueDepth: null,
  maxQueueDepthByType: {},
  depthRefreshMs: 0,
  deadLetterAlertThreshold: 1,
} as unknown as ResolvedJobQueueOptions;

describe('Backpressure\'s queue reads on a database slow to answer', () => {
  it('starts no new reads while the last ones are still running, and reads again once they answered', async () => {
    const slow = slowStore();
    const backpressure = new Backpressure(slow.store, options, new JobQueueEvents());
    backpressure.snapshotTimeoutMs = 20;

    const first = await backpressure.snapshot();
    expect(first.databaseReachable).toBe(false);
    expect(first.error).toContain('no answer within 20 ms');
    // Probes go on; the read that timed out is still running, so none is added beside it.
    for (let i = 0; i < 3; i++) {
      const next = await backpressure.snapshot();
      expect(next.databaseReachable).toBe(false);
      expect(next.error).toContain('has not answered yet');
    }
    expect(slow.reads()).toBe(1);

    slow.answer();
    await new Promise((resolve) => setImmediate(resolve));
    const reading = backpressure.snapshot();
    expect(slow.reads()).toBe(2);
    slow.answer();
    expect(await reading).toMatchObject({ databaseReachable: true, depth: 3 });
  });

  it('gives up on a read that never answers after ten timeouts, and reads again', async () => {
    const slow = slowStore();
    const backpressure = new Backpressure(slow.store, options, new JobQueueEvents());
    backpressure.snapshotTimeoutMs = 5;
    expect((await backpressure.snapshot()).databaseReachable).toBe(false);
    expect(slow.reads()).toBe(1);
    // The first read never answers (a connection that died without a word).
    await new Promise((resolve) => setTimeout(resolve, 60));
    const next = backpressure.snapshot();
    expect(slow.reads()).toBe(2);
    slow.answer();
    slow.answer();
    expect(await next).toMatchObject({ databaseReachable: true, depth: 3 });
  });
});
