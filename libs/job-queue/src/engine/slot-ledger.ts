import type { RegisteredHandler } from '../base/registered-handler.js';

/** An attempt as the ledger counts it: its handler, and whether it holds a slot now. */
export interface SlotHolder {
  readonly handler: RegisteredHandler;
  slotHeld: boolean;
}

/**
 * The running attempts' counts: in all, per type, and transactional ones (each holds a pooled
 * connection). A slot is held from the attempt's start until its handler returns.
 */
export class SlotLedger {
  private runningNow = 0;
  private readonly byType = new Map<string, number>();
  private transactional = 0;

  constructor(
    private readonly concurrency: number,
    /** Transactional attempts at once, at most; Infinity when no handler is transactional. */
    private readonly transactionalCapacity: number,
  ) {}

  get running(): number {
    return this.runningNow;
  }

  get runningByType(): ReadonlyMap<string, number> {
    return this.byType;
  }

  get runningTransactional(): number {
    return this.transactional;
  }

  get hasFreeSlot(): boolean {
    return this.runningNow < this.concurrency;
  }

  /** Whether a slot freeing up could go to this handler's job: its type's limit and the connections allow it. */
  admits(handler: RegisteredHandler): boolean {
    if ((this.byType.get(handler.type) ?? 0) >= handler.concurrency) return false;
    return !handler.transactional || this.transactional < this.transactionalCapacity;
  }

  hold(holder: SlotHolder): void {
    if (holder.slotHeld) throw new Error(`SlotLedger: ${holder.handler.type} attempt already holds a slot`);
    holder.slotHeld = true;
    this.count(holder.handler, 1);
  }

  /** Frees the holder's slot; false if it held none (freed already). */
  release(holder: SlotHolder): boolean {
    if (!holder.slotHeld) return false;
    holder.slotHeld = false;
    this.count(holder.handler, -1);
    return true;
  }

  private count(handler: RegisteredHandler, delta: 1 | -1): void {
    this.runningNow += delta;
    this.byType.set(handler.type, (this.byType.get(handler.type) ?? 0) + delta);
    if (handler.transactional) this.transactional += delta;
  }
}
