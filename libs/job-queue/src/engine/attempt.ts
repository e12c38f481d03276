import type { JobInstruments } from '../base/job-instruments.js';
import type { JobTracing } from '../base/job-tracing.js';
import type { EngineLogger } from '../base/logger.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import type { RegisteredHandler } from '../base/registered-handler.js';
import { isThenable } from '../base/thenable.js';
import type { ClaimedJob, JobStore, Lease } from '../persistence/job.store.js';
import { AttemptControl } from './attempt-control.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import type { PendingCompletion } from './completion-batcher.js';
import type { JobRunner } from './job-runner.js';
import type { HeldLease } from './lease-keeper.js';
import type { HeldAttempt, OutcomeRecorder } from './outcome-recorder.js';
import type { SlotHolder } from './slot-ledger.js';

/** Who runs attempts, and hears twice from each: when its handler returns, and when it is over. */
export interface AttemptOwner {
  /** The handler returned (whatever its outcome): the slot can take the next job. */
  handlerReturned(attempt: Attempt): void;
  /** The attempt is over: its outcome recorded, or given up on (its lease then expires). */
  attemptFinished(attempt: Attempt): void;
}

/** What every attempt of a worker shares: one reference per attempt, not one per collaborator. */
export interface AttemptServices {
  readonly runner: JobRunner;
  readonly recorder: OutcomeRecorder;
  readonly store: Pick<JobStore, 'markStarted' | 'confirmStarts'>;
  readonly logger: EngineLogger;
  readonly owner: AttemptOwner;
  /** Metrics, when on: each handler's duration, outcome and wait. */
  readonly instruments?: JobInstruments | null;
  /** Tracing, when the app has OpenTelemetry: each attempt in a span continuing its job's trace. */
  readonly tracing?: JobTracing | null;
}

/**
 * One claimed attempt, from the buffer until its outcome is recorded: the job, the lease the
 * keeper renews, the attempt's controls, and its place in the completion batch. It runs its
 * handler, records its own outcome, and tells its owner. One object per attempt, not one per
 * stage, and no promise on a synchronous success: see docs/decisions/0014-worker-hot-path.md.
 */
export class Attempt extends AttemptControl implements HeldLease, PendingCompletion, HeldAttempt, SlotHolder {
  readonly id: string;
  readonly leaseToken: string;
  renewedAt: number;
  slotHeld = false;
  /** When it started (the worker's clock), if the worker times its types (PrefetchSizer). */
  startedAt = 0;
  /** Set when the handler succeeded: the result as JSON text. */
  resultJson = 'null';
  /** The worker's drain ran out of time while this attempt was in flight. */
  drainTimedOut = false;
  /** Claimed prefetched, and its attempt not charged since. */
  private uncharged: boolean;
  /** Started uncharged: the completion batcher charges it (StartConfirmations) unless its outcome comes first. */
  private confirmPending = false;
  /** When its handler started (monotonic), read only while metrics are on. */
  private handlerStartedAt = 0;

  constructor(
    readonly job: ClaimedJob,
    /** The handler of the job's type (a worker claims only types it handles). */
    readonly handler: RegisteredHandler,
    /** When this worker claimed it (the worker's clock): a buffered job that waits too long is handed back. */
    readonly claimedAt: number,
    /** When its claim was sent (the same clock): the lease counts from then. */
    leaseFrom: number,
    private readonly services: AttemptServices,
  ) {
    super();
    this.id = job.id;
    this.leaseToken = job.leaseToken;
    this.renewedAt = leaseFrom;
    this.uncharged = job.prefetched === true;
  }

  /** A failed outcome write may go on retrying: the lease is held, and no drain has run out of time. */
  get mayKeepWriting(): boolean {
    return this.interruption === null && !this.drainTimedOut;
  }

  /** The lease a completion write presents: this attempt's. */
  get lease(): Lease {
    return this;
  }

  /**
   * Runs the handler, then records the outcome; the owner has given it a slot. A rate-limited
   * type's start is recorded first, as of now: rate limits count starts, not claims. A prefetched
   * job that has lost a worker before is charged its attempt before it runs (see chargeFirst).
   */
  start(): void {
    const chargeFirst = this.uncharged && (this.job.leaseExpiries ?? 0) > 0;
    if (this.handler.rateLimit || chargeFirst) {
      this.beforeRun(chargeFirst).then(() => this.run(), (error: unknown) => this.internalError(error));
    } else {
      this.run();
    }
  }

  /** The completion batch wrote this attempt's success (`applied`) or found its lease gone. Never throws. */
  settled(applied: boolean): void {
    try {
      this.finishAfter(this.services.recorder.completionWritten(this.job, this.handler, applied));
    } catch (error) {
      this.internalError(error);
    }
  }

  /** The completion batch's statement failed: the recorder retries this one alone. Never throws. */
  failed(error: unknown): void {
    try {
      this.finishAfter(this.services.recorder.retryCompletion(this.job, this.handler, this.resultJson, this, error));
    } catch (thrown) {
      this.internalError(thrown);
    }
  }

  // The steps after the handler are continuations, not one async function: a synchronous handler
  // is recorded without a promise turn per step.
  private run(): void {
    let outcome: AttemptOutcome | PromiseLike<AttemptOutcome>;
    try {
      // Interrupted while its start was being recorded: the handler must not run.
      const interruption = this.interruption;
      if (interruption) {
        outcome = { kind: 'interrupted', reason: interruption };
      } else {
        // Claimed prefetched: its attempt is charged a few ms from now, with the completions, or
        // by its own outcome if that comes first. No write stands between a slot and its next job.
        if (this.uncharged) {
          this.uncharged = false;
          this.confirmPending = true;
          this.services.recorder.startConfirmation(this);
        }
        if (this.services.instruments) this.handlerStartedAt = monotonicNow();
        const tracing = this.services.tracing;
        outcome = tracing
          ? tracing.traceAttempt(this.job, () => this.services.runner.run(this.job, this.handler, this), failureOf)
          : this.services.runner.run(this.job, this.handler, this);
      }
    } catch (error) {
      this.internalError(error);
      return;
    }
    if (isThenable(outcome)) {
      outcome.then((settled) => this.handlerDone(settled), (error: unknown) => this.internalError(error));
    } else {
      this.handlerDone(outcome);
    }
  }

  /** The slot takes the next job while the outcome is written. */
  private handlerDone(outcome: AttemptOutcome): void {
    try {
      if (this.confirmPending) {
        // Whatever the outcome, its statement charges the attempt: no separate confirm.
        this.confirmPending = false;
        this.services.recorder.startEnded(this);
      }
      this.services.owner.handlerReturned(this);
      if (this.services.instruments) this.timed(outcome);
      if (outcome.kind === 'succeeded') {
        // The hot path: the attempt joins the completion batch as it is, and hears back (settled, failed).
        this.resultJson = outcome.resultJson;
        this.services.recorder.recordSuccess(this);
        return;
      }
      this.finishAfter(this.services.recorder.record(this.job, this.handler, outcome, this));
    } catch (error) {
      this.internalError(error);
    }
  }

  /** Metrics: the handler's time by outcome, and the job's wait from due to start. */
  private timed(outcome: AttemptOutcome): void {
    if (outcome.kind === 'interrupted') return;
    const result =
      outcome.kind === 'succeeded' || outcome.kind === 'committed'
        ? 'completed'
        : outcome.permanent || this.job.attempt >= this.job.maxAttempts
          ? 'dead'
          : 'failed';
    const durationMs = monotonicNow() - this.handlerStartedAt;
    const waitMs = this.job.dueAt === undefined ? null : Math.max(0, Date.now() - durationMs - this.job.dueAt);
    this.services.instruments!.attemptTimed(this.job.type, result, durationMs, waitMs);
  }

  private finishAfter(recording: Promise<void> | undefined): void {
    if (!recording) {
      this.services.owner.attemptFinished(this);
      return;
    }
    recording.then(
      () => {
        try {
          this.services.owner.attemptFinished(this);
        } catch (error) {
          this.internalError(error);
        }
      },
      (error: unknown) => this.internalError(error),
    );
  }

  private async beforeRun(chargeFirst: boolean): Promise<void> {
    if (this.handler.rateLimit) await this.markStarted();
    if (chargeFirst) await this.chargeFirst();
  }

  private async markStarted(): Promise<void> {
    try {
      await this.services.store.markStarted(this.job.id);
    } catch (error) {
      this.services.logger.warn(`Could not record the start of job ${this.job.id} (${this.job.type}): ${(error as Error)?.message}`);
    }
  }

  /**
   * A prefetched job whose lease expired before (its worker lost, maybe by this very job) pays one
   * round trip: its attempt is charged before its handler runs, so a job that kills its worker at
   * once cannot run uncharged again and again. Few jobs ever lose a worker: the hot path never
   * comes here. A confirm that finds the lease gone interrupts the attempt; one that fails falls
   * back to the usual deferred charge.
   */
  private async chargeFirst(): Promise<void> {
    let charged: number;
    try {
      charged = await this.services.store.confirmStarts([this]);
    } catch (error) {
      this.services.logger.warn(`Could not charge the start of job ${this.job.id} (${this.job.type}) before it ran: ${(error as Error)?.message}`);
      return;
    }
    if (charged === 1) this.uncharged = false;
    else this.interrupt('lease-lost', new Error('lease lost before the job started'));
  }

  /** Defensive: runner and recorder do not throw; if they ever do, the lease's expiry recovers the job. */
  private internalError(error: unknown): void {
    this.services.logger.error(`Internal error while running job ${this.job.id} (${this.job.type}): ${(error as Error)?.stack ?? error}`);
    this.services.owner.attemptFinished(this);
  }
}

/** A failed attempt's error, for its span; null when it did not fail. */
function failureOf(outcome: AttemptOutcome): string | null {
  return outcome.kind === 'failed' ? outcome.error : null;
}
