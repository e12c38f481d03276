import { beforeEach, describe, expect, it } from 'vitest';
import type { RegisteredHandler } from '../base/registered-handler.js';
import type { ClaimedJob, JobStore, Lease } from '../persistence/job.store.js';
import type { JobStatus } from '../base/job-status.js';
import type { EngineLogger } from '../base/logger.js';
import type { EventSink, JobQueueEvent } from '../events/job-queue-event.js';
import { handlerStub } from '../base/registered-handler.stub.js';
import { StoreRefusedDataError } from '../errors/store-refused-data.error.js';
import { StoreUnavailableError } from '../errors/store-unavailable.error.js';
import type { CompletionBatcher } from './completion-batcher.js';
import { OutcomeRecorder } from './outcome-recorder.js';
import { RetryPolicy } from './retry-policy.js';

interface FakeRow {
  status: JobStatus;
  leaseToken: string | null;
  result?: string;
  lastError?: string;
  retryDelayMs?: number;
}

/**
 * In-memory stand-in for the few JobStore writes the recorder makes: each applies only while the
 * row is still processing under the same lease token, like the real fenced statements. It tests
 * the recorder's decisions, not locking.
 */
class FakeStore {
  readonly rows = new Map<string, FakeRow>();
  readonly calls: string[] = [];
  /** Errors to throw from the next write calls, one per call. */
  readonly failures: Error[] = [];

  private owns(lease: Lease): FakeRow | null {
    const row = this.rows.get(lease.id);
    return row && row.status === 'processing' && row.leaseToken === lease.leaseToken ? row : null;
  }

  private enter(name: string): void {
    this.calls.push(name);
    const failure = this.failures.shift();
    if (failure) throw failure;
  }

  async complete(lease: Lease, resultJson: string): Promise<boolean> {
    this.enter('complete');
    const row = this.owns(lease);
    if (!row) return false;
    Object.assign(row, { status: 'completed', leaseToken: null, result: resultJson });
    return true;
  }

  async scheduleRetry(lease: Lease, error: string, _attempt: number, _workerId: string, delayMs: number): Promise<boolean> {
    this.enter('scheduleRetry');
    const row = this.owns(lease);
    if (!row) return false;
    Object.assign(row, { status: 'failed', leaseToken: null, lastError: error, retryDelayMs: delayMs });
    return true;
  }

  async deadLetter(lease: Lease, error: string): Promise<boolean> {
    this.enter('deadLetter');
    const row = this.owns(lease);
    if (!row) return false;
    Object.assign(row, { status: 'dead', leaseToken: null, lastError: error });
    return true;
  }

  async release(leases: readonly Lease[]): Promise<string[]> {
    this.enter('release');
    const released: string[] = [];
    for (const lease of leases) {
      const row = this.owns(lease);
      if (!row) continue;
      Object.assign(row, { status: 'pending', leaseToken: null });
      released.push(lease.id);
    }
    return released;
  }
}

const handler = handlerStub({ maxAttempts: 5 });
/** What the store throws while the database is away. */
const unavailable = (message: string) => new StoreUnavailableError(new Error(message));

/** Completions written one statement each, so the fake store sees each `complete`. */
function unbatched(fake: FakeStore): Pick<CompletionBatcher, 'complete' | 'add'> {
  return {
    complete: (lease, resultJson) => fake.complete(lease, resultJson),
    add: (completion) => {
      fake.complete(completion.lease, completion.resultJson).then(
        (applied) => completion.settled(applied),
        (error: unknown) => completion.failed(error),
      );
    },
  };
}

function claimed(attempt: number, maxAttempts = 3): ClaimedJob {
  return {
    id: '7',
    type: 'email.welcome',
    payload: {},
    attempt,
    maxAttempts,
    idempotencyKey: null,
    leaseToken: 'token-a',
  };
}

let store: FakeStore;
let events: Array<Omit<JobQueueEvent, 'at'>>;
let logs: { warn: string[]; error: string[] };
let sleeps: number[];
let recorder: OutcomeRecorder;

/** A recorder on the fake store whose pauses are recorded, not waited; `afterPause` runs after each. */
function newRecorder({ afterPause, leaseMs }: { afterPause?: () => void; leaseMs?: number } = {}): OutcomeRecorder {
  const sink: EventSink = { emit: (event) => events.push(event) };
  const logger: EngineLogger = {
    log: () => undefined,
    warn: (message) => logs.warn.push(message),
    error: (message) => logs.error.push(message),
  };
  const pause = async (ms: number) => {
    sleeps.push(ms);
    afterPause?.();
  };
  return new OutcomeRecorder(store as unknown as JobStore, unbatched(store), new RetryPolicy(() => 0.5), sink, logger, 'worker-a', leaseMs ?? 30_000, pause);
}

beforeEach(() => {
  store = new FakeStore();
  store.rows.set('7', { status: 'processing', leaseToken: 'token-a' });
  events = [];
  logs = { warn: [], error: [] };
  sleeps = [];
  recorder = newRecorder();
});

const base = { jobId: '7', type: 'email.welcome', workerId: 'worker-a' };

describe('OutcomeRecorder', () => {
  it('completes a succeeded job and emits completed', async () => {
    await recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '{"ok":true}' });
    expect(store.calls).toEqual(['complete']);
    expect(store.rows.get('7')).toMatchObject({ status: 'completed', result: '{"ok":true}' });
    expect(events).toEqual([{ kind: 'completed', ...base, attempt: 1 }]);
  });

  it('only emits completed for a transactional commit (the job was completed in its transaction)', async () => {
    await recorder.record(claimed(1), handler, { kind: 'committed' });
    expect(store.calls).toEqual([]);
    expect(events).toEqual([{ kind: 'completed', ...base, attempt: 1 }]);
  });

  it('schedules a retry with the RetryPolicy delay for the handler’s backoff while attempts remain', async () => {
    await recorder.record(claimed(2), handler, { kind: 'failed', error: 'smtp refused', permanent: false });
    // attempt 2: capped delay 1000·2 = 2000; equal jitter with random 0.5 → 1500.
    const expected = new RetryPolicy(() => 0.5).delayFor(2, handler);
    expect(expected).toBe(1_500);
    expect(store.calls).toEqual(['scheduleRetry']);
    expect(store.rows.get('7')).toMatchObject({ status: 'failed', lastError: 'smtp refused', retryDelayMs: 1_500 });
    expect(events).toEqual([{ kind: 'retry-scheduled', ...base, attempt: 2, error: 'smtp refused', delayMs: 1_500 }]);
  });

  it('uses the handler’s own baseDelayMs and maxDelayMs', async () => {
    const slow = { ...handler, baseDelayMs: 10_000, maxDelayMs: 15_000 } as RegisteredHandler;
    await recorder.record(claimed(2, 10), slow, { kind: 'failed', error: 'x', permanent: false });
    expect(store.rows.get('7')?.retryDelayMs).toBe(11_250); // min(15000, 20000) = 15000 → 7500 + 0.5·7500
  });

  it('dead-letters a failure on the last attempt', async () => {
    await recorder.record(claimed(3, 3), handler, { kind: 'failed', error: 'still down', permanent: false });
    expect(store.calls).toEqual(['deadLetter']);
    expect(store.rows.get('7')).toMatchObject({ status: 'dead', lastError: 'still down' });
    expect(events).toEqual([{ kind: 'dead-lettered', ...base, attempt: 3, error: 'still down' }]);
    expect(logs.warn.some((message) => message.includes('dead-lettered'))).toBe(true);
  });

  it('dead-letters a failure past the last attempt', async () => {
    await recorder.record(claimed(4, 3), handler, { kind: 'failed', error: 'x', permanent: false });
    expect(store.calls).toEqual(['deadLetter']);
  });

  it('dead-letters a permanent failure at once, attempts left or not', async () => {
    await recorder.record(claimed(1, 5), handler, { kind: 'failed', error: 'invalid payload: bad', permanent: true });
    expect(store.calls).toEqual(['deadLetter']);
    expect(events).toEqual([{ kind: 'dead-lettered', ...base, attempt: 1, error: 'invalid payload: bad' }]);
  });

  describe('when the store refuses the write (lease gone)', () => {
    beforeEach(() => {
      store.rows.set('7', { status: 'processing', leaseToken: 'token-of-another-worker' });
    });

    it.each([
      ['a success', { kind: 'succeeded', resultJson: '1' }, 'complete'],
      ['a retry', { kind: 'failed', error: 'x', permanent: false }, 'scheduleRetry'],
      ['a dead letter', { kind: 'failed', error: 'x', permanent: true }, 'deadLetter'],
    ] as const)('discards %s with a lease-lost event and no throw', async (_label, outcome, call) => {
      await expect(recorder.record(claimed(1), handler, outcome)).resolves.toBeUndefined();
      expect(store.calls).toEqual([call]);
      expect(events).toEqual([{ kind: 'lease-lost', ...base, attempt: 1 }]);
      expect(store.rows.get('7')).toEqual({ status: 'processing', leaseToken: 'token-of-another-worker' });
      expect(logs.warn.some((message) => message.includes('no longer holds its lease'))).toBe(true);
    });

    it('treats a job cancelled meanwhile the same way', async () => {
      store.rows.set('7', { status: 'cancelled', leaseToken: null });
      await recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '1' });
      expect(events.map((event) => event.kind)).toEqual(['lease-lost']);
      expect(store.rows.get('7')?.status).toBe('cancelled');
    });
  });

  describe('when the store fails transiently', () => {
    it('retries the write after a pause and then records it', async () => {
      store.failures.push(unavailable('connection terminated'));
      await recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '1' });
      expect(store.calls).toEqual(['complete', 'complete']);
      expect(sleeps).toEqual([100]);
      expect(store.rows.get('7')?.status).toBe('completed');
      expect(events).toEqual([{ kind: 'completed', ...base, attempt: 1 }]);
    });

    it('retries a retry-scheduling write with the same delay', async () => {
      store.failures.push(unavailable('timeout'), unavailable('timeout'));
      await recorder.record(claimed(2), handler, { kind: 'failed', error: 'x', permanent: false });
      expect(store.calls).toEqual(['scheduleRetry', 'scheduleRetry', 'scheduleRetry']);
      expect(sleeps).toEqual([100, 250]);
      expect(events).toEqual([{ kind: 'retry-scheduled', ...base, attempt: 2, error: 'x', delayMs: 1_500 }]);
    });

    it('reports lease-lost when the write lands after the lease moved on', async () => {
      store.failures.push(unavailable('connection terminated'));
      store.rows.set('7', { status: 'processing', leaseToken: 'token-b' });
      await recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '1' });
      expect(store.calls).toEqual(['complete', 'complete']);
      expect(events.map((event) => event.kind)).toEqual(['lease-lost']);
    });

    it('gives up after its retries without throwing, logs an error, and emits nothing', async () => {
      for (let i = 0; i < 20; i++) store.failures.push(unavailable('database is away'));
      await expect(recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '1' })).resolves.toBeUndefined();
      expect(store.calls).toHaveLength(6);
      expect(sleeps).toEqual([100, 250, 500, 1_000, 2_000]);
      expect(events).toEqual([]);
      expect(logs.error).toHaveLength(1);
      expect(logs.error[0]).toContain('database is away');
      expect(store.rows.get('7')?.status).toBe('processing');
    });
  });

  describe('when the store fails for longer, while the attempt holds its lease', () => {
    it('keeps retrying, each pause at most 2 s, until the write lands', async () => {
      for (let i = 0; i < 8; i++) store.failures.push(unavailable('database is away'));
      const held = { mayKeepWriting: true };
      await recorder.record(claimed(1), handler, { kind: 'failed', error: 'x', permanent: true }, held);
      expect(store.calls).toHaveLength(9);
      expect(sleeps).toEqual([100, 250, 500, 1_000, 2_000, 2_000, 2_000, 2_000]);
      expect(store.rows.get('7')).toMatchObject({ status: 'dead', lastError: 'x' });
      expect(events.map((event) => event.kind)).toEqual(['dead-lettered']);
      expect(logs.error).toEqual([]);
    });

    it('gives up after leaseMs at most, even while renewals keep the lease (one write failing, the database up)', async () => {
      for (let i = 0; i < 50; i++) store.failures.push(unavailable('Query read timeout'));
      recorder = newRecorder({ leaseMs: 0 });
      await recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '1' }, { mayKeepWriting: true });
      expect(store.calls).toHaveLength(6);
      expect(logs.error).toHaveLength(1);
    });

    it('gives up once the lease is presumed lost, and logs an error', async () => {
      for (let i = 0; i < 50; i++) store.failures.push(unavailable('database is away'));
      const held = { mayKeepWriting: true };
      // The lease keeper presumes the lease lost during the tenth pause.
      recorder = newRecorder({ afterPause: () => sleeps.length === 10 && (held.mayKeepWriting = false) });
      await recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '1' }, held);
      expect(store.calls).toHaveLength(11);
      expect(events).toEqual([]);
      expect(logs.error).toHaveLength(1);
      expect(store.rows.get('7')?.status).toBe('processing');
    });
  });

  describe('when the database refuses a write itself', () => {
    const refused = () => new StoreRefusedDataError(Object.assign(new Error('stack depth limit exceeded'), { code: '54001' }));

    it('records a success whose result it refused as a failed attempt, with the reason', async () => {
      store.failures.push(refused());
      await recorder.record(claimed(1), handler, { kind: 'succeeded', resultJson: '1' }, { mayKeepWriting: true });
      expect(store.calls).toEqual(['complete', 'scheduleRetry']);
      expect(store.rows.get('7')).toMatchObject({
        status: 'failed',
        lastError: 'handler result could not be stored: stack depth limit exceeded',
      });
      expect(events.map((event) => event.kind)).toEqual(['retry-scheduled']);
    });

    it('gives up on any other refused write after the usual few tries, lease held or not', async () => {
      for (let i = 0; i < 20; i++) store.failures.push(refused());
      await recorder.record(claimed(2), handler, { kind: 'failed', error: 'x', permanent: false }, { mayKeepWriting: true });
      expect(store.calls).toHaveLength(6);
      expect(logs.error).toHaveLength(1);
    });

    it('gives up on a write failing for another reason (a bug) after the usual few tries, lease held or not', async () => {
      for (let i = 0; i < 20; i++) store.failures.push(Object.assign(new Error('syntax error'), { code: '42601' }));
      await recorder.record(claimed(2), handler, { kind: 'failed', error: 'x', permanent: false }, { mayKeepWriting: true });
      expect(store.calls).toHaveLength(6);
      expect(logs.error).toHaveLength(1);
    });
  });

  describe('a success in steps (the worker’s hot path)', () => {
    const completion = (leaseToken: string, heard: string[]) => ({
      lease: { id: '7', leaseToken },
      resultJson: '{"ok":1}',
      settled: (applied: boolean) => heard.push(`settled:${applied}`),
      failed: (error: unknown) => heard.push(`failed:${(error as Error).message}`),
    });
    const waitFor = async (heard: string[]) => {
      for (let i = 0; i < 20 && heard.length === 0; i++) await new Promise((resolve) => setImmediate(resolve));
    };

    it('writes the completion, then completionWritten emits completed', async () => {
      const heard: string[] = [];
      recorder.recordSuccess(completion('token-a', heard));
      await waitFor(heard);
      expect(heard).toEqual(['settled:true']);
      expect(store.rows.get('7')).toMatchObject({ status: 'completed', result: '{"ok":1}' });
      await recorder.completionWritten(claimed(1), handler, true);
      expect(events).toEqual([{ kind: 'completed', ...base, attempt: 1 }]);
    });

    it('a write that does not apply: completionWritten reports lease-lost and emits no completed', async () => {
      const heard: string[] = [];
      recorder.recordSuccess(completion('token-old', heard));
      await waitFor(heard);
      expect(heard).toEqual(['settled:false']);
      await recorder.completionWritten(claimed(1), handler, false);
      expect(events.map((event) => event.kind)).toEqual(['lease-lost']);
      expect(logs.warn[0]).toContain('no longer holds its lease');
    });

    it('a failed write: retryCompletion waits its backoff, writes again and emits completed once', async () => {
      store.failures.push(new Error('connection terminated'));
      const heard: string[] = [];
      recorder.recordSuccess(completion('token-a', heard));
      await waitFor(heard);
      expect(heard).toEqual(['failed:connection terminated']);
      expect(store.rows.get('7')?.status).toBe('processing');
      await recorder.retryCompletion(claimed(1), handler, '{"ok":1}');
      expect(store.calls).toEqual(['complete', 'complete']);
      expect(sleeps).toEqual([100]);
      expect(store.rows.get('7')).toMatchObject({ status: 'completed', result: '{"ok":1}' });
      expect(events).toEqual([{ kind: 'completed', ...base, attempt: 1 }]);
    });
  });

  describe('interrupted attempts', () => {
    it('lease-lost: writes nothing and emits lease-lost', async () => {
      await recorder.record(claimed(1), handler, { kind: 'interrupted', reason: 'lease-lost' });
      expect(store.calls).toEqual([]);
      expect(events).toEqual([{ kind: 'lease-lost', ...base, attempt: 1 }]);
    });

    it('drain: releases the job back to pending without an event', async () => {
      await recorder.record(claimed(1), handler, { kind: 'interrupted', reason: 'drain' });
      expect(store.calls).toEqual(['release']);
      expect(store.rows.get('7')?.status).toBe('pending');
      expect(events).toEqual([]);
    });

    it('drain: reports lease-lost when the job was no longer ours to release', async () => {
      store.rows.set('7', { status: 'processing', leaseToken: 'token-b' });
      await recorder.record(claimed(1), handler, { kind: 'interrupted', reason: 'drain' });
      expect(events.map((event) => event.kind)).toEqual(['lease-lost']);
    });

    it('cancelled: writes nothing (the cancel already set the status)', async () => {
      store.rows.set('7', { status: 'cancelled', leaseToken: null });
      await recorder.record(claimed(1), handler, { kind: 'interrupted', reason: 'cancelled' });
      expect(store.calls).toEqual([]);
      expect(events).toEqual([]);
    });
  });
});
