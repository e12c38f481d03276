import { describe, expect, it } from 'vitest';
import { JobWaitTimeoutError } from '../errors/job-wait-timeout.error.js';
import type { JobNotificationHub } from '../notifications/job-notification.hub.js';
import type { JobRecord } from '../persistence/job-record.js';
import type { JobStore } from '../persistence/job.store.js';
import { JobCompletionWaiter } from './job-completion.waiter.js';

/**
 * getJob answers from a script: an Error is thrown (the database away), a status is the row's.
 * markResultRead records the ids it is called with, and fails when `markFails`.
 */
function scriptedStore(script: Array<Error | JobRecord['status']>, read: string[] = [], markFails = false): JobStore {
  return {
    async markResultRead(id: string) {
      read.push(id);
      if (markFails) throw new Error('Connection terminated');
    },
    async getJob(id: string) {
      const next = script.length > 1 ? script.shift()! : script[0];
      if (next instanceof Error) throw next;
      return { id, status: next, result: next === 'completed' ? { ok: true } : null, lastError: null } as unknown as JobRecord;
    },
  } as unknown as JobStore;
}

const quietHub = { subscribe: async () => () => undefined } as unknown as JobNotificationHub;

describe('JobCompletionWaiter', () => {
  it('waits on through reads that fail, and resolves with the result once the job completes', async () => {
    const store = scriptedStore(['pending', new Error('Connection terminated'), new Error('connect ECONNREFUSED'), 'completed']);
    const waiter = await new JobCompletionWaiter(store, quietHub).prepare();
    await expect(waiter.wait('7', 10_000)).resolves.toEqual({ ok: true });
  });

  it('at its deadline with the last read failed, rejects with JobWaitTimeoutError carrying that error', async () => {
    const failure = new Error('connect ECONNREFUSED');
    const store = scriptedStore(['processing', failure]);
    const waiter = await new JobCompletionWaiter(store, quietHub).prepare();
    const error = await waiter.wait('7', 250).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobWaitTimeoutError);
    expect((error as JobWaitTimeoutError).status).toBe('processing');
    expect((error as JobWaitTimeoutError).cause).toBe(failure);
    expect((error as Error).message).toContain('its last read failed: connect ECONNREFUSED');
  });

  it('with markRead (retention.completedMs 0), records that it read the result, and resolves even if that write fails', async () => {
    const read: string[] = [];
    const waiter = await new JobCompletionWaiter(scriptedStore(['completed'], read), quietHub, true).prepare();
    await expect(waiter.wait('7', 10_000)).resolves.toEqual({ ok: true });
    expect(read).toEqual(['7']);

    const failing = await new JobCompletionWaiter(scriptedStore(['completed'], [], true), quietHub, true).prepare();
    await expect(failing.wait('8', 10_000)).resolves.toEqual({ ok: true });
  });

  it('without markRead (the default retention), writes nothing', async () => {
    const read: string[] = [];
    const waiter = await new JobCompletionWaiter(scriptedStore(['completed'], read), quietHub).prepare();
    await expect(waiter.wait('7', 10_000)).resolves.toEqual({ ok: true });
    expect(read).toEqual([]);
  });
});
