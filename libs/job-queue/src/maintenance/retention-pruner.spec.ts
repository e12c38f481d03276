import { describe, expect, it } from 'vitest';
import type { JobStore } from '../persistence/job.store.js';
import { RetentionPruner } from './retention-pruner.js';

describe('RetentionPruner', () => {
  it('prunes each finished status with its own age, in bounded batches, and prunes rate-limit starts', async () => {
    const calls: Array<[string, number, number]> = [];
    let completedLeft = 2_500;
    const startsPruned: number[] = [];
    const store = {
      async pruneFinished(status: string, olderThanMs: number, limit: number) {
        calls.push([status, olderThanMs, limit]);
        if (status !== 'completed') return 0;
        const deleted = Math.min(limit, completedLeft);
        completedLeft -= deleted;
        return deleted;
      },
      async pruneStarts(olderThanMs: number) {
        startsPruned.push(olderThanMs);
        return 0;
      },
    } as unknown as JobStore;
    const pruned = await new RetentionPruner({ completedMs: 10, deadMs: 20, startsMs: 1_100 }).runOnce(store);
    expect(pruned).toEqual({ completed: 2_500, cancelled: 0, dead: 0 });
    expect(calls).toEqual([
      ['completed', 10, 1_000],
      ['completed', 10, 1_000],
      ['completed', 10, 1_000],
      ['cancelled', 10, 1_000],
      ['dead', 20, 1_000],
    ]);
    expect(startsPruned).toEqual([1_100]);
  });

  it('stops after five full batches per status in one pass', async () => {
    let calls = 0;
    const store = {
      pruneFinished: async (status: string) => (status === 'dead' ? (calls++, 1_000) : 0),
      pruneStarts: async () => 0,
    } as unknown as JobStore;
    const pruned = await new RetentionPruner({ completedMs: 1, deadMs: 1, startsMs: 0 }).runOnce(store);
    expect(pruned.dead).toBe(5_000);
    expect(calls).toBe(5);
  });
});
