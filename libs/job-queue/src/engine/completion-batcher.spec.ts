import { describe, expect, it } from 'vitest';
import type { JobStore, Lease } from '../persistence/job.store.js';
import { DEFAULT_PREFETCH } from '../options/defaults.js';
import { StoreRefusedDataError } from '../errors/store-refused-data.error.js';
import { CompletionBatcher, MAX_COMPLETION_BATCH, MAX_COMPLETION_RESULT_CHARS } from './completion-batcher.js';

/** A store double whose completeMany the test releases by hand, recording each batch. */
function gatedStore(owned: Set<string>) {
  const batches: string[][] = [];
  const releases: Array<() => void> = [];
  let failNext: Error | null = null;
  const store = {
    async completeMany(items: ReadonlyArray<{ lease: Lease; resultJson: string }>) {
      batches.push(items.map((i) => i.lease.id));
      await new Promise<void>((resolve) => releases.push(resolve));
      if (failNext) {
        const error = failNext;
        failNext = null;
        throw error;
      }
      // The ids whose lease was gone, as the real store answers.
      return new Set(items.map((i) => i.lease.id).filter((id) => !owned.has(id)));
    },
  } as unknown as JobStore;
  return {
    store,
    batches,
    releaseNext: () => releases.shift()?.(),
    failNextWith: (error: Error) => (failNext = error),
  };
}

const lease = (id: string): Lease => ({ id, leaseToken: `t-${id}` });
/** What the store throws for a value the database refuses (here jsonb nested too deep). */
const refusal = () => new StoreRefusedDataError(Object.assign(new Error('stack depth limit exceeded'), { code: '54001' }));
/** The driver's error behind a store error, or the error itself. */
const driverError = (error: Error) => (error instanceof StoreRefusedDataError ? (error.cause as Error) : error);
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('CompletionBatcher', () => {
  it('writes a default claim’s worth of completions (the prefetch ceiling plus free slots) in one statement, and splits only beyond the cap', async () => {
    const claimed = DEFAULT_PREFETCH + 50;
    const ids = Array.from({ length: claimed + MAX_COMPLETION_BATCH + 10 }, (_, i) => String(i));
    const gate = gatedStore(new Set(ids));
    const batcher = new CompletionBatcher(gate.store);
    // Finished together, as a claimed batch of short jobs does: one synchronous run.
    const claimBatch = ids.slice(0, claimed).map((id) => batcher.complete(lease(id), 'null'));
    await tick();
    expect(gate.batches.map((batch) => batch.length)).toEqual([claimed]);
    const rest = ids.slice(claimed).map((id) => batcher.complete(lease(id), 'null'));
    gate.releaseNext();
    await tick();
    // The rest arrived during a write: the next statement takes the cap, the one after the remainder.
    expect(gate.batches.map((batch) => batch.length)).toEqual([claimed, MAX_COMPLETION_BATCH]);
    gate.releaseNext();
    await tick();
    gate.releaseNext();
    expect(gate.batches.map((batch) => batch.length)).toEqual([claimed, MAX_COMPLETION_BATCH, ids.length - claimed - MAX_COMPLETION_BATCH]);
    expect((await Promise.all([...claimBatch, ...rest])).every(Boolean)).toBe(true);
  });

  it('splits a batch whose results would pass the size cap, and sends an oversized result alone', async () => {
    const gate = gatedStore(new Set(['0', 'big-a', 'none', 'big-b', 'small', 'huge']));
    const batcher = new CompletionBatcher(gate.store);
    const bigResult = `"${'x'.repeat(MAX_COMPLETION_RESULT_CHARS / 2 + 10)}"`;
    const busy = batcher.complete(lease('0'), 'null');
    await tick();
    const queued = [
      batcher.complete(lease('big-a'), bigResult),
      batcher.complete(lease('none'), 'null'),
      batcher.complete(lease('big-b'), bigResult),
      batcher.complete(lease('small'), '{"ok":true}'),
      batcher.complete(lease('huge'), `"${'y'.repeat(MAX_COMPLETION_RESULT_CHARS + 10)}"`),
    ];
    for (let i = 0; i < 4; i++) {
      gate.releaseNext();
      await tick();
    }
    // Two large results would pass the cap together: the second waits for the next statement.
    expect(gate.batches).toEqual([['0'], ['big-a', 'none', 'small'], ['big-b'], ['huge']]);
    expect(await busy).toBe(true);
    expect(await Promise.all(queued)).toEqual([true, true, true, true, true]);
  });

  it('writes a lone completion at once, and groups those that arrive during a write', async () => {
    const gate = gatedStore(new Set(['1', '2', '3', '4']));
    const batcher = new CompletionBatcher(gate.store);
    const first = batcher.complete(lease('1'), 'null');
    await tick();
    expect(gate.batches).toEqual([['1']]);
    const later = [batcher.complete(lease('2'), 'null'), batcher.complete(lease('3'), 'null'), batcher.complete(lease('4'), 'null')];
    await tick();
    expect(gate.batches).toHaveLength(1);
    gate.releaseNext();
    expect(await first).toBe(true);
    await tick();
    expect(gate.batches).toEqual([['1'], ['2', '3', '4']]);
    gate.releaseNext();
    expect(await Promise.all(later)).toEqual([true, true, true]);
  });

  it('tells each caller whether its own fenced write applied', async () => {
    const gate = gatedStore(new Set(['1']));
    const batcher = new CompletionBatcher(gate.store);
    const results = [batcher.complete(lease('1'), '1'), batcher.complete(lease('2'), '2')];
    await tick();
    gate.releaseNext();
    await tick();
    gate.releaseNext();
    expect(await Promise.all(results)).toEqual([true, false]);
  });

  it('writes two attempts of one job in separate statements, each fenced by its own token', async () => {
    const gate = gatedStore(new Set(['1', '2']));
    const batcher = new CompletionBatcher(gate.store);
    const busy = batcher.complete(lease('0'), 'null');
    await tick();
    // While a write is in flight: a stale attempt of job 1, another job, then job 1's new attempt.
    const stale = batcher.complete({ id: '1', leaseToken: 'old' }, 'null');
    const other = batcher.complete(lease('2'), 'null');
    const fresh = batcher.complete({ id: '1', leaseToken: 'new' }, 'null');
    gate.releaseNext();
    await busy;
    await tick();
    expect(gate.batches).toEqual([['0'], ['1', '2']]);
    gate.releaseNext();
    await tick();
    expect(gate.batches).toEqual([['0'], ['1', '2'], ['1']]);
    gate.releaseNext();
    await Promise.all([stale, other, fresh]);
  });

  it('rejects every caller of a failed batch and keeps serving later ones', async () => {
    const gate = gatedStore(new Set(['1', '2']));
    const batcher = new CompletionBatcher(gate.store);
    gate.failNextWith(new Error('connection reset'));
    const failed = batcher.complete(lease('1'), 'null');
    await tick();
    gate.releaseNext();
    await expect(failed).rejects.toThrow('connection reset');
    const retried = batcher.complete(lease('2'), 'null');
    await tick();
    gate.releaseNext();
    expect(await retried).toBe(true);
  });

  it('tells a completion added as an object through its own methods, in the same batch as promised ones', async () => {
    const gate = gatedStore(new Set(['1', '3']));
    const batcher = new CompletionBatcher(gate.store);
    const heard: string[] = [];
    const completion = (id: string) => ({
      lease: lease(id),
      resultJson: 'null',
      settled: (applied: boolean) => heard.push(`${id}:${applied}`),
      failed: (error: unknown) => heard.push(`${id}:failed:${(error as Error).message}`),
    });
    // Added in one run of synchronous code: one statement for all three.
    batcher.add(completion('1'));
    const promised = batcher.complete(lease('2'), 'null');
    batcher.add(completion('3'));
    await tick();
    expect(gate.batches).toEqual([['1', '2', '3']]);
    gate.releaseNext();
    expect(await promised).toBe(false);
    expect(heard).toEqual(['1:true', '3:true']);
    gate.failNextWith(new Error('connection reset'));
    batcher.add(completion('4'));
    await tick();
    gate.releaseNext();
    await tick();
    expect(heard).toEqual(['1:true', '3:true', '4:failed:connection reset']);
  });

  it('a completion whose listener throws (it must not) does not keep the rest of its batch from hearing back', async () => {
    const gate = gatedStore(new Set(['1', '2']));
    const batcher = new CompletionBatcher(gate.store);
    const heard: string[] = [];
    batcher.add({
      lease: lease('1'),
      resultJson: 'null',
      settled: () => {
        throw new Error('listener bug');
      },
      failed: () => undefined,
    });
    batcher.add({ lease: lease('2'), resultJson: 'null', settled: (applied) => heard.push(`2:${applied}`), failed: () => undefined });
    await tick();
    gate.releaseNext();
    await tick();
    expect(heard).toEqual(['2:true']);
    // And the batcher goes on serving.
    const later = batcher.complete(lease('2'), 'null');
    await tick();
    gate.releaseNext();
    expect(await later).toBe(true);
  });
});


describe('CompletionBatcher, when the database refuses one result', () => {
  /** Refuses any statement holding the result "bad", as jsonb refuses a value it cannot store. */
  function refusingStore() {
    const batches: string[][] = [];
    const store = {
      async completeMany(items: ReadonlyArray<{ lease: Lease; resultJson: string }>) {
        batches.push(items.map((i) => i.lease.id));
        if (items.some((i) => i.resultJson === '"bad"')) throw refusal();
        return new Set<string>();
      },
    } as unknown as JobStore;
    return { store, batches };
  }

  it('writes that batch again one completion at a time, so only the refused one fails', async () => {
    const { store, batches } = refusingStore();
    const batcher = new CompletionBatcher(store);
    const outcomes = ['a', 'b', 'c'].map((id) =>
      batcher.complete(lease(id), id === 'b' ? '"bad"' : 'null').then(
        (applied) => `applied:${applied}`,
        (error: Error) => `failed:${(driverError(error) as { code?: string }).code}`,
      ),
    );
    expect(await Promise.all(outcomes)).toEqual(['applied:true', 'failed:54001', 'applied:true']);
    expect(batches).toEqual([['a', 'b', 'c'], ['a'], ['b'], ['c']]);
  });

  it('stops writing one by one once a write fails for another reason: the rest hear that failure at once', async () => {
    const batches: string[][] = [];
    const store = {
      async completeMany(items: ReadonlyArray<{ lease: Lease; resultJson: string }>) {
        batches.push(items.map((i) => i.lease.id));
        if (items.length > 1 || items[0].resultJson === '"bad"') throw refusal();
        throw new Error('Connection terminated unexpectedly');
      },
    } as unknown as JobStore;
    const batcher = new CompletionBatcher(store);
    const outcomes = ['a', 'b', 'c', 'd'].map((id) =>
      batcher.complete(lease(id), id === 'a' ? '"bad"' : 'null').then(String, (error: Error) => driverError(error).message),
    );
    expect(await Promise.all(outcomes)).toEqual([
      'stack depth limit exceeded',
      'Connection terminated unexpectedly',
      'Connection terminated unexpectedly',
      'Connection terminated unexpectedly',
    ]);
    expect(batches).toEqual([['a', 'b', 'c', 'd'], ['a'], ['b']]);
  });

  it('does not split a batch that failed for another reason (the database away)', async () => {
    const gate = gatedStore(new Set(['a', 'b']));
    const batcher = new CompletionBatcher(gate.store);
    gate.failNextWith(new Error('Connection terminated unexpectedly'));
    const outcomes = ['a', 'b'].map((id) => batcher.complete(lease(id), 'null').then(String, () => 'failed'));
    await tick();
    gate.releaseNext();
    expect(await Promise.all(outcomes)).toEqual(['failed', 'failed']);
    expect(gate.batches).toEqual([['a', 'b']]);
  });
});
