import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { handlerStub } from '../base/registered-handler.stub.js';
import type { JobQueueEvent } from '../events/job-queue-event.js';
import { countDecisions, drainWorkers, ScriptedStore, tick, until, workerOn } from './scripted-store.stub.js';
import type { Worker } from './worker.js';

/** A started worker that polls an hour apart, past its claim at start; `claimedAt`: each claim's performance.now(). */
async function idleWorker(): Promise<{ worker: Worker; claimedAt: number[] }> {
  const { store, worker } = workerOn(handlerStub({ type: 'unit.job', concurrency: 4, invoke: () => null }), { pollIntervalMs: 600_000 });
  const claimedAt: number[] = [];
  const claim = store.claim.bind(store);
  store.claim = (request) => (claimedAt.push(performance.now()), claim(request));
  worker.start();
  await until(() => claimedAt.length >= 1, 'the claim at start');
  return { worker, claimedAt };
}

/**
 * Watches the claims as the store takes them, a tick after each call (as a pool hands out a
 * connection), noting how many handlers had started by then. Returns the claims taken before any
 * handler started since the one before, while jobs were still waiting: claims sent ahead.
 */
function watchClaims(store: ScriptedStore, started: () => number): { taken: number[]; ahead: () => number[] } {
  const taken: number[] = [];
  const waiting: number[] = [];
  const claim = store.claim.bind(store);
  store.claim = (request) =>
    new Promise((resolve) =>
      process.nextTick(() => {
        taken.push(started());
        waiting.push(store.waiting.length);
        resolve(claim(request));
      }),
    );
  return { taken, ahead: () => taken.map((_, i) => i).filter((i) => i > 0 && waiting[i] > 0 && taken[i] === taken[i - 1]) };
}

/** The ids each claim took, in claim order, as the claims come back. */
function claimedIds(store: ScriptedStore): string[][] {
  const claims: string[][] = [];
  const claim = store.claim.bind(store);
  store.claim = async (request) => {
    const jobs = await claim(request);
    claims.push(jobs.map((job) => job.id));
    return jobs;
  };
  return claims;
}

/**
 * 200 short jobs at concurrency 4 with prefetch. `whileAheadIsOut` runs once, inside the batch of
 * the second claim, while the third (sent ahead of that batch) is out and its rows not buffered.
 */
function withClaimAheadOut(whileAheadIsOut: (worker: Worker, ahead: readonly string[]) => void) {
  const ran: string[] = [];
  let fired = false;
  const { store, worker } = workerOn(
    handlerStub({
      type: 'unit.job',
      concurrency: 4,
      invoke: (payload) => {
        ran.push((payload as { id: string }).id);
        if (claims.length === 3 && !fired) {
          fired = true;
          whileAheadIsOut(worker, claims[2]);
        }
      },
    }),
    { prefetch: 100 },
  );
  const claims = claimedIds(store);
  store.queue(...Array.from({ length: 200 }, (_, i) => String(i)));
  worker.start();
  return { store, ran, claims };
}

afterEach(drainWorkers);

describe('Worker', () => {
  it('at a drain timeout interrupts only handlers still running; a finished one whose write is in flight keeps its lease and is recorded', async () => {
    let releaseSlow: () => void = () => undefined;
    const handler = handlerStub({
      type: 'unit.job',
      concurrency: 4,
      invoke: (payload) =>
        (payload as { id: string }).id === 'slow' ? new Promise<void>((resolve) => (releaseSlow = resolve)) : undefined,
    });
    const { store, worker } = workerOn(handler);
    store.holdCompletions();
    store.queue('quick', 'slow');
    worker.start();
    await until(() => worker.inFlight === 2, 'both jobs started');
    // quick has finished and waits for its write; slow is still running.
    expect(worker.heldLeases().map((lease) => lease.id).sort()).toEqual(['quick', 'slow']);
    const draining = worker.drain(30);
    await new Promise((resolve) => setTimeout(resolve, 60));
    // slow was interrupted and released; quick was not interrupted and still holds its lease.
    await until(() => store.released.includes('slow'), 'slow released');
    expect(worker.heldLeases().map((lease) => lease.id)).toEqual(['quick']);
    store.releaseCompletions();
    expect(await draining).toEqual({ finished: 1, released: 1 });
    expect(store.completed).toEqual(['quick']);
    // A second drain, asked for at any time, is the same one.
    expect(await worker.drain(30)).toEqual({ finished: 1, released: 1 });
    releaseSlow();
  });

  it('retries a failing completion write while the lease is held; after a drain timeout it gives up, and the drain ends', async () => {
    const handler = handlerStub({ type: 'unit.job', concurrency: 4 });
    const { store, worker } = workerOn(handler, { writePause: tick });
    store.failCompletions = true;
    store.queue('a');
    worker.start();
    // Past the few tries a write makes when nothing holds its lease.
    await until(() => store.completionTries >= 10, 'the write to be retried while the lease is held');
    expect(worker.heldLeases().map((lease) => lease.id)).toEqual(['a']);
    await worker.drain(10);
    expect(worker.inFlight).toBe(0);
    expect(store.completed).toEqual([]);
  });

  it('a job claimed again while its stale attempt’s completion is in flight: only the new attempt’s write applies', async () => {
    const handler = handlerStub({ type: 'unit.job', concurrency: 4 });
    const { store, worker, events } = workerOn(handler);
    store.holdCompletions();
    store.queue('7');
    worker.start();
    await until(() => worker.inFlight === 1, 'first attempt started');
    // Its lease is lost (reaped) and the job comes back to this same worker.
    store.leases.delete('7');
    store.queue('7');
    worker.nudge();
    await until(() => store.waiting.length === 0, 'job claimed again');
    store.releaseCompletions();
    await until(() => worker.inFlight === 0, 'both attempts recorded');
    expect(store.completed).toEqual(['7']);
    expect(events.map((event) => event.kind).sort()).toEqual(['completed', 'lease-lost']);
  });

  it('a rate-limited job interrupted while its start is being recorded does not run', async () => {
    const ran: string[] = [];
    const handler = handlerStub({
      type: 'unit.job',
      concurrency: 4,
      rateLimit: { max: 100, perMs: 1_000 },
      invoke: (payload) => void ran.push((payload as { id: string }).id),
    });
    const { store, worker } = workerOn(handler);
    store.holdStarts();
    store.queue('9');
    worker.start();
    await until(() => worker.inFlight === 1, 'job launched');
    worker.interrupt('9', 'cancelled');
    store.releaseStarts();
    await until(() => worker.inFlight === 0, 'attempt ended');
    expect(store.started).toEqual(['9']);
    expect(ran).toEqual([]);
    expect(store.completed).toEqual([]);
  });

  it('a listener that throws while its completion is settled does not keep the rest of the batch from hearing back', async () => {
    const handler = handlerStub({ type: 'unit.job', concurrency: 8 });
    const { store, worker, events } = workerOn(handler, { concurrency: 8 });
    // The first completed event's subscriber throws (an EventSink must not, but one might).
    let thrown = false;
    (events as unknown as { push: (event: Omit<JobQueueEvent, 'at'>) => number }).push = function (event) {
      if (!thrown) {
        thrown = true;
        throw new Error('subscriber failed');
      }
      return Array.prototype.push.call(this, event);
    };
    store.queue('1', '2', '3', '4');
    worker.start();
    await until(() => store.completed.length === 4, 'all four completed');
    await until(() => worker.inFlight === 0, 'all four recorded');
    expect(thrown).toBe(true);
    await tick();
  });
  it('a worker that ran dry waiting for a full claim sends the next claim before it runs the batch', async () => {
    let runs = 0;
    const { store, worker } = workerOn(handlerStub({ type: 'unit.job', concurrency: 4, invoke: () => void runs++ }), { prefetch: 100 });
    const claims = watchClaims(store, () => runs);
    store.queue(...Array.from({ length: 300 }, (_, i) => String(i)));
    worker.start();
    await until(() => store.completed.length === 300, 'all 300 completed');
    // The first claims ramp up one after the other; once the rate is known, a claim is taken
    // before the batch it follows has run.
    expect(claims.taken[1]).toBeGreaterThan(0);
    expect(claims.ahead().length).toBeGreaterThan(0);
  });

  it('an idle worker meeting a burst of slow jobs claims no batch ahead', async () => {
    let starts = 0;
    const { store, worker } = workerOn(
      handlerStub({
        type: 'unit.job',
        concurrency: 4,
        invoke: () => {
          starts++;
          return new Promise<void>((resolve) => setTimeout(resolve, 30));
        },
      }),
      { prefetch: 100 },
    );
    const claims = watchClaims(store, () => starts);
    store.queue(...Array.from({ length: 24 }, (_, i) => String(i)));
    worker.start();
    await until(() => store.completed.length === 24, 'all 24 completed');
    // Every claim but the first waited for jobs to start (a slot freed): none went out ahead.
    expect(claims.ahead()).toEqual([]);
  });

  it('without prefetch, claims only for free slots: never ahead of the batch', async () => {
    let runs = 0;
    const { store, worker } = workerOn(handlerStub({ type: 'unit.job', concurrency: 4, invoke: () => void runs++ }), { prefetch: 0 });
    const runsAtClaim: number[] = [];
    const claim = store.claim.bind(store);
    store.claim = (request) => (runsAtClaim.push(runs), claim(request));
    store.queue(...Array.from({ length: 12 }, (_, i) => String(i)));
    worker.start();
    await until(() => store.completed.length === 12, 'all 12 completed');
    expect(runsAtClaim.slice(0, 3)).toEqual([0, 4, 8]);
  });

  it('a drain that begins while a claim sent ahead is out hands that claim’s jobs back, unstarted', async () => {
    let draining: Promise<{ finished: number; released: number }> | null = null;
    const { store, ran, claims } = withClaimAheadOut((worker) => (draining = worker.drain(1_000)));
    await until(() => draining !== null, 'the drain begun');
    const { released } = await draining!;
    // Claimed: the first batch, then the second with the third sent ahead of it; nothing after.
    expect(claims).toHaveLength(3);
    expect(released).toBeGreaterThan(0);
    expect([...store.released].sort()).toEqual([...claims[2]].sort());
    expect(ran.filter((id) => claims[2].includes(id))).toEqual([]);
    expect(ran).toEqual([...claims[0], ...claims[1]]);
    // Nothing is left leased: every claimed job was either completed or handed back.
    expect(store.leases.size).toBe(0);
  });

  it('a worker whose every slot is held by a handler that does not finish claims nothing more to wait', async () => {
    const { store, worker } = workerOn(
      handlerStub({ type: 'unit.job', concurrency: 2, invoke: () => new Promise<void>(() => undefined) }),
      { concurrency: 2, prefetch: 100 },
    );
    let claims = 0;
    const claim = store.claim.bind(store);
    store.claim = (request) => (claims++, claim(request));
    const decisions = countDecisions(worker);
    store.queue(...Array.from({ length: 10 }, (_, i) => String(i)));
    worker.start();
    await until(() => worker.inFlight === 2, 'both slots taken');
    // Notifications and polls (every 20 ms) come and go: nothing finishes, so nothing is claimed to wait.
    const before = decisions();
    worker.nudge();
    await until(() => decisions() >= before + 5, 'five more rounds of the claim loop');
    expect(store.waiting).toHaveLength(8);
    expect(claims).toBe(1);
    expect(worker.heldLeases().map((lease) => lease.id)).toEqual(['0', '1']);
  });

  it('drops a job whose cancel is heard while the claim that took it is still out: its handler never runs', async () => {
    const ran: string[] = [];
    const { store, worker } = workerOn(
      handlerStub({
        type: 'unit.job',
        invoke: (payload) => {
          ran.push((payload as { id: string }).id);
        },
      }),
    );
    // A claim called while `held` is set takes its jobs, then waits for the test to let it come back.
    let held: Promise<void> | null = null;
    let letBack = () => undefined as void;
    const hold = () => (held = new Promise<void>((resolve) => (letBack = () => ((held = null), resolve()))));
    const claim = store.claim.bind(store);
    let claims = 0;
    store.claim = async (request) => {
      claims++;
      const gate = held;
      const jobs = await claim(request);
      await gate;
      return jobs;
    };
    store.queue('a', 'b');
    hold();
    worker.start();
    await until(() => claims === 1, 'the claim sent');
    // The claim has taken both; a cancel of 'a' commits and its notification comes first.
    worker.interrupt('a', 'cancelled');
    letBack();
    await until(() => store.completed.includes('b'), 'b run');
    expect(ran).toEqual(['b']);
    expect(worker.heldLeases().map((lease) => lease.id)).toEqual([]);

    // A cancel heard while a claim without that job is out is forgotten once the claim is back.
    hold();
    const before = claims;
    await until(() => claims > before, 'another claim out');
    worker.interrupt('c', 'cancelled');
    letBack();
    store.queue('c');
    worker.nudge();
    await until(() => store.completed.includes('c'), 'c run');
    expect(ran).toEqual(['b', 'c']);
  });

  it('drops a job whose cancel is heard while the claim sent ahead that took it is out', async () => {
    let cancelled: string | null = null;
    const { store, ran } = withClaimAheadOut((worker, ahead) => {
      cancelled = ahead[0];
      worker.interrupt(cancelled, 'cancelled');
    });
    const ids = Array.from({ length: 200 }, (_, i) => String(i));
    await until(() => store.completed.length === 199, 'every other job completed');
    expect(cancelled).not.toBeNull();
    expect(ran).not.toContain(cancelled);
    expect([...ran].sort()).toEqual(ids.filter((id) => id !== cancelled).sort());
  });

  it('claims at every poll even when its timer fires early on the monotonic clock', async () => {
    const { store, worker } = workerOn(handlerStub({ type: 'unit.job', concurrency: 4 }), { pollIntervalMs: 20 });
    let claims = 0;
    const claim = store.claim.bind(store);
    store.claim = (request) => (claims++, claim(request));
    // A clock that stands still: every poll timer looks early on it (a timer can fire up to a
    // millisecond before its interval has passed on performance.now()).
    const frozen = performance.now();
    const clock = vi.spyOn(performance, 'now').mockReturnValue(frozen);
    try {
      worker.start();
      await until(() => claims >= 4, 'a claim at each poll');
    } finally {
      clock.mockRestore();
    }
  });

  describe('a wall-clock step (NTP, a resumed VM)', () => {
    // Only the wall clock is faked (Date, moving with real time); timers and performance.now keep real time.
    beforeEach(() => vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true }));
    afterEach(() => vi.useRealTimers());

    it('does not put off a due wake-up when the clock steps back', async () => {
      const { worker, claimedAt } = await idleWorker();
      const from = performance.now();
      worker.wakeIn(100);
      vi.setSystemTime(Date.now() - 3_600_000);
      await until(() => claimedAt.length >= 2, 'the wake-up 100 ms later');
      expect(claimedAt[1] - from).toBeGreaterThanOrEqual(100);
    });

    it('does not read as stuck to liveness when the clock steps forward', async () => {
      const { worker } = await idleWorker();
      vi.setSystemTime(Date.now() + 3_600_000);
      expect(worker.silentForMs).toBeLessThan(60_000);
    });
  });
});
