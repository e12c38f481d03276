import { describe, expect, it } from 'vitest';
import { handlerStub } from '../base/registered-handler.stub.js';
import { SlotLedger, type SlotHolder } from './slot-ledger.js';

const mail = handlerStub({ type: 'mail', concurrency: 2 });
const ledgerPost = handlerStub({ type: 'ledger.post', concurrency: 5, transactional: true });
const holder = (handler = mail): SlotHolder => ({ handler, slotHeld: false });

describe('SlotLedger', () => {
  it('counts running attempts in all, per type and transactional ones', () => {
    const slots = new SlotLedger(10, Infinity);
    const held = [holder(), holder(ledgerPost), holder(ledgerPost)];
    for (const h of held) slots.hold(h);
    expect(slots.running).toBe(3);
    expect([...slots.runningByType]).toEqual([
      ['mail', 1],
      ['ledger.post', 2],
    ]);
    expect(slots.runningTransactional).toBe(2);
    expect(held.every((h) => h.slotHeld)).toBe(true);
    slots.release(held[1]);
    expect(slots.running).toBe(2);
    expect(slots.runningByType.get('ledger.post')).toBe(1);
    expect(slots.runningTransactional).toBe(1);
  });

  it('has a free slot below its concurrency', () => {
    const slots = new SlotLedger(2, Infinity);
    const first = holder();
    slots.hold(first);
    expect(slots.hasFreeSlot).toBe(true);
    slots.hold(holder());
    expect(slots.hasFreeSlot).toBe(false);
    slots.release(first);
    expect(slots.hasFreeSlot).toBe(true);
  });

  it('admits a type below its own concurrency, and a transactional one while a connection is spare', () => {
    const slots = new SlotLedger(10, 1);
    slots.hold(holder());
    expect(slots.admits(mail)).toBe(true);
    slots.hold(holder());
    expect(slots.admits(mail)).toBe(false);
    expect(slots.admits(ledgerPost)).toBe(true);
    slots.hold(holder(ledgerPost));
    expect(slots.admits(ledgerPost)).toBe(false);
  });

  it('frees a slot once: a second release is a no-op, and a second hold of one attempt is a bug', () => {
    const slots = new SlotLedger(10, Infinity);
    const h = holder();
    slots.hold(h);
    expect(() => slots.hold(h)).toThrow(/already holds a slot/);
    expect(slots.release(h)).toBe(true);
    expect(slots.release(h)).toBe(false);
    expect(slots.running).toBe(0);
    expect(slots.runningByType.get('mail')).toBe(0);
  });
});
