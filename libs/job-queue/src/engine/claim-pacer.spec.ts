import { describe, expect, it } from 'vitest';
import { handlerStub } from '../base/registered-handler.stub.js';
import type { ClaimedJob, ClaimRequest } from '../persistence/job.store.js';
import type { AttemptServices } from './attempt.js';
import { ClaimBuffer } from './claim-buffer.js';
import { ClaimPacer } from './claim-pacer.js';
import { ClaimPlanner, typeCapacity } from './claim-planner.js';
import type { PrefetchSizer } from './prefetch-sizer.js';
import { handlersOf, quietLogger } from './scripted-store.stub.js';
import { SlotLedger } from './slot-ledger.js';

const a = handlerStub({ type: 'a', concurrency: 2 });
const b = handlerStub({ type: 'b', concurrency: 2 });
const job = (id: string, type = 'a'): ClaimedJob => ({ id, type, payload: null, attempt: 1, maxAttempts: 3, idempotencyKey: null, leaseToken: 't' });

/** A pacer for a worker of concurrency 2 and prefetch 100, whose rate meter reads `target` jobs of buffer. */
function pacerWith({ pollIntervalMs = 60_000, prefetch = 100 } = {}) {
  const settings = { workerId: 'w', leaseMs: 30_000, concurrency: 2, transactionalCapacity: Infinity, prefetch, pollIntervalMs };
  const handlers = handlersOf(a, b);
  const slots = new SlotLedger(2, Infinity);
  const buffer = new ClaimBuffer({ release: async () => [] }, handlers, {} as AttemptServices, quietLogger);
  const sizer = { target: 0, total: () => sizer.target, perType: () => undefined };
  const planner = new ClaimPlanner(settings, handlers.all().map(typeCapacity));
  const pacer = new ClaimPacer(settings, slots, buffer, sizer as unknown as PrefetchSizer, planner);
  const fill = (...ids: string[]) => {
    buffer.claimSent();
    buffer.land(ids.map((id) => job(id)), 0, 0);
  };
  const takeSlots = () => {
    slots.hold({ handler: a, slotHeld: false });
    slots.hold({ handler: b, slotHeld: false });
  };
  return { pacer, slots, buffer, sizer, fill, takeSlots };
}

const request = (perType: Array<[string, number]>, limit = 100): ClaimRequest => ({
  workerId: 'w',
  leaseMs: 30_000,
  limit,
  perType: perType.map(([type, typeLimit]) => ({ type, limit: typeLimit, maxAttempts: 3 })),
});

describe('ClaimPacer', () => {
  it('claims for a free slot, and plans what the free slots and the buffer allow', () => {
    const { pacer } = pacerWith();
    expect(pacer.wantsToClaim(0)).toBe(true);
    expect(pacer.plan(0)).toMatchObject({ limit: 2 });
  });

  it('pauses claims while outcomes still being written reach twice the larger of concurrency and prefetch', () => {
    const { pacer } = pacerWith();
    expect(pacer.recordingLimit).toBe(200);
    expect(pacer.wantsToClaim(199)).toBe(true);
    expect(pacer.wantsToClaim(200)).toBe(false);
    expect(pacer.plan(200)).toBeNull();
  });

  it('every slot taken: tops the buffer up only while jobs finish, once it is down to a tenth of its size', () => {
    const { pacer, sizer, fill, takeSlots } = pacerWith();
    takeSlots();
    // Nothing finished lately: a worker whose handlers all hang claims nothing to wait.
    expect(pacer.wantsToClaim(0)).toBe(false);
    sizer.target = 50;
    expect(pacer.wantsToClaim(0)).toBe(true);
    fill(...Array.from({ length: 5 }, (_, i) => String(i)));
    expect(pacer.wantsToClaim(0)).toBe(true);
    fill('5');
    expect(pacer.wantsToClaim(0)).toBe(false);
  });

  it('after a claim that came back short, waits for a notification, a poll or a freed slot of a type that had more', () => {
    const { pacer } = pacerWith();
    expect(pacer.claimAnswered(request([['a', 2], ['b', 2]]), [job('1'), job('2')], false)).toBe(false);
    expect(pacer.looksEmpty).toBe(true);
    expect(pacer.wantsToClaim(0)).toBe(false);
    // Type b came back empty; a came back full: a freed slot of b changes nothing, one of a does.
    pacer.slotFreed('b');
    expect(pacer.wantsToClaim(0)).toBe(false);
    pacer.slotFreed('a');
    expect(pacer.wantsToClaim(0)).toBe(true);
    pacer.claimAnswered(request([['a', 2]]), [], false);
    expect(pacer.wantsToClaim(0)).toBe(false);
    pacer.mayHaveWork();
    expect(pacer.wantsToClaim(0)).toBe(true);
  });

  it('reads a grouped claim as empty only when it found nothing: groups few or full make it short', () => {
    const { pacer } = pacerWith();
    const grouped: ClaimRequest = { ...request([['a', 2]]), perType: [{ type: 'a', limit: 2, maxAttempts: 3, groupMax: 1 }] };
    expect(pacer.claimAnswered(grouped, [job('1')], false)).toBe(false);
    expect(pacer.looksEmpty).toBe(false);
    pacer.claimAnswered(grouped, [], false);
    expect(pacer.looksEmpty).toBe(true);
  });

  it('after a short claim, a recorded outcome of a type whose running jobs are counted lets it claim again', () => {
    const { pacer } = pacerWith();
    const counted: ClaimRequest = {
      ...request([['a', 2], ['b', 2]]),
      perType: [
        { type: 'a', limit: 2, maxAttempts: 3, globalMax: 2 },
        { type: 'b', limit: 2, maxAttempts: 3 },
      ],
    };
    pacer.claimAnswered(counted, [], false);
    expect(pacer.wantsToClaim(0)).toBe(false);
    // b counts nothing: its outcome makes no room.
    pacer.outcomeRecorded('b');
    expect(pacer.wantsToClaim(0)).toBe(false);
    pacer.outcomeRecorded('a');
    expect(pacer.wantsToClaim(0)).toBe(true);
  });

  it('does not read a short claim as empty when a counted type recorded an outcome while it was out', () => {
    const { pacer } = pacerWith();
    const counted: ClaimRequest = { ...request([['a', 2]]), perType: [{ type: 'a', limit: 2, maxAttempts: 3, globalMax: 2 }] };
    // The first answer teaches the pacer that a's running jobs are counted.
    pacer.claimAnswered(counted, [job('1'), job('2')], false);
    expect(pacer.plan(0)).not.toBeNull();
    // The claim counted a's two jobs as running; their outcomes land before it answers.
    pacer.outcomeRecorded('a');
    pacer.claimAnswered(counted, [], false);
    expect(pacer.looksEmpty).toBe(false);
    // Planned after the outcome, an empty answer is empty.
    expect(pacer.plan(0)).not.toBeNull();
    pacer.claimAnswered(counted, [], false);
    expect(pacer.looksEmpty).toBe(true);
  });

  it('claims again once the poll interval has passed since a short claim', async () => {
    const { pacer } = pacerWith({ pollIntervalMs: 10 });
    pacer.claimAnswered(request([['a', 2]]), [], false);
    expect(pacer.wantsToClaim(0)).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 15));
    expect(pacer.wantsToClaim(0)).toBe(true);
  });

  it('a claim that came back full, or short while a notification came, does not read the queue as empty', () => {
    const { pacer } = pacerWith();
    expect(pacer.claimAnswered(request([['a', 2]]), [job('1'), job('2')], false)).toBe(true);
    expect(pacer.looksEmpty).toBe(false);
    expect(pacer.claimAnswered(request([['a', 2]]), [job('1')], true)).toBe(false);
    expect(pacer.looksEmpty).toBe(false);
  });

  it('plans a claim ahead only once the buffer’s target passes concurrency, as if the buffer had run', () => {
    const { pacer, sizer, fill } = pacerWith();
    fill('1', '2', '3');
    sizer.target = 2;
    expect(pacer.planAhead(0)).toBeNull();
    sizer.target = 10;
    // The three buffered jobs do not count: the claim ahead is for after them.
    expect(pacer.planAhead(0)).toMatchObject({ limit: 12 });
    expect(pacer.planAhead(pacer.recordingLimit)).toBeNull();
  });
});
