import type { EngineLogger } from '../base/logger.js';
import type { HandlerLookup, RegisteredHandler } from '../base/registered-handler.js';
import type { ClaimedJob, JobStore, Lease } from '../persistence/job.store.js';
import { Attempt, type AttemptServices } from './attempt.js';
import type { PausedTypes } from './paused-types.js';
import type { SlotLedger } from './slot-ledger.js';

/**
 * - filling: claims land, and waiting attempts start as slots free;
 * - handing-back: the same, while one hand-back of attempts that waited too long is in flight;
 * - released: a drain handed every unstarted attempt back; nothing lands or starts any more.
 */
export type ClaimBufferMode = 'filling' | 'handing-back' | 'released';

const NEXT_MODES: Readonly<Record<ClaimBufferMode, readonly ClaimBufferMode[]>> = {
  filling: ['handing-back', 'released'],
  'handing-back': ['filling'],
  released: [],
};

/** Pauses between tries of a drain's release; a job left to its lease's expiry loses an attempt. */
const RELEASE_RETRY_DELAYS_MS = [100, 250, 500];

/** Takes the attempts the buffer hands out (the worker). */
export interface AttemptStarter {
  launch(attempt: Attempt): void;
}

/**
 * Claimed attempts not started yet, in claim order (graphile-worker's LocalQueue plays this
 * part): the prefetch buffer. It drops an attempt whose job was cancelled or claimed again, hands
 * back those that waited too long for a slot, and at a drain releases the rest.
 */
export class ClaimBuffer {
  private current: ClaimBufferMode = 'filling';
  private readonly waiting: Attempt[] = [];
  private readonly waitingByType = new Map<string, number>();
  /**
   * Taken out to be handed back, until the database has them: never started, and renewed
   * meanwhile, so a hand-back that fails is tried again rather than left to the reaper (which
   * would count an attempt that never ran).
   */
  private readonly returning: Attempt[] = [];
  private handingBack: Promise<number> | null = null;
  /** Set while attempts are launched: one that finishes synchronously must not launch the next from within. */
  private starting = false;
  private claimOut = false;
  /**
   * Cancels heard while a claim was out: the cancel may have committed just after that claim took
   * the job, its notification arriving before the claim's rows. Those jobs are dropped as the
   * rows land, so a job cancelled before it started never starts.
   */
  private readonly cancelledWhileClaiming = new Set<string>();

  constructor(
    private readonly store: Pick<JobStore, 'release'>,
    private readonly handlers: HandlerLookup,
    private readonly services: AttemptServices,
    private readonly logger: EngineLogger,
    /** Types paused by an operator: their attempts wait here, or go back, never start. */
    private readonly paused: Pick<PausedTypes, 'has'> = { has: () => false },
  ) {}

  get mode(): ClaimBufferMode {
    return this.current;
  }

  /**
   * Claimed attempts not started: waiting, or being handed back. Those being handed back take
   * room too, so hand-backs that keep failing cannot grow what the worker holds pass after pass.
   */
  get size(): number {
    return this.waiting.length + this.returning.length;
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  get returningCount(): number {
    return this.returning.length;
  }

  /** Waiting attempts per type (not those being handed back). */
  get byType(): ReadonlyMap<string, number> {
    return this.waitingByType;
  }

  /** Every unstarted attempt (their leases are renewed). */
  unstarted(): Attempt[] {
    return [...this.waiting, ...this.returning];
  }

  /** Whether a claim is on its way back. */
  get claimOutstanding(): boolean {
    return this.claimOut;
  }

  /** A claim is on its way (one at a time). */
  claimSent(): void {
    if (this.claimOut) throw new Error('ClaimBuffer: a claim is already out');
    this.claimOut = true;
  }

  /** The claim out failed: it claimed nothing. */
  claimFailed(): void {
    this.claimOut = false;
    this.cancelledWhileClaiming.clear();
  }

  /**
   * The claim out is back: its jobs join the buffer in claim order, stamped `claimedAt`, their
   * leases counting from `sentAt` (the database's began no earlier). Older attempts of the same
   * jobs, and jobs cancelled while the claim was out, are dropped.
   */
  land(claimed: readonly ClaimedJob[], claimedAt: number, sentAt: number): void {
    if (this.current === 'released') throw new Error('ClaimBuffer: a claim landed after the buffer was released');
    this.claimOut = false;
    this.dropStale(claimed);
    for (const job of claimed) {
      this.waiting.push(new Attempt(job, this.handlers.get(job.type) as RegisteredHandler, claimedAt, sentAt, this.services));
      this.count(job.type, 1);
    }
    if (this.cancelledWhileClaiming.size === 0) return;
    for (const job of claimed) if (this.cancelledWhileClaiming.has(job.id)) this.drop(job.id, 'cancelled');
    this.cancelledWhileClaiming.clear();
  }

  /**
   * Drops a job's unstarted attempt; true if one was here. With `leaseToken`, only the attempt
   * holding that lease: a lease reported lost must not drop a newer attempt of the same job.
   */
  drop(jobId: string, reason: 'lease-lost' | 'cancelled', leaseToken?: string): boolean {
    const holds = (lease: Lease) => lease.id === jobId && (leaseToken === undefined || lease.leaseToken === leaseToken);
    // Even if it matches an attempt here: the claim out may hold a newer one (this one's lease
    // lost, the job claimed again). A cancelled job never becomes claimable again.
    if (reason === 'cancelled' && leaseToken === undefined && this.claimOut) this.cancelledWhileClaiming.add(jobId);
    // Being handed back: the database has let it go already, or will.
    const returning = this.returning.findIndex(holds);
    if (returning >= 0) {
      this.returning.splice(returning, 1);
      return true;
    }
    const index = this.waiting.findIndex(holds);
    if (index < 0) return false;
    const [dropped] = this.waiting.splice(index, 1);
    this.count(dropped.job.type, -1);
    if (reason === 'lease-lost') this.logger.warn(`Job ${jobId} (${dropped.job.type}) lost its lease before it started; dropped.`);
    return true;
  }

  /**
   * Launches waiting attempts, in claim order, while the ledger has a slot their type may take.
   * Called again from within (a slot freed by an attempt that finished synchronously), it does
   * nothing: the pass under way goes on with that slot.
   */
  startWhileAdmitted(slots: SlotLedger, starter: AttemptStarter): void {
    if (this.starting) return;
    this.starting = true;
    try {
      const waiting = this.waiting;
      for (let i = 0; i < waiting.length && slots.hasFreeSlot; ) {
        const attempt = waiting[i];
        if (!slots.admits(attempt.handler) || this.paused.has(attempt.job.type)) {
          i++;
          continue;
        }
        if (i === 0) waiting.shift();
        else waiting.splice(i, 1);
        this.count(attempt.job.type, -1);
        starter.launch(attempt);
      }
    } finally {
      this.starting = false;
    }
  }

  /**
   * Hands back the attempts claimed at or before `claimedBefore`, and those of a hand-back that
   * failed, their claim's attempt undone, for any worker to take; resolves to how many went back.
   * One hand-back at a time; none once released.
   */
  handBack(claimedBefore: number): Promise<number> {
    if (this.current !== 'filling') return Promise.resolve(0);
    // In claim order: the attempts that waited longest lead.
    let waited = 0;
    while (waited < this.waiting.length && this.waiting[waited].claimedAt <= claimedBefore) waited++;
    for (const attempt of this.waiting.splice(0, waited)) {
      this.count(attempt.job.type, -1);
      this.returning.push(attempt);
    }
    return this.sendBack('that found no free slot here since their claim');
  }

  /** Hands back the waiting attempts of types just paused, so they wait in the database, visibly. */
  handBackTypes(types: ReadonlySet<string>): Promise<number> {
    // After the hand-back under way, not instead of it; none once released.
    if (this.current === 'handing-back') return this.handingBack!.then(() => this.handBackTypes(types));
    if (this.current !== 'filling') return Promise.resolve(0);
    let kept = 0;
    for (const attempt of this.waiting) {
      if (types.has(attempt.job.type)) {
        this.count(attempt.job.type, -1);
        this.returning.push(attempt);
      } else {
        this.waiting[kept++] = attempt;
      }
    }
    this.waiting.length = kept;
    return this.sendBack('of a type just paused');
  }

  /** Releases what `returning` holds, their claim's attempt undone; resolves to how many went back. */
  private sendBack(why: string): Promise<number> {
    if (this.returning.length === 0) return Promise.resolve(0);
    const batch = [...this.returning];
    this.enter('handing-back');
    this.handingBack = this.store.release(batch).then(
      (ids) => {
        this.handedBack(batch);
        if (ids.length > 0) this.logger.log(`Handed back ${ids.length} prefetched job(s) ${why}; any worker can take them.`);
        return ids.length;
      },
      (error: unknown) => {
        this.handedBack(null);
        this.logger.warn(
          `Could not hand back ${batch.length} prefetched job(s): ${(error as Error)?.message}. This worker keeps their leases, starts none of them, and tries again at its next lease renewal.`,
        );
        return 0;
      },
    );
    return this.handingBack;
  }

  /**
   * A drain: once any hand-back is over, releases every unstarted attempt back to pending, their
   * claim's attempt undone, trying a few times; resolves to how many went back.
   */
  async release(): Promise<number> {
    await this.handingBack;
    this.enter('released');
    const unstarted = [...this.waiting.splice(0), ...this.returning.splice(0)];
    this.waitingByType.clear();
    if (unstarted.length === 0) return 0;
    for (let tries = 0; ; tries++) {
      try {
        return (await this.store.release(unstarted)).length;
      } catch (error) {
        if (tries >= RELEASE_RETRY_DELAYS_MS.length) {
          this.logger.error(
            `Could not hand back ${unstarted.length} unstarted job(s): ${(error as Error)?.message}. ` +
              'Their leases will expire and they will be retried.',
          );
          return 0;
        }
        await new Promise((resolve) => setTimeout(resolve, RELEASE_RETRY_DELAYS_MS[tries]));
      }
    }
  }

  /** A hand-back is over; `sent` left the database's hands whether released or not (their leases gone). */
  private handedBack(sent: readonly Attempt[] | null): void {
    if (sent) {
      const gone = new Set(sent);
      let kept = 0;
      for (const attempt of this.returning) if (!gone.has(attempt)) this.returning[kept++] = attempt;
      this.returning.length = kept;
    }
    this.handingBack = null;
    this.enter('filling');
  }

  /** The database hands a job out again only once its lease is gone: an attempt of it still here is stale. */
  private dropStale(claimed: readonly ClaimedJob[]): void {
    if (this.waiting.length === 0 && this.returning.length === 0) return;
    const here = new Set<string>();
    for (const attempt of this.waiting) here.add(attempt.id);
    for (const attempt of this.returning) here.add(attempt.id);
    for (const job of claimed) if (here.has(job.id)) this.drop(job.id, 'lease-lost');
  }

  private count(type: string, delta: 1 | -1): void {
    this.waitingByType.set(type, (this.waitingByType.get(type) ?? 0) + delta);
  }

  private enter(next: ClaimBufferMode): void {
    if (!NEXT_MODES[this.current].includes(next)) throw new Error(`ClaimBuffer: cannot go from ${this.current} to ${next}`);
    this.current = next;
  }
}
