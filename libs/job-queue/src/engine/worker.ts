import type { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import type { RegisteredHandler } from '../discovery/registered-handler.js';
import type { ClaimedJob, JobStore } from '../persistence/job.store.js';
import type { JobStatus } from '../persistence/job-status.js';
import { AttemptControl } from './attempt-control.js';
import { ClaimPlanner } from './claim-planner.js';
import type { EngineLogger } from './engine-logger.js';
import type { JobRunner } from './job-runner.js';
import type { HeldLease, LeaseHolder } from './lease-keeper.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import { WakeSignal } from './wake-signal.js';

export interface WorkerSettings {
  workerId: string;
  concurrency: number;
  pollIntervalMs: number;
  leaseMs: number;
  /** Transactional jobs in flight at once, at most (each holds a pooled connection). */
  transactionalCapacity?: number;
}

interface RunningJob {
  job: ClaimedJob;
  lease: HeldLease;
  control: AttemptControl;
  done: Promise<void>;
}

type WorkerState = 'idle' | 'running' | 'draining' | 'stopped';

/** Errors while claiming (the database away) back off this long before the next try. */
const CLAIM_ERROR_BACKOFF_MS = 1_000;

/**
 * The claim loop of one process: claims what free capacity allows, runs each job, records its
 * outcome, and sleeps until a notification, a freed slot or the poll interval. It never runs more
 * than `concurrency` jobs, nor more than a type's own limit.
 */
export class Worker implements LeaseHolder {
  private state: WorkerState = 'idle';
  private readonly running = new Map<string, RunningJob>();
  private readonly runningByType = new Map<string, number>();
  private runningTransactional = 0;
  private readonly wake = new WakeSignal();
  private readonly planner: ClaimPlanner;
  private loop: Promise<void> | null = null;
  private lastProgressAt = Date.now();
  /** Set while the loop waits for the database: slow or away is not stuck (liveness). */
  private waitingOnDatabase = false;

  constructor(
    private readonly settings: WorkerSettings,
    private readonly store: JobStore,
    private readonly registry: JobHandlerRegistry,
    private readonly runner: JobRunner,
    private readonly recorder: OutcomeRecorder,
    private readonly logger: EngineLogger,
  ) {
    this.planner = new ClaimPlanner(
      settings.concurrency,
      registry.all().map((h) => ({
        type: h.type,
        concurrency: h.concurrency,
        maxAttempts: h.maxAttempts,
        transactional: h.transactional,
        rateLimit: h.rateLimit,
        globalConcurrency: h.globalConcurrency,
      })),
      settings.workerId,
      settings.leaseMs,
      settings.transactionalCapacity,
    );
  }

  get inFlight(): number {
    return this.running.size;
  }

  get isDraining(): boolean {
    return this.state === 'draining' || this.state === 'stopped';
  }

  /**
   * When the loop last went round; liveness reads it. A loop waiting on the database counts as
   * progressing: restarting the process would not bring the database back.
   */
  get lastProgress(): number {
    return this.waitingOnDatabase ? Date.now() : this.lastProgressAt;
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.lastProgressAt = Date.now();
    if (this.registry.types().length === 0) {
      this.logger.log('No @JobHandler found in this application: the worker will not claim anything.');
    }
    this.state = 'running';
    this.loop = this.claimLoop();
  }

  /** A notification or a state change: there may be work. */
  nudge(): void {
    this.wake.notify();
  }

  /** Stops claiming at once (shutdown has begun); in-flight jobs keep running. */
  stopClaiming(): void {
    if (this.state !== 'running') return;
    this.state = 'draining';
    this.wake.notify();
  }

  /**
   * Stops claiming and gives in-flight jobs `timeoutMs` to finish; the rest are interrupted and
   * released back to pending. Resolves when every job has been recorded or released.
   */
  async drain(timeoutMs: number): Promise<{ finished: number; released: number }> {
    if (this.state === 'idle') this.state = 'stopped';
    if (this.state === 'stopped') return { finished: 0, released: 0 };
    this.stopClaiming();
    this.wake.notify();
    await this.loop;
    const atStart = this.running.size;
    const allDone = () => Promise.all([...this.running.values()].map((r) => r.done)).then(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([allDone(), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    const leftover = [...this.running.values()];
    for (const entry of leftover) {
      entry.control.interrupt('drain', new Error(`shutdown: drain timed out after ${timeoutMs} ms; the job is released`));
    }
    await allDone();
    this.state = 'stopped';
    return { finished: atStart - leftover.length, released: leftover.length };
  }

  /** Interrupts a running job (cancel notification, lost lease). */
  interrupt(jobId: string, reason: 'lease-lost' | 'cancelled'): void {
    const entry = this.running.get(jobId);
    if (!entry) return;
    const why =
      reason === 'cancelled' ? new Error('job was cancelled') : new Error('lease lost: another worker may own this job now');
    entry.control.interrupt(reason, why);
  }

  heldLeases(): HeldLease[] {
    return [...this.running.values()].filter((r) => !r.control.interruption).map((r) => r.lease);
  }

  leaseGone(jobId: string, status: JobStatus | null): void {
    this.interrupt(jobId, status === 'cancelled' ? 'cancelled' : 'lease-lost');
  }

  private async claimLoop(): Promise<void> {
    while (this.state === 'running') {
      this.lastProgressAt = Date.now();
      const request = this.planner.plan(this.running.size, this.runningByType, this.runningTransactional);
      if (request) {
        let claimed: ClaimedJob[];
        try {
          this.waitingOnDatabase = true;
          claimed = await this.store.claim(request);
        } catch (error) {
          this.logger.warn(`Claiming jobs failed: ${(error as Error)?.message ?? error}; retrying.`);
          await this.wake.wait(Math.min(CLAIM_ERROR_BACKOFF_MS, this.settings.pollIntervalMs));
          continue;
        } finally {
          this.waitingOnDatabase = false;
        }
        for (const job of claimed) this.launch(job);
        // A full batch suggests more is waiting: go round again at once.
        if (claimed.length > 0 && claimed.length === request.limit) continue;
      }
      if (this.state !== 'running') break;
      await this.wake.wait(this.settings.pollIntervalMs);
    }
  }

  private launch(job: ClaimedJob): void {
    const handler = this.registry.get(job.type) as RegisteredHandler;
    const control = new AttemptControl();
    const entry: RunningJob = {
      job,
      control,
      lease: { id: job.id, leaseToken: job.leaseToken, renewedAt: Date.now() },
      done: Promise.resolve(),
    };
    this.running.set(job.id, entry);
    this.runningByType.set(job.type, (this.runningByType.get(job.type) ?? 0) + 1);
    if (handler.transactional) this.runningTransactional++;
    entry.done = this.execute(job, handler, control).finally(() => {
      this.running.delete(job.id);
      this.runningByType.set(job.type, (this.runningByType.get(job.type) ?? 1) - 1);
      if (handler.transactional) this.runningTransactional--;
      this.wake.notify();
    });
  }

  private async execute(job: ClaimedJob, handler: RegisteredHandler, control: AttemptControl): Promise<void> {
    try {
      const outcome = await this.runner.run(job, handler, control);
      await this.recorder.record(job, handler, outcome);
    } catch (error) {
      // Defensive: runner and recorder do not throw; if they ever do, the lease expiry recovers the job.
      this.logger.error(`Internal error while running job ${job.id} (${job.type}): ${(error as Error)?.stack ?? error}`);
    }
  }
}
