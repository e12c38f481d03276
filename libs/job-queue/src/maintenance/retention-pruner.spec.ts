import { describe, expect, it } from 'vitest';
import type { JobStore, PrunedChunk } from '../persistence/job.store.js';
import { RetentionPruner } from './retention-pruner.js';

/**
 * A store whose chunks come from a script, with the walk's shared state as the database keeps it
 * (`clock.now` stands for the database clock); it records each call.
 */
function scriptedStore(chunks: Array<Partial<PrunedChunk>>, deadLeft = 0) {
  const clock = { now: 1_000_000 };
  const state = { walkedTo: '0', restUntil: -Infinity };
  const walked: Array<[string, number, number]> = [];
  const dead: Array<[number, number]> = [];
  const starts: number[] = [];
  const store = {
    async retentionWalk() {
      return { walkedTo: state.walkedTo, due: state.restUntil <= clock.now };
    },
    async saveRetentionWalk(walkedTo: string, restMs: number) {
      state.walkedTo = walkedTo;
      state.restUntil = clock.now + restMs;
    },
    async pruneFinishedChunk(afterId: string, chunk: number, olderThanMs: number): Promise<PrunedChunk> {
      walked.push([afterId, chunk, olderThanMs]);
      const next = chunks.shift();
      if (!next) throw new Error('walked further than the script');
      return { scanned: chunk, lastId: null, reachedRecent: false, completed: 0, cancelled: 0, ...next };
    },
    async pruneDead(olderThanMs: number, limit: number) {
      dead.push([olderThanMs, limit]);
      const deleted = Math.min(limit, deadLeft);
      deadLeft -= deleted;
      return deleted;
    },
    async pruneStarts(olderThanMs: number) {
      starts.push(olderThanMs);
      return 0;
    },
  } as unknown as JobStore;
  return { store, clock, state, walked, dead, starts };
}

const full = (lastId: number, completed = 0): Partial<PrunedChunk> => ({ lastId: String(lastId), completed });

describe('RetentionPruner', () => {
  it('walks completed and cancelled jobs a chunk at a time, five chunks a pass, and the next pass goes on from there', async () => {
    const chunks = Array.from({ length: 7 }, (_, i) => full((i + 1) * 1_000, 1_000));
    chunks[6] = { scanned: 400, lastId: '6400', completed: 300, cancelled: 5 };
    const { store, walked, state } = scriptedStore(chunks);
    const pruner = new RetentionPruner({ completedMs: 50_000, deadMs: 1, startsMs: 0 });

    expect(await pruner.runOnce(store)).toEqual({ completed: 5_000, cancelled: 0, dead: 0 });
    expect(walked.map(([after]) => after)).toEqual(['0', '1000', '2000', '3000', '4000']);
    expect(walked.every(([, chunk, age]) => chunk === 1_000 && age === 50_000)).toBe(true);
    expect(state.walkedTo).toBe('5000');

    expect(await pruner.runOnce(store)).toEqual({ completed: 1_300, cancelled: 5, dead: 0 });
    expect(walked.slice(5).map(([after]) => after)).toEqual(['5000', '6000']);
  });

  it('is one walk for every process: another pruner (a new leader) carries on where the last pass stopped', async () => {
    const { store, walked } = scriptedStore(Array.from({ length: 10 }, (_, i) => full((i + 1) * 1_000)));
    await new RetentionPruner({ completedMs: 50_000, deadMs: 1, startsMs: 0 }).runOnce(store);
    await new RetentionPruner({ completedMs: 50_000, deadMs: 1, startsMs: 0 }).runOnce(store);
    expect(walked.map(([after]) => after)).toEqual(['0', '1000', '2000', '3000', '4000', '5000', '6000', '7000', '8000', '9000']);
  });

  it('starts over from the beginning once a chunk ends in recent jobs, after resting a tenth of the retention', async () => {
    const { store, clock, walked } = scriptedStore([
      full(1_000, 10),
      { lastId: '2000', reachedRecent: true, completed: 3 },
      full(1_000),
      { scanned: 0, lastId: null },
    ]);
    const pruner = new RetentionPruner({ completedMs: 20_000, deadMs: 1, startsMs: 0 });

    expect((await pruner.runOnce(store)).completed).toBe(13);
    expect(walked.map(([after]) => after)).toEqual(['0', '1000']);

    clock.now += 1_999;
    await pruner.runOnce(store);
    expect(walked).toHaveLength(2);

    clock.now += 1;
    await pruner.runOnce(store);
    // From the beginning again; an empty chunk (the end of the table) ends that walk too.
    expect(walked.slice(2).map(([after]) => after)).toEqual(['0', '1000']);
    clock.now += 1_999;
    await pruner.runOnce(store);
    expect(walked).toHaveLength(4);
  });

  it('rests at most a minute between walks, however long the retention', async () => {
    const { store, clock, walked } = scriptedStore([{ scanned: 10, lastId: '10' }, { scanned: 10, lastId: '10' }]);
    const pruner = new RetentionPruner({ completedMs: 7 * 24 * 3_600_000, deadMs: 1, startsMs: 0 });
    await pruner.runOnce(store);
    clock.now += 59_999;
    await pruner.runOnce(store);
    expect(walked).toHaveLength(1);
    clock.now += 1;
    await pruner.runOnce(store);
    expect(walked).toHaveLength(2);
  });

  it('prunes dead letters by their own age, at most five batches a pass, and prunes rate-limit starts', async () => {
    const { store, dead, starts } = scriptedStore([{ scanned: 0 }], 7_000);
    const pruned = await new RetentionPruner({ completedMs: 10, deadMs: 20, startsMs: 1_100 }).runOnce(store);
    expect(pruned.dead).toBe(5_000);
    expect(dead).toEqual(Array.from({ length: 5 }, () => [20, 1_000]));
    expect(starts).toEqual([1_100]);
  });
});
