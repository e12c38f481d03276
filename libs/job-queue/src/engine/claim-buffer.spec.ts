import { afterEach, describe, expect, it, vi } from 'vitest';
import { handlerStub } from '../base/registered-handler.stub.js';
import type { ClaimedJob, JobStore, Lease } from '../persistence/job.store.js';
import type { Attempt, AttemptServices } from './attempt.js';
import { ClaimBuffer } from './claim-buffer.js';
import { countDecisions, drainWorkers, handlersOf, quietLogger, until, workerOn } from './scripted-store.stub.js';
import { PausedTypes } from './paused-types.js';
import { SlotLedger } from './slot-ledger.js';

const handlers = handlersOf(handlerStub({ type: 'a', concurrency: 2 }), handlerStub({ type: 'b', concurrency: 2 }));
/** Attempts in a buffer only wait: nothing here starts them. */
const services = {} as AttemptServices;

const job = (id: string, type = 'a', leaseToken = 't1'): ClaimedJob => ({
  id,
  type,
  payload: null,
  attempt: 1,
  maxAttempts: 3,
  idempotencyKey: null,
  leaseToken,
});

/** A store whose release the test answers by hand; it records each call's ids. */
function releasingStore() {
  const calls: string[][] = [];
  const answers: Array<{ resolve: (ids: string[]) => void; reject: (error: Error) => void }> = [];
  const store = {
    release: (leases: readonly Lease[]) => {
      calls.push(leases.map((lease) => lease.id));
      return new Promise<string[]>((resolve, reject) => answers.push({ resolve, reject }));
    },
  } as unknown as JobStore;
  return {
    store,
    calls,
    succeed: () => answers.shift()!.resolve(calls[calls.length - 1 - answers.length]),
    fail: () => answers.shift()!.reject(new Error('connection reset')),
  };
}

function buffer(store: Pick<JobStore, 'release'> = { release: async (leases) => leases.map((lease) => lease.id) }) {
  const warnings: string[] = [];
  const errors: string[] = [];
  const logger = { ...quietLogger, warn: (message: string) => warnings.push(message), error: (message: string) => errors.push(message) };
  return { buffer: new ClaimBuffer(store, handlers, services, logger), warnings, errors };
}

const ids = (attempts: readonly Attempt[]) => attempts.map((attempt) => attempt.id);

describe('ClaimBuffer', () => {
  it('starts filling; claimed jobs wait in claim order, counted per type, with their claim and lease times', () => {
    const { buffer: b } = buffer();
    expect(b.mode).toBe('filling');
    b.claimSent();
    b.land([job('1'), job('2', 'b'), job('3')], 50, 40);
    expect(ids(b.unstarted())).toEqual(['1', '2', '3']);
    expect(b.size).toBe(3);
    expect(b.waitingCount).toBe(3);
    expect([...b.byType]).toEqual([
      ['a', 2],
      ['b', 1],
    ]);
    expect(b.unstarted()[0]).toMatchObject({ claimedAt: 50, renewedAt: 40, leaseToken: 't1' });
  });

  it('has one claim out at a time', () => {
    const { buffer: b } = buffer();
    b.claimSent();
    expect(() => b.claimSent()).toThrow(/already out/);
    b.claimFailed();
    b.claimSent();
    b.land([], 0, 0);
    b.claimSent();
  });

  it('drops an older attempt of a job claimed again (its lease was lost), keeping the new one', () => {
    const { buffer: b, warnings } = buffer();
    b.claimSent();
    b.land([job('1'), job('2')], 0, 0);
    b.claimSent();
    b.land([job('2', 'a', 't2')], 1, 1);
    expect(b.unstarted().map((attempt) => `${attempt.id}:${attempt.leaseToken}`)).toEqual(['1:t1', '2:t2']);
    expect(b.byType.get('a')).toBe(2);
    expect(warnings).toEqual([expect.stringContaining('lost its lease before it started')]);
  });

  it('drops a cancelled job, and with a lease token only the attempt holding that lease', () => {
    const { buffer: b } = buffer();
    b.claimSent();
    b.land([job('1'), job('2')], 0, 0);
    expect(b.drop('1', 'lease-lost', 'another-token')).toBe(false);
    expect(b.drop('1', 'cancelled')).toBe(true);
    expect(b.drop('1', 'cancelled')).toBe(false);
    expect(b.drop('2', 'lease-lost', 't1')).toBe(true);
    expect(b.size).toBe(0);
    expect(b.byType.get('a')).toBe(0);
  });

  it('drops, as its claim lands, a job whose cancel was heard while the claim was out; forgets the cancels after', () => {
    const { buffer: b } = buffer();
    b.claimSent();
    expect(b.drop('2', 'cancelled')).toBe(false);
    b.land([job('1'), job('2')], 0, 0);
    expect(ids(b.unstarted())).toEqual(['1']);
    // A cancel heard while a claim without that job was out, or one that failed, is not kept.
    b.claimSent();
    b.drop('3', 'cancelled');
    b.claimFailed();
    b.claimSent();
    b.land([job('3')], 0, 0);
    expect(ids(b.unstarted())).toEqual(['1', '3']);
    // No claim out: nothing is remembered.
    b.drop('4', 'cancelled');
    b.claimSent();
    b.land([job('4')], 0, 0);
    expect(ids(b.unstarted())).toEqual(['1', '3', '4']);
  });

  it('launches waiting attempts in claim order while a slot is free, passing over types at their limit', () => {
    const { buffer: b } = buffer();
    b.claimSent();
    b.land([job('a1'), job('a2'), job('a3'), job('b1', 'b'), job('a4'), job('b2', 'b')], 0, 0);
    const slots = new SlotLedger(3, Infinity);
    const launched: Attempt[] = [];
    const starter = { launch: (attempt: Attempt) => (slots.hold(attempt), launched.push(attempt)) };
    b.startWhileAdmitted(slots, starter);
    // Type a's limit is 2: a3 waits while b1 takes the third slot.
    expect(ids(launched)).toEqual(['a1', 'a2', 'b1']);
    expect(ids(b.unstarted())).toEqual(['a3', 'a4', 'b2']);
    expect([...b.byType]).toEqual([
      ['a', 2],
      ['b', 1],
    ]);
    // a1's handler returns: a3 takes its slot, and a4 still waits for type a.
    slots.release(launched[0]);
    b.startWhileAdmitted(slots, starter);
    expect(ids(launched)).toEqual(['a1', 'a2', 'b1', 'a3']);
  });

  it('starts no attempt of a paused type, and hands those back at once when their type is paused', async () => {
    const paused = new PausedTypes();
    const released: string[][] = [];
    const store = { release: async (leases: readonly Lease[]) => (released.push(leases.map((l) => l.id)), leases.map((l) => l.id)) };
    const b = new ClaimBuffer(store, handlers, services, quietLogger, paused);
    b.claimSent();
    b.land([job('a1'), job('b1', 'b'), job('a2'), job('b2', 'b')], 10, 10);
    paused.replace(['a']);
    const slots = new SlotLedger(4, Infinity);
    const launched: Attempt[] = [];
    const starter = { launch: (attempt: Attempt) => (slots.hold(attempt), launched.push(attempt)) };
    b.startWhileAdmitted(slots, starter);
    expect(ids(launched)).toEqual(['b1', 'b2']);
    expect(ids(b.unstarted())).toEqual(['a1', 'a2']);
    expect(await b.handBackTypes(new Set(['a']))).toBe(2);
    expect(released).toEqual([['a1', 'a2']]);
    expect(b.unstarted()).toEqual([]);
    expect(b.byType.get('a')).toBe(0);
    expect(b.mode).toBe('filling');
  });

  describe('modes', () => {
    it('filling → handing-back while a hand-back is out → filling; one hand-back at a time', async () => {
      const releases = releasingStore();
      const { buffer: b } = buffer(releases.store);
      b.claimSent();
      b.land([job('1'), job('2')], 10, 10);
      b.claimSent();
      b.land([job('3')], 20, 20);
      const handingBack = b.handBack(10);
      expect(b.mode).toBe('handing-back');
      expect(releases.calls).toEqual([['1', '2']]);
      // Taken out of the waiting line, still counted as held.
      expect(b.waitingCount).toBe(1);
      expect(b.returningCount).toBe(2);
      expect(b.size).toBe(3);
      expect(await b.handBack(100)).toBe(0);
      expect(releases.calls).toHaveLength(1);
      releases.succeed();
      expect(await handingBack).toBe(2);
      expect(b.mode).toBe('filling');
      expect(ids(b.unstarted())).toEqual(['3']);
    });

    it('a failed hand-back keeps its attempts (held, not waiting) and the next one sends them again', async () => {
      const releases = releasingStore();
      const { buffer: b, warnings } = buffer(releases.store);
      b.claimSent();
      b.land([job('1'), job('2', 'b')], 10, 10);
      const first = b.handBack(10);
      releases.fail();
      expect(await first).toBe(0);
      expect(b.mode).toBe('filling');
      expect(warnings).toEqual([expect.stringContaining('Could not hand back 2')]);
      expect(b.returningCount).toBe(2);
      expect(b.byType.get('b')).toBe(0);
      // Whatever its cut-off, the next hand-back takes them.
      const second = b.handBack(0);
      expect(releases.calls).toEqual([
        ['1', '2'],
        ['1', '2'],
      ]);
      releases.succeed();
      expect(await second).toBe(2);
      expect(b.size).toBe(0);
    });

    it('filling → released: waits for a hand-back out, releases everything unstarted, then takes no claim', async () => {
      const releases = releasingStore();
      const { buffer: b } = buffer(releases.store);
      b.claimSent();
      b.land([job('1')], 10, 10);
      b.claimSent();
      b.land([job('2'), job('3')], 20, 20);
      const handingBack = b.handBack(10);
      const releasing = b.release();
      expect(b.mode).toBe('handing-back');
      releases.fail();
      await handingBack;
      await vi.waitFor(() => expect(releases.calls).toHaveLength(2));
      expect(b.mode).toBe('released');
      expect(releases.calls[1]).toEqual(['2', '3', '1']);
      releases.succeed();
      expect(await releasing).toBe(3);
      expect(b.size).toBe(0);
      expect(await b.handBack(100)).toBe(0);
      expect(() => b.land([job('4')], 0, 0)).toThrow(/after the buffer was released/);
      await expect(b.release()).rejects.toThrow(/cannot go from released to released/);
    });

    it('a release that keeps failing is tried four times, then left to the leases’ expiry', async () => {
      const failing = { release: vi.fn(async () => Promise.reject(new Error('connection reset'))) };
      const { buffer: b, errors } = buffer(failing);
      b.claimSent();
      b.land([job('1')], 0, 0);
      expect(await b.release()).toBe(0);
      expect(failing.release).toHaveBeenCalledTimes(4);
      expect(errors).toEqual([expect.stringContaining('Their leases will expire')]);
    });
  });
});

afterEach(drainWorkers);

describe('ClaimBuffer in a worker: handing back prefetched jobs', () => {
  const ids = [...Array.from({ length: 200 }, (_, i) => `fast-${i}`), 'hang-1', 'hang-2', ...Array.from({ length: 20 }, (_, i) => `tail-${i}`)];

  /**
   * A stream of short jobs grows the buffer, then two hang in both slots: the jobs claimed behind
   * them wait in the buffer. The clock stands still unless the test moves it.
   */
  async function stuckWithABuffer(fakeClock = true) {
    const clock = { now: 1_000_000 };
    const ran: string[] = [];
    const hung: Array<() => void> = [];
    const { store, worker } = workerOn(
      handlerStub({
        type: 'unit.job',
        concurrency: 2,
        invoke: (payload) => {
          const { id } = payload as { id: string };
          ran.push(id);
          return id.startsWith('hang') ? new Promise<void>((resolve) => hung.push(resolve)) : undefined;
        },
      }),
      { concurrency: 2, prefetch: 100, now: fakeClock ? () => clock.now : undefined },
    );
    store.queue(...ids);
    worker.start();
    await until(() => store.completed.length === 200 && worker.inFlight === 2, 'the fast jobs done and both hung ones running');
    const buffered = worker.heldLeases().map((lease) => lease.id).filter((id) => id.startsWith('tail'));
    expect(buffered.length).toBeGreaterThan(0);
    return { clock, ran, hung, store, worker, buffered };
  }

  it('hands back those that waited as long as asked since their claim, and does not claim them again while its slots stay stuck', async () => {
    const { clock, store, worker, buffered } = await stuckWithABuffer();
    expect(await worker.handBackWaiting(1)).toBe(0);
    expect(store.released).toEqual([]);

    // A second on, nothing has finished for a while.
    clock.now += 1_000;
    expect(await worker.handBackWaiting(1_000)).toBe(buffered.length);
    expect(store.released).toEqual(buffered);
    expect(worker.heldLeases().map((lease) => lease.id).sort()).toEqual(['hang-1', 'hang-2']);
    // Back in the queue (as the real store puts them) and announced: the stuck worker leaves them there.
    store.queue(...buffered);
    const waiting = store.waiting.length;
    const decisions = countDecisions(worker);
    worker.nudge();
    await until(() => decisions() >= 5, 'five rounds of the claim loop');
    expect(store.waiting).toHaveLength(waiting);
  });

  it('measures how long they waited on a clock the wall clock’s steps do not move', async () => {
    // Only the wall clock is faked (Date, moving with real time), from before the worker exists.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    try {
      const { worker, buffered } = await stuckWithABuffer(false);
      // The wall clock steps back an hour (NTP, a resumed VM) just after the claim.
      vi.setSystemTime(Date.now() - 3_600_000);
      const waitedFrom = performance.now();
      await until(() => performance.now() - waitedFrom >= 5, '5 ms');
      expect(await worker.handBackWaiting(5)).toBe(buffered.length);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps the jobs of a hand-back that failed leased, renewed and unstarted, and hands them back at the next try', async () => {
    const { clock, ran, hung, store, worker, buffered } = await stuckWithABuffer();
    const release = store.release.bind(store);
    store.release = async () => {
      throw new Error('connection reset');
    };
    clock.now += 1_000;
    expect(await worker.handBackWaiting(1_000)).toBe(0);
    expect(worker.heldLeases().map((lease) => lease.id)).toEqual(expect.arrayContaining(['hang-1', 'hang-2', ...buffered]));

    // A slot frees and the worker goes on to a new job, but none of those jobs starts here.
    clock.now += 1;
    store.queue('fresh');
    hung[0]();
    worker.nudge();
    await until(() => store.completed.includes('fresh'), 'a new job run in the freed slot');
    expect(ran.filter((id) => buffered.includes(id))).toEqual([]);

    // The next try takes them, whatever their age, and nothing claimed since.
    store.release = release;
    expect(await worker.handBackWaiting(1_000)).toBe(buffered.length);
    expect(store.released).toEqual(buffered);
    expect(worker.heldLeases().map((lease) => lease.id).filter((id) => buffered.includes(id))).toEqual([]);
  });

  it('while a hand-back keeps failing, counts its jobs as buffered: a freed slot claims only for itself', async () => {
    const { clock, hung, store, worker, buffered } = await stuckWithABuffer();
    expect(buffered.length).toBeGreaterThanOrEqual(5);
    store.release = async () => {
      throw new Error('connection reset');
    };
    clock.now += 1_000;
    expect(await worker.handBackWaiting(1_000)).toBe(0);
    const limits: number[] = [];
    const claim = store.claim.bind(store);
    store.claim = (request) => (limits.push(request.limit), claim(request));
    // A slot frees: one job finished just now reads as 20 jobs/s, a buffer of 2, which the jobs
    // still to be handed back already fill.
    clock.now += 1;
    store.queue('fresh-1', 'fresh-2', 'fresh-3');
    hung[0]();
    worker.nudge();
    await until(() => limits.length > 0, 'a claim for the freed slot');
    expect(limits[0]).toBe(1);
  });

  it('a drain whose hand-back fails tries it again', async () => {
    const { store, worker, buffered, hung } = await stuckWithABuffer(false);
    store.failReleases = 2;
    const draining = worker.drain(5_000);
    await until(() => buffered.every((id) => store.released.includes(id)), 'the buffered jobs handed back');
    for (const finish of hung) finish();
    expect(await draining).toEqual({ finished: 2, released: buffered.length });
  });

  it('a drain after a hand-back that failed releases those jobs too', async () => {
    const { clock, store, worker, buffered } = await stuckWithABuffer();
    const release = store.release.bind(store);
    store.release = async () => {
      store.release = release;
      throw new Error('connection reset');
    };
    clock.now += 1_000;
    expect(await worker.handBackWaiting(1_000)).toBe(0);
    await worker.drain(20);
    expect(store.released).toEqual(expect.arrayContaining(buffered));
    expect(buffered.filter((id) => store.leases.has(id))).toEqual([]);
  });
});

