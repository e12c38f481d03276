import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Lease } from '../persistence/job.store.js';
import { CompletionBatcher } from './completion-batcher.js';
import { StartConfirmations } from './start-confirmations.js';

const lease = (id: string, leaseToken = `t-${id}`): Lease => ({ id, leaseToken });

/** A store double recording each statement: the completions' ids and the starts it charged. */
function recordingStore() {
  const statements: Array<{ completed: string[]; confirmed: string[] }> = [];
  const store = {
    async completeMany(items: ReadonlyArray<{ lease: Lease }>, confirms: readonly Lease[] = []) {
      statements.push({ completed: items.map((i) => i.lease.id), confirmed: confirms.map((l) => l.id) });
      return new Set<string>();
    },
    async confirmStarts(leases: readonly Lease[]) {
      statements.push({ completed: [], confirmed: leases.map((l) => l.id) });
      return leases.length;
    },
  };
  return { store, statements };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('StartConfirmations', () => {
  it('makes a start due after one to two ticks, and forgets one whose handler returned first', () => {
    vi.useFakeTimers();
    const due: number[] = [];
    const starts = new StartConfirmations(() => due.push(starts.pending), 5);
    const [a, b, c] = [lease('a'), lease('b'), lease('c')];
    starts.started(a);
    starts.started(b);
    vi.advanceTimersByTime(5);
    // One tick: not due yet (it may have started a moment before the tick).
    expect(starts.hasDue).toBe(false);
    starts.started(c);
    starts.ended(b);
    vi.advanceTimersByTime(5);
    expect(starts.take(new Set()).map((l) => l.id)).toEqual(['a']);
    vi.advanceTimersByTime(5);
    expect(starts.take(new Set()).map((l) => l.id)).toEqual(['c']);
    expect(due).toHaveLength(2);
    // Nothing pending: no timer left running.
    expect(starts.pending).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('leaves due a start whose job another attempt completes in the same statement', () => {
    vi.useFakeTimers();
    const starts = new StartConfirmations(() => undefined, 5);
    starts.started(lease('7', 'new'));
    vi.advanceTimersByTime(10);
    expect(starts.take(new Set(['7']))).toEqual([]);
    expect(starts.take(new Set()).map((l) => l.leaseToken)).toEqual(['new']);
  });
});

describe('CompletionBatcher with starts to confirm', () => {
  it('writes a due start with the next completions, or alone when nothing else is written', async () => {
    vi.useFakeTimers();
    const { store, statements } = recordingStore();
    const batcher = new CompletionBatcher(store, 5);
    const long = lease('long');
    batcher.confirmStart(long);
    vi.advanceTimersByTime(10);
    await vi.runAllTimersAsync();
    // Nothing else to write: the start went alone.
    expect(statements).toEqual([{ completed: [], confirmed: ['long'] }]);

    // A start that comes due while a write is in flight rides with the next completions.
    let release!: () => void;
    const slow = {
      async completeMany(items: ReadonlyArray<{ lease: Lease }>, confirms: readonly Lease[] = []) {
        if (items[0].lease.id === 'first') await new Promise<void>((resolve) => (release = resolve));
        return store.completeMany(items, confirms);
      },
      confirmStarts: store.confirmStarts,
    };
    const busy = new CompletionBatcher(slow, 5);
    const first = busy.complete(lease('first'), 'null');
    await Promise.resolve();
    busy.confirmStart(lease('other'));
    await vi.advanceTimersByTimeAsync(10);
    const second = busy.complete(lease('second'), 'null');
    release();
    await Promise.all([first, second]);
    expect(statements.slice(1)).toEqual([
      { completed: ['first'], confirmed: [] },
      { completed: ['second'], confirmed: ['other'] },
    ]);
  });

  it('writes no confirm for a short job: its completion charges it', async () => {
    vi.useFakeTimers();
    const { store, statements } = recordingStore();
    const batcher = new CompletionBatcher(store, 5);
    const short = lease('short');
    batcher.confirmStart(short);
    batcher.startEnded(short);
    await batcher.complete(short, 'null');
    await vi.runAllTimersAsync();
    expect(statements).toEqual([{ completed: ['short'], confirmed: [] }]);
  });

  it('drops the starts of a statement that failed: their outcomes charge them', async () => {
    vi.useFakeTimers();
    let fail = true;
    const statements: string[][] = [];
    const batcher = new CompletionBatcher(
      {
        async completeMany() {
          return new Set<string>();
        },
        async confirmStarts(leases: readonly Lease[]) {
          statements.push(leases.map((l) => l.id));
          if (fail) throw new Error('connection refused');
          return leases.length;
        },
      },
      5,
    );
    batcher.confirmStart(lease('a'));
    await vi.advanceTimersByTimeAsync(10);
    fail = false;
    await vi.advanceTimersByTimeAsync(50);
    expect(statements).toEqual([['a']]);
    expect(batcher.starts.pending).toBe(0);
  });
});
