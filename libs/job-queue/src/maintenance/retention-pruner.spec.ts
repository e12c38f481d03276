import { describe, expect, it } from 'vitest';
import type { JobStore, PrunedChunk } from '../persistence/job.store.js';
import { DEFAULT_PASS_BUDGET_MS, MAX_PASS_BUDGET_MS, RetentionPruner, type RetentionSettings, UNREAD_RESULT_MS } from './retention-pruner.js';

/**
 * A store whose chunks come from a script, with the walk's shared state as the database keeps it
 * (`clock.now` stands for the database clock); it records each call. Each chunk and each dead
 * letter batch takes `costMs` on the pruner's own clock (`passClock`).
 */
function scriptedStore(chunks: Array<Partial<PrunedChunk>>, deadLeft = 0, costMs = 0) {
  const clock = { now: 1_000_000 };
  const passClock = { now: 0 };
  const state = { walkedTo: '0', restUntil: -Infinity };
  const walked: Array<[string, number, number, number]> = [];
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
    async pruneFinishedChunk(afterId: string, chunk: number, olderThanMs: number, awaitedMs: number): Promise<PrunedChunk> {
      walked.push([afterId, chunk, olderThanMs, awaitedMs]);
      passClock.now += costMs;
      const next = chunks.shift();
      if (!next) throw new Error('walked further than the script');
      return { scanned: chunk, lastId: null, reachedRecent: false, completed: 0, cancelled: 0, ...next };
    },
    async pruneDead(olderThanMs: number, limit: number) {
      dead.push([olderThanMs, limit]);
      passClock.now += costMs;
      const deleted = Math.min(limit, deadLeft);
      deadLeft -= deleted;
      return deleted;
    },
    async pruneStarts(olderThanMs: number) {
      starts.push(olderThanMs);
      return 0;
    },
    async pruneOperatorHistory() {},
  } as unknown as JobStore;
  const pruner = (settings: RetentionSettings) => new RetentionPruner(settings, () => passClock.now);
  return { store, clock, passClock, state, walked, dead, starts, pruner };
}

const full = (lastId: number, completed = 0): Partial<PrunedChunk> => ({ lastId: String(lastId), completed });

describe('RetentionPruner', () => {
  it('walks chunk after chunk while the pass is within its time budget, and the next pass goes on from there', async () => {
    // 10 ms a chunk: 25 chunks fill the 250 ms budget.
    const chunks = Array.from({ length: 27 }, (_, i) => full((i + 1) * 1_000, 1_000));
    chunks[26] = { scanned: 400, lastId: '26400', completed: 300, cancelled: 5 };
    const { store, walked, state, pruner: make } = scriptedStore(chunks, 0, 10);
    const pruner = make({ completedMs: 50_000, deadMs: 1, startsMs: 0 });

    expect(DEFAULT_PASS_BUDGET_MS).toBe(250);
    expect(await pruner.runOnce(store)).toEqual({ completed: 25_000, cancelled: 0, dead: 0 });
    expect(walked.map(([after]) => after)).toEqual(Array.from({ length: 25 }, (_, i) => String(i * 1_000)));
    expect(walked.every(([, chunk, age, awaited]) => chunk === 1_000 && age === 50_000 && awaited === 0)).toBe(true);
    expect(state.walkedTo).toBe('25000');

    expect(await pruner.runOnce(store)).toEqual({ completed: 1_300, cancelled: 5, dead: 0 });
    expect(walked.slice(25).map(([after]) => after)).toEqual(['25000', '26000']);
  });

  it('behind (the budget spent amid expired jobs), doubles the next budget up to 2 s; a walk that ends halves it again', async () => {
    // 10 ms a chunk, every chunk full of expired jobs: 25, 50, 100, 200, 200 chunks a pass.
    const chunks = Array.from({ length: 575 }, (_, i) => full((i + 1) * 1_000, 1_000));
    chunks.push({ scanned: 10, lastId: '575010', completed: 10 }, ...Array.from({ length: 200 }, (_, i) => full((i + 1) * 1_000, 1_000)));
    const { store, clock, pruner: make } = scriptedStore(chunks, 0, 10);
    const pruner = make({ completedMs: 50_000, deadMs: 1, startsMs: 0 });
    expect(MAX_PASS_BUDGET_MS).toBe(2_000);
    const passes: number[] = [];
    for (let i = 0; i < 5; i++) passes.push((await pruner.runOnce(store)).completed / 1_000);
    expect(passes).toEqual([25, 50, 100, 200, 200]);
    // The walk reaches the end within the pass: the next budget is 1 s, then back down.
    expect((await pruner.runOnce(store)).completed).toBe(10);
    clock.now += 5_000;
    expect((await pruner.runOnce(store)).completed).toBe(100_000);
  });

  it('a walk through jobs it keeps does not raise the budget', async () => {
    const { store, walked, pruner: make } = scriptedStore(Array.from({ length: 50 }, (_, i) => full((i + 1) * 1_000)), 0, 10);
    const pruner = make({ completedMs: 50_000, deadMs: 1, startsMs: 0 });
    await pruner.runOnce(store);
    await pruner.runOnce(store);
    expect(walked).toHaveLength(50);
  });

  it('a slow database gets fewer chunks a pass, and always at least one', async () => {
    const { store, walked, state, pruner: make } = scriptedStore(Array.from({ length: 5 }, (_, i) => full((i + 1) * 1_000)), 0, 100);
    await make({ completedMs: 50_000, deadMs: 1, startsMs: 0 }).runOnce(store);
    expect(walked.map(([after]) => after)).toEqual(['0', '1000', '2000']);
    await make({ completedMs: 50_000, deadMs: 1, startsMs: 0, passBudgetMs: 0 }).runOnce(store);
    expect(walked.map(([after]) => after)).toEqual(['0', '1000', '2000', '3000']);
    expect(state.walkedTo).toBe('4000');
  });

  it('is one walk for every process: another pruner (a new leader) carries on where the last pass stopped', async () => {
    const { store, walked, pruner } = scriptedStore(Array.from({ length: 10 }, (_, i) => full((i + 1) * 1_000)), 0, 50);
    await pruner({ completedMs: 50_000, deadMs: 1, startsMs: 0 }).runOnce(store);
    await pruner({ completedMs: 50_000, deadMs: 1, startsMs: 0 }).runOnce(store);
    expect(walked.map(([after]) => after)).toEqual(['0', '1000', '2000', '3000', '4000', '5000', '6000', '7000', '8000', '9000']);
  });

  it('starts over from the beginning once a chunk ends in recent jobs, after resting a tenth of the retention', async () => {
    const { store, clock, walked, pruner: make } = scriptedStore([
      full(1_000, 10),
      { lastId: '2000', reachedRecent: true, completed: 3 },
      full(1_000),
      { scanned: 0, lastId: null },
    ]);
    const pruner = make({ completedMs: 20_000, deadMs: 1, startsMs: 0 });

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
    const { store, clock, walked, pruner: make } = scriptedStore([{ scanned: 10, lastId: '10' }, { scanned: 10, lastId: '10' }]);
    const pruner = make({ completedMs: 7 * 24 * 3_600_000, deadMs: 1, startsMs: 0 });
    await pruner.runOnce(store);
    clock.now += 59_999;
    await pruner.runOnce(store);
    expect(walked).toHaveLength(1);
    clock.now += 1;
    await pruner.runOnce(store);
    expect(walked).toHaveLength(2);
  });

  it('prunes dead letters by their own age, batch after batch within the budget, and prunes rate-limit starts', async () => {
    const { store, dead, starts, pruner } = scriptedStore([{ scanned: 0 }], 7_000);
    const pruned = await pruner({ completedMs: 10, deadMs: 20, startsMs: 1_100 }).runOnce(store);
    expect(pruned.dead).toBe(7_000);
    expect(dead).toEqual(Array.from({ length: 8 }, () => [20, 1_000]));
    expect(starts).toEqual([1_100]);
  });

  it('deletes at least one batch of dead letters a pass, even after a walk that used the whole budget', async () => {
    const { store, dead, pruner } = scriptedStore(Array.from({ length: 3 }, (_, i) => full((i + 1) * 1_000)), 7_000, 200);
    const pruned = await pruner({ completedMs: 10, deadMs: 20, startsMs: 0 }).runOnce(store);
    expect(pruned.dead).toBe(1_000);
    expect(dead).toHaveLength(1);
  });

  it('with completedMs 0 (delete on complete), keeps unread awaited results an hour, and rests a minute between walks', async () => {
    const { store, clock, walked, pruner } = scriptedStore([{ scanned: 10, lastId: '10', cancelled: 2 }, { scanned: 0, lastId: null }]);
    const deleting = pruner({ completedMs: 0, deadMs: 1, startsMs: 0 });
    expect(await deleting.runOnce(store)).toEqual({ completed: 0, cancelled: 2, dead: 0 });
    expect(walked).toEqual([['0', 1_000, 0, UNREAD_RESULT_MS]]);
    expect(UNREAD_RESULT_MS).toBe(3_600_000);
    clock.now += 59_999;
    await deleting.runOnce(store);
    expect(walked).toHaveLength(1);
    clock.now += 1;
    await deleting.runOnce(store);
    expect(walked).toHaveLength(2);
  });
});
