import { describe, expect, it } from 'vitest';
import { handlerStub } from '../base/registered-handler.stub.js';
import { Attempt, type AttemptServices } from './attempt.js';
import { InFlightAttempts } from './in-flight-attempts.js';

const attempt = (id: string, leaseToken = 't1') =>
  new Attempt({ id, type: 'a', payload: null, attempt: 1, maxAttempts: 3, idempotencyKey: null, leaseToken }, handlerStub(), 0, 0, {} as AttemptServices);

describe('InFlightAttempts', () => {
  it('removes an attempt only if it is the one held for its job (a newer attempt may have taken the id)', () => {
    const inFlight = new InFlightAttempts();
    const stale = attempt('1', 't1');
    const fresh = attempt('1', 't2');
    inFlight.add(stale);
    inFlight.add(fresh);
    inFlight.remove(stale);
    expect(inFlight.get('1')).toBe(fresh);
    inFlight.remove(fresh);
    expect(inFlight.size).toBe(0);
  });

  it('renews the leases of attempts not interrupted', () => {
    const inFlight = new InFlightAttempts();
    const kept = attempt('1');
    const lost = attempt('2');
    inFlight.add(kept);
    inFlight.add(lost);
    lost.interrupt('lease-lost', new Error('lease lost'));
    expect(inFlight.leases()).toEqual([kept]);
  });

  it('resolves untilEmpty when the last attempt is over, or at the deadline', async () => {
    const inFlight = new InFlightAttempts();
    const one = attempt('1');
    inFlight.add(one);
    const from = performance.now();
    await inFlight.untilEmpty(from + 20);
    expect(performance.now() - from).toBeGreaterThanOrEqual(19);
    const waiting = inFlight.untilEmpty(Infinity);
    inFlight.remove(one);
    await waiting;
  });

  it('at a drain timeout interrupts the attempts whose handler still runs, and marks every one timed out', () => {
    const inFlight = new InFlightAttempts();
    const running = attempt('1');
    running.slotHeld = true;
    const writing = attempt('2');
    inFlight.add(running);
    inFlight.add(writing);
    expect(inFlight.timeOut(30)).toBe(1);
    expect(running.interruption).toBe('drain');
    expect(running.signal.reason).toMatchObject({ message: 'shutdown: drain timed out after 30 ms; the job is released' });
    expect(writing.interruption).toBeNull();
    expect([running.drainTimedOut, writing.drainTimedOut]).toEqual([true, true]);
  });
});
