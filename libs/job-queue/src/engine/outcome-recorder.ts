import type { EngineLogger } from '../base/logger.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import type { RegisteredHandler } from '../base/registered-handler.js';
import { StoreRefusedDataError } from '../errors/store-refused-data.error.js';
import { StoreUnavailableError } from '../errors/store-unavailable.error.js';
import type { EventSink } from '../events/job-queue-event.js';
import type { ClaimedJob, JobStore, Lease } from '../persistence/job.store.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import type { CompletionBatcher, PendingCompletion } from './completion-batcher.js';
import { describeError } from './describe-error.js';
import type { RetryPolicy } from './retry-policy.js';
import type { OutcomeTally } from '../base/outcome-tally.js';

/** Pauses between tries of a failed write; the last one repeats. */
const WRITE_RETRY_DELAYS_MS = [100, 250, 500, 1_000, 2_000];

/** The attempt whose outcome is written, as far as the write's retries go. */
export interface HeldAttempt {
  /** Still holds its lease (not interrupted), and no shutdown is waiting on it. */
  readonly mayKeepWriting: boolean;
}

/**
 * Writes an attempt's outcome with the lease as proof of ownership. A write that does not apply
 * means another owner (or a cancel) took the job: the result is discarded, visibly. A write the
 * store could not make for now (StoreUnavailableError) is retried while the attempt holds its
 * lease, and for leaseMs at most, so a short outage costs no rerun; otherwise (interrupted, a
 * drain timed out, any other error) it gives up after a few tries, and the lease's expiry brings
 * the job back.
 */
export class OutcomeRecorder {
  private retryScheduled: ((delayMs: number) => void) | null = null;
  private tally: OutcomeTally | null = null;

  constructor(
    private readonly store: JobStore,
    private readonly completions: Pick<CompletionBatcher, 'complete' | 'add'> & Partial<Pick<CompletionBatcher, 'confirmStart' | 'startEnded'>>,
    private readonly retryPolicy: RetryPolicy,
    private readonly events: EventSink,
    private readonly logger: EngineLogger,
    private readonly workerId: string,
    /** A write retried for a held lease gives up after this long at most. */
    private readonly leaseMs: number,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  /** Counts each outcome written (completed, failed to be retried, dead) in `tally`: throughput. */
  tallyInto(tally: OutcomeTally): void {
    this.tally = tally;
  }

  /** Tells `listener` the delay of each retry written (one listener: the worker). */
  onRetryScheduled(listener: (delayMs: number) => void): void {
    this.retryScheduled = listener;
  }

  /** Records an outcome; never rejects. `held`: the attempt, whose lease bounds the write's retries. */
  record(job: ClaimedJob, handler: RegisteredHandler, outcome: AttemptOutcome, held?: HeldAttempt): Promise<void> {
    if (outcome.kind !== 'succeeded') return this.recordOther(job, handler, outcome, held);
    const { resultJson } = outcome;
    return this.completions.complete(job, resultJson).then(
      (applied) => this.completionWritten(job, handler, applied),
      (error: unknown) => this.retryCompletion(job, handler, resultJson, held, error),
    );
  }

  /**
   * A success, the hot path, without a promise per job: the completion joins the next batched,
   * fenced write as it is, and follows with completionWritten or retryCompletion when it hears back.
   */
  recordSuccess(completion: PendingCompletion): void {
    this.completions.add(completion);
  }

  /**
   * A prefetched attempt has started: its attempt is charged with a completion statement soon,
   * unless its outcome comes first (startEnded).
   */
  startConfirmation(lease: Lease): void {
    this.completions.confirmStart?.(lease);
  }

  /** A started prefetched attempt's handler returned: its outcome's statement charges it. */
  startEnded(lease: Lease): void {
    this.completions.startEnded?.(lease);
  }

  /** After a success's write: the event (only while someone listens) and the circuit, or lease-lost. */
  completionWritten(job: ClaimedJob, handler: RegisteredHandler, applied: boolean): Promise<void> | undefined {
    if (!applied) {
      this.leaseLost(job);
      return undefined;
    }
    this.tally?.count(job.type, 'completed');
    if (this.events.observed !== false) this.events.emit({ kind: 'completed', ...this.eventBase(job) });
    return handler.circuitBreaker ? this.circuitSuccess(handler) : undefined;
  }

  /**
   * A success whose first write failed: retried with backoff, as every outcome is. A result the
   * database refused (nested too deep for jsonb, say) would never land: the attempt is recorded
   * as failed instead, with the reason.
   */
  async retryCompletion(
    job: ClaimedJob,
    handler: RegisteredHandler,
    resultJson: string,
    held?: HeldAttempt,
    failure?: unknown,
  ): Promise<void> {
    if (failure instanceof StoreRefusedDataError) {
      const error = `handler result could not be stored: ${describeError(failure.cause)}`;
      return this.recordOther(job, handler, { kind: 'failed', error, permanent: false }, held);
    }
    if (await this.write(job, () => this.completions.complete(job, resultJson), held, 1)) {
      await this.completionWritten(job, handler, true);
    }
  }

  private async recordOther(
    job: ClaimedJob,
    handler: RegisteredHandler,
    outcome: Exclude<AttemptOutcome, { kind: 'succeeded' }>,
    held: HeldAttempt | undefined,
  ): Promise<void> {
    switch (outcome.kind) {
      case 'committed':
        this.tally?.count(job.type, 'completed');
        this.events.emit({ kind: 'completed', ...this.eventBase(job) });
        await this.circuitSuccess(handler);
        return;
      case 'failed': {
        const base = this.eventBase(job);
        if (!outcome.permanent) await this.circuitFailure(handler);
        if (outcome.permanent || job.attempt >= job.maxAttempts) {
          if (await this.write(job, () => this.store.deadLetter(job, outcome.error, job.attempt, this.workerId), held)) {
            this.tally?.count(job.type, 'dead');
            this.logger.warn(`Job ${job.id} (${job.type}) dead-lettered after attempt ${job.attempt}: ${outcome.error}`);
            this.events.emit({ kind: 'dead-lettered', ...base, error: outcome.error });
          }
          return;
        }
        const delayMs = this.retryPolicy.delayFor(job.attempt, handler);
        if (await this.write(job, () => this.store.scheduleRetry(job, outcome.error, job.attempt, this.workerId, delayMs), held)) {
          this.tally?.count(job.type, 'failed');
          this.events.emit({ kind: 'retry-scheduled', ...base, error: outcome.error, delayMs });
          this.retryScheduled?.(delayMs);
        }
        return;
      }
      case 'interrupted': {
        if (outcome.reason === 'lease-lost') this.leaseLost(job);
        else if (outcome.reason === 'drain') await this.write(job, async () => (await this.store.release([job])).length === 1, held);
        return;
      }
    }
  }

  private eventBase(job: ClaimedJob) {
    return { jobId: job.id, type: job.type, attempt: job.attempt, workerId: this.workerId };
  }

  /** Circuit bookkeeping must never fail the outcome it follows: errors are logged only. */
  private async circuitSuccess(handler: RegisteredHandler): Promise<void> {
    if (!handler.circuitBreaker) return;
    try {
      if ((await this.store.recordCircuitSuccess(handler.type)).closed) {
        this.logger.log(`Circuit for ${handler.type} closed: a job succeeded.`);
        this.events.emit({ kind: 'circuit-closed', type: handler.type });
      }
    } catch (error) {
      this.logger.warn(`Could not record circuit success for ${handler.type}: ${(error as Error)?.message}`);
    }
  }

  private async circuitFailure(handler: RegisteredHandler): Promise<void> {
    const breaker = handler.circuitBreaker;
    if (!breaker) return;
    try {
      if ((await this.store.recordCircuitFailure(handler.type, breaker.failureThreshold, breaker.cooldownMs)).opened) {
        this.logger.warn(
          `Circuit for ${handler.type} opened after ${breaker.failureThreshold} consecutive failures: ` +
            `no worker claims it for ${breaker.cooldownMs} ms, then one probe job runs.`,
        );
        this.events.emit({ kind: 'circuit-opened', type: handler.type });
      }
    } catch (error) {
      this.logger.warn(`Could not record circuit failure for ${handler.type}: ${(error as Error)?.message}`);
    }
  }

  /**
   * Returns whether the fenced write applied; false means the lease is gone. `failedTries`: tries
   * already made and failed, so the first of these waits its backoff first.
   */
  private async write(job: ClaimedJob, apply: () => Promise<boolean>, held: HeldAttempt | undefined, failedTries = 0): Promise<boolean> {
    // The long retry ends after a lease's length in any case: renewals that still succeed (the
    // database is up, this one write keeps failing) must not keep the job in processing for good.
    const keepTryingUntil = monotonicNow() + this.leaseMs;
    for (let tries = failedTries; ; tries++) {
      try {
        if (tries > 0) await this.sleep(WRITE_RETRY_DELAYS_MS[Math.min(tries, WRITE_RETRY_DELAYS_MS.length) - 1]);
        const applied = await apply();
        if (!applied) this.leaseLost(job);
        return applied;
      } catch (error) {
        // Only a failure that may pass is worth retrying for a whole lease.
        const keepTrying = held?.mayKeepWriting === true && error instanceof StoreUnavailableError && monotonicNow() < keepTryingUntil;
        if (!keepTrying && tries >= WRITE_RETRY_DELAYS_MS.length) {
          this.logger.error(
            `Could not record the outcome of job ${job.id} (${job.type}): ${(error as Error)?.message}. ` +
              'Its lease will expire and the job will be retried.',
          );
          return false;
        }
      }
    }
  }

  private leaseLost(job: ClaimedJob): void {
    this.logger.warn(
      `Job ${job.id} (${job.type}) attempt ${job.attempt}: this worker no longer holds its lease ` +
        '(it expired and was reclaimed, or the job was cancelled); its outcome was discarded.',
    );
    this.events.emit({ kind: 'lease-lost', jobId: job.id, type: job.type, attempt: job.attempt, workerId: this.workerId });
  }
}
