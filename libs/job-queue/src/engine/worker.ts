import type { JobInstruments } from '../base/job-instruments.js';
import type { JobTracing } from '../base/job-tracing.js';
import type { EngineLogger } from '../base/logger.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import type { HandlerLookup } from '../base/registered-handler.js';
import type { ClaimedJob, ClaimRequest, JobStore, Lease } from '../persistence/job.store.js';
import type { JobStatus } from '../base/job-status.js';
import type { Attempt, AttemptOwner } from './attempt.js';
import { type AttemptStarter, ClaimBuffer } from './claim-buffer.js';
import { ClaimPacer } from './claim-pacer.js';
import { ClaimPlanner, type ClaimSettings, typeCapacity } from './claim-planner.js';
import { DueWakeTimer } from './due-wake-timer.js';
import type { JobRunner } from './job-runner.js';
import { InFlightAttempts } from './in-flight-attempts.js';
import type { HeldLease, LeaseHolder } from './lease-keeper.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import { type PauseChange, PausedTypes } from './paused-types.js';
import { PrefetchSizer } from './prefetch-sizer.js';
import { SlotLedger } from './slot-ledger.js';
import { WakeSignal } from './wake-signal.js';

export interface WorkerSettings extends ClaimSettings {
  readonly pollIntervalMs: number;
}

export interface DrainResult {
  finished: number;
  released: number;
}

type WorkerState = 'idle' | 'running' | 'draining' | 'stopped';

/** A claim on its way; its leases count from `sentAt`, and notifications from `nudgesAtSend`. */
interface ClaimOut {
  readonly request: ClaimRequest;
  readonly nudgesAtSend: number;
  readonly sentAt: number;
  readonly claimed: Promise<ClaimedJob[]>;
}

/** A failed claim (the database away) waits this long, at most, before the next try. */
const CLAIM_ERROR_BACKOFF_MS = 1_000;

/**
 * The claim loop of one process, and its drain. It claims what free slots and the buffer allow,
 * starts buffered attempts as slots free, and sleeps until a notification, a freed slot, a due
 * time or the poll interval. Attempts record their own outcomes and report back.
 */
export class Worker implements LeaseHolder, AttemptOwner, AttemptStarter {
  private state: WorkerState = 'idle';
  private readonly active = new InFlightAttempts();
  private readonly buffer: ClaimBuffer;
  private readonly slots: SlotLedger;
  private readonly sizer: PrefetchSizer;
  private readonly pacer: ClaimPacer;
  private readonly dueWakes: DueWakeTimer;
  private readonly wake = new WakeSignal();
  private readonly paused = new PausedTypes();
  private loop: Promise<void> | null = null;
  private draining: Promise<DrainResult> | null = null;
  // Liveness and the drain's deadline read monotonicNow, not `now`: they pair with real timers,
  // which a test's hand-moved clock does not move.
  private lastProgressAt = monotonicNow();
  /** A claim sent before the batch it follows ran, taken in the loop's next round. */
  private claimAhead: ClaimOut | null = null;
  /** Counts notifications, so one that arrives during a claim is not lost. */
  private nudges = 0;
  /** Slow or away is not stuck: liveness reads this. */
  private waitingOnDatabase = false;

  constructor(
    private readonly settings: WorkerSettings,
    private readonly store: JobStore,
    private readonly handlers: HandlerLookup,
    runner: JobRunner,
    recorder: OutcomeRecorder,
    private readonly logger: EngineLogger,
    /** Claim ages, run times and the rate meter's clock; tests move it by hand. */
    private readonly now: () => number = monotonicNow,
    /** Metrics, when on. */
    instruments: JobInstruments | null = null,
    /** Tracing, when the app has OpenTelemetry. */
    tracing: JobTracing | null = null,
  ) {
    this.sizer = new PrefetchSizer(settings.prefetch, handlers.all(), now);
    this.slots = new SlotLedger(settings.concurrency, settings.transactionalCapacity);
    this.buffer = new ClaimBuffer(store, handlers, { runner, recorder, store, logger, owner: this, instruments, tracing }, logger, this.paused);
    this.dueWakes = new DueWakeTimer(() => {
      if (this.state === 'running') this.nudge();
    });
    this.pacer = new ClaimPacer(settings, this.slots, this.buffer, this.sizer, new ClaimPlanner(settings, handlers.all().map(typeCapacity), this.paused));
  }

  /** Attempts started and not yet recorded. */
  get inFlight(): number {
    return this.active.size;
  }

  /** Attempts running now, per type (metrics' in-flight gauge). */
  runningByType(): ReadonlyMap<string, number> {
    return this.slots.runningByType;
  }

  /** Attempts claimed into the buffer and not started yet. */
  get unstarted(): number {
    return this.buffer.size;
  }

  /** A claim is on its way back: the jobs it took are no longer waiting, and not here yet. */
  get claiming(): boolean {
    return this.buffer.claimOutstanding;
  }

  /** Since the loop last went round (0 while it waits on the database); liveness reads it. */
  get silentForMs(): number {
    return this.waitingOnDatabase ? 0 : Math.round(monotonicNow() - this.lastProgressAt);
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.lastProgressAt = monotonicNow();
    if (this.handlers.types().length === 0) this.logger.log('No @JobHandler found in this application: the worker will not claim anything.');
    this.state = 'running';
    this.loop = this.claimLoop();
  }

  /** A notification: there may be new work. */
  nudge(): void {
    this.nudges++;
    this.pacer.mayHaveWork();
    this.wake.notify();
  }

  /** Jobs come due in `delayMs` (a retry, a delayed job): wake then, not at the next poll. Also before start. */
  wakeIn(delayMs: number): void {
    if (this.state === 'running' || this.state === 'idle') this.dueWakes.wakeIn(delayMs);
  }

  /**
   * Stops claiming and starting buffered attempts at once; started ones keep running. A batch of
   * synchronous attempts being started when a handler calls this runs to its end (one check per pass).
   */
  stopClaiming(): void {
    if (this.state !== 'running') return;
    this.state = 'draining';
    this.dueWakes.clear();
    this.wake.notify();
  }

  /**
   * Stops claiming, hands buffered attempts back, and gives started ones `timeoutMs` to finish;
   * the rest are interrupted and released. One drain however often it is asked for.
   */
  drain(timeoutMs: number): Promise<DrainResult> {
    this.draining ??= this.drainOnce(timeoutMs);
    return this.draining;
  }

  /**
   * The paused types as the database holds them now: newly paused ones are claimed and started no
   * more (their buffered attempts go back); newly resumed ones are claimed at once.
   */
  setPaused(types: readonly string[]): PauseChange {
    const change = this.paused.replace(types);
    if (change.paused.length > 0) void this.buffer.handBackTypes(new Set(change.paused));
    if (change.resumed.length > 0 && this.state === 'running') {
      this.pump();
      this.nudge();
    }
    return change;
  }

  /** Interrupts a job's attempt here (a cancel, a lost lease); with `leaseToken`, only the one holding that lease. */
  interrupt(jobId: string, reason: 'lease-lost' | 'cancelled', leaseToken?: string): void {
    if (this.buffer.drop(jobId, reason, leaseToken)) return;
    const attempt = this.active.get(jobId);
    if (!attempt || (leaseToken !== undefined && attempt.leaseToken !== leaseToken)) return;
    attempt.interrupt(reason, reason === 'cancelled' ? new Error('job was cancelled') : new Error('lease lost: another worker may own this job now'));
  }

  heldLeases(): HeldLease[] {
    return [...this.active.leases(), ...this.buffer.unstarted()];
  }

  leaseGone(lease: Lease, status: JobStatus | null): void {
    this.interrupt(lease.id, status === 'cancelled' ? 'cancelled' : 'lease-lost', lease.leaseToken);
  }

  /** Hands back buffered attempts still not started `waitedMs` after their claim; none once a drain has begun. */
  handBackWaiting(waitedMs: number): Promise<number> {
    return this.state === 'running' ? this.buffer.handBack(this.now() - waitedMs) : Promise.resolve(0);
  }

  launch(attempt: Attempt): void {
    this.slots.hold(attempt);
    if (this.sizer.timesTypes) attempt.startedAt = this.now();
    this.active.add(attempt);
    attempt.start();
  }

  handlerReturned(attempt: Attempt): void {
    this.sizer.record(attempt.handler.type, attempt.startedAt);
    this.freeSlot(attempt);
  }

  attemptFinished(attempt: Attempt): void {
    this.freeSlot(attempt);
    this.active.remove(attempt);
    // A recorded outcome may lift the pause on claims, and make room under a counted limit.
    this.pacer.outcomeRecorded(attempt.handler.type);
    this.wakeIfClaimDue();
  }

  private async claimLoop(): Promise<void> {
    try {
      while (this.state === 'running') {
        this.lastProgressAt = monotonicNow();
        const claim = this.claimAhead ?? this.claimNow();
        this.claimAhead = null;
        if (claim) {
          let claimed: ClaimedJob[];
          try {
            this.waitingOnDatabase = true;
            claimed = await claim.claimed;
          } catch (error) {
            this.buffer.claimFailed();
            this.logger.warn(`Claiming jobs failed: ${(error as Error)?.message ?? error}; retrying.`);
            await this.wake.wait(Math.min(CLAIM_ERROR_BACKOFF_MS, this.settings.pollIntervalMs));
            continue;
          } finally {
            this.waitingOnDatabase = false;
          }
          // Nothing was left to run when the claim came back: jobs run faster than claims return.
          const ranDry = this.buffer.waitingCount === 0 && this.slots.hasFreeSlot;
          this.landClaim(claimed, claim.sentAt);
          // A notification after the claim was sent may be about jobs it missed.
          const full = this.pacer.claimAnswered(claim.request, claimed, this.nudges !== claim.nudgesAtSend);
          if (ranDry && full) await this.sendClaimAhead();
          this.pump();
          // A full claim suggests more is waiting: go round again at once.
          if (!this.pacer.looksEmpty) continue;
        }
        if (this.state !== 'running') break;
        // The poll ran out: claim, even if the timer fired a hair early on the pacer's clock.
        if (!(await this.wake.wait(this.settings.pollIntervalMs))) this.pacer.mayHaveWork();
      }
    } finally {
      await this.settleClaimAhead();
    }
  }

  /** Sends a claim now if the pacer wants one. */
  private claimNow(): ClaimOut | null {
    const request = this.pacer.plan(this.recording);
    if (!request) return null;
    this.buffer.claimSent();
    let claimed: Promise<ClaimedJob[]>;
    try {
      claimed = this.store.claim(request);
    } catch (error) {
      // A store that throws instead of rejecting must not end the loop: the claim fails like any other.
      claimed = Promise.reject(error);
    }
    return { request, nudgesAtSend: this.nudges, sentAt: this.now(), claimed };
  }

  private landClaim(claimed: readonly ClaimedJob[], sentAt: number): void {
    // The database hands a job out again only once its lease is gone: an attempt of it still running here is stale.
    if (this.active.size > 0) for (const job of claimed) if (this.active.get(job.id)) this.interrupt(job.id, 'lease-lost');
    this.buffer.land(claimed, this.now(), sentAt);
    // A claim planned before a pause was heard may bring jobs of the type: they go back at once.
    if (this.paused.types.size > 0 && claimed.some((job) => this.paused.has(job.type))) void this.buffer.handBackTypes(this.paused.types);
  }

  /** Sends the next claim before the batch that just came in runs. See docs/decisions/0006-claim-sent-ahead.md. */
  private async sendClaimAhead(): Promise<void> {
    const request = this.state === 'running' ? this.pacer.planAhead(this.recording) : null;
    if (!request) return;
    this.buffer.claimSent();
    const nudgesAtSend = this.nudges;
    const sentAt = this.now();
    const { claimed } = await this.store.sendClaim(request);
    this.claimAhead = { request, nudgesAtSend, sentAt, claimed };
  }

  /** The loop has ended: a claim sent ahead still lands, so the drain hands its jobs back. */
  private async settleClaimAhead(): Promise<void> {
    const ahead = this.claimAhead;
    if (!ahead) return;
    this.claimAhead = null;
    try {
      this.landClaim(await ahead.claimed, ahead.sentAt);
    } catch (error) {
      this.buffer.claimFailed();
      this.logger.warn(`Claiming jobs failed: ${(error as Error)?.message ?? error}.`);
    }
  }

  /** Waking the loop for each freed slot would cost more than short jobs themselves. */
  private wakeIfClaimDue(): void {
    if (this.state === 'running' && this.pacer.wantsToClaim(this.recording)) this.wake.notify();
  }

  /** Attempts whose handler has returned and whose outcome is still being written. */
  private get recording(): number {
    return this.active.size - this.slots.running;
  }

  private pump(): void {
    if (this.state === 'running') this.buffer.startWhileAdmitted(this.slots, this);
  }

  private freeSlot(attempt: Attempt): void {
    if (!this.slots.release(attempt)) return;
    this.pump();
    this.pacer.slotFreed(attempt.handler.type);
    this.wakeIfClaimDue();
  }

  private async drainOnce(timeoutMs: number): Promise<DrainResult> {
    if (this.state === 'idle') this.state = 'stopped';
    if (this.state === 'stopped') return { finished: 0, released: 0 };
    // Started attempts get timeoutMs from now: the hand-backs and the claim still out come out of it.
    const deadline = monotonicNow() + timeoutMs;
    this.stopClaiming();
    await this.loop;
    const unstarted = await this.buffer.release();
    const atStart = this.active.size;
    await this.active.untilEmpty(deadline);
    const interrupted = this.active.timeOut(timeoutMs);
    await this.active.untilEmpty(Infinity);
    this.state = 'stopped';
    return { finished: atStart - interrupted, released: interrupted + unstarted };
  }
}
