import { describe, expect, it } from 'vitest';
import { PausedTypes } from '../engine/paused-types.js';
import type { JobQueueEvent } from '../events/job-queue-event.js';
import { quietLogger } from '../engine/scripted-store.stub.js';
import { PauseWatcher } from './pause-watcher.js';

function watcher(reads: Array<string[] | Error>) {
  const paused = new PausedTypes();
  const events: Array<Omit<JobQueueEvent, 'at'>> = [];
  const logs: string[] = [];
  const store = {
    pausedTypes: async () => {
      const next = reads.shift()!;
      if (next instanceof Error) throw next;
      return next;
    },
  };
  const logger = { ...quietLogger, log: (m: string) => logs.push(`log: ${m}`), warn: (m: string) => logs.push(`warn: ${m}`) };
  const w = new PauseWatcher(store, (types) => paused.replace(types), { emit: (event) => events.push(event) }, logger);
  return { w, paused, events, logs };
}

describe('PauseWatcher', () => {
  it('hands each read to the worker and emits paused / resumed for what changed, nothing when nothing did', async () => {
    const { w, paused, events } = watcher([['a', 'b'], ['a', 'b'], ['b', 'c']]);
    await w.refresh();
    await w.refresh();
    await w.refresh();
    expect(events).toEqual([
      { kind: 'paused', type: 'a' },
      { kind: 'paused', type: 'b' },
      { kind: 'paused', type: 'c' },
      { kind: 'resumed', type: 'a' },
    ]);
    expect([paused.has('a'), paused.has('b'), paused.has('c')]).toEqual([false, true, true]);
  });

  it('polls without rejecting: an outage is logged once, the last list holds, and its end is logged', async () => {
    const { w, paused, logs } = watcher([['a'], new Error('connection refused'), new Error('connection refused'), []]);
    await w.poll();
    await w.poll();
    await w.poll();
    expect(paused.has('a')).toBe(true);
    await w.poll();
    expect(paused.has('a')).toBe(false);
    expect(logs).toEqual([
      'warn: Could not read the paused types: connection refused. The last list read holds until it can be.',
      'log: The paused types can be read again.',
    ]);
  });

  it('shares one read among the refreshes asked for while it runs, and reads once more after it', async () => {
    let reads = 0;
    const paused = new PausedTypes();
    const w = new PauseWatcher({ pausedTypes: async () => (reads++, []) }, (types) => paused.replace(types), { emit: () => undefined }, quietLogger);
    await Promise.all([w.refresh(), w.refresh(), w.refresh()]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(reads).toBe(2);
  });
});
