import type { HandlerLookup, RegisteredHandler } from '../base/registered-handler.js';
import type { ClaimedJob, ClaimRequest, JobStore, Lease } from '../persistence/job.store.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import type { JobStatus } from '../persistence/job-status.js';
import { ClaimPlanner } from './claim-planner.js';
import type { EngineLogger } from '../base/logger.js';
import type { JobRunner } from './job-runner.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import type { HeldLease, LeaseHolder } from './lease-keeper.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import { PrefetchSizer } from './prefetch-sizer.js';
import { isThenable } from '../base/thenable.js';
import { WakeSignal } from './wake-signal.js';
import { type CompletionListener, WorkerAttempt } from './worker-attempt.js';

export interface WorkerSettings {
  workerId: string;
  concurrency: number;
  pollIntervalMs: number;
  leaseMs: number;
  /** Transactional jobs in flight at once, at most (each holds a pooled connection). */
  transactionalCapacity?: number;
  /**
   * Claimed jobs held locally beyond the running ones, at most (0: claim only for free slots). The
   * buffer actually kept is about 100 ms of work at the recent rate, up to this (none while no job
   * has finished lately), each type's share of it by its own run time (PrefetchSizer); a claim sent
   * ahead (sendClaimAhead) can add one more batch of that plus `concurrency`.
   */
  prefetch?: number;
}

type WorkerState = 'idle' | 'running' | 'draining' | 'stopped';

/** Errors while claiming (the database away) back off this long before the next try. */
const CLAIM_ERROR_BACKOFF_MS = 1_000;
/** Pauses between tries of a drain's hand-back of unstarted jobs. */
const HAND_BACK_RETRY_DELAYS_MS = [100, 250, 500];

/**
 * The buffer is topped up once it is down to this share of its size (about 10 ms of work at the
 * adaptive size), not earlier: each claim statement has a fixed cost in the database, so claims
 * of nearly a full buffer cost it about a fifth less per job than claims of half of one.
 */
const LOW_WATER = 0.1;
/** Wake-ups kept at once, the earliest; beyond that (a failure storm) the rest wait for the poll. */
const MAX_DUE_WAKES = 1_000;
/** A wake-up comes this much after the due time: a timer can fire up to a millisecond early (libuv rounds). */
const DUE_WAKE_MARGIN_MS = 5;
/** A claim sent ahead is planned as if the worker's buffer had already run. */
const NOTHING_BUFFERED: ReadonlyMap<string, number> = new Map();
/** setTimeout's longest delay; a later wake-up is re-armed when this one fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The claim loop of one process. It claims what free capacity (and the prefetch buffer) allows,
 * starts jobs as slots free up, records each outcome, and sleeps until a notification, a freed
 * slot or the poll interval. It never runs more than `concurrency` jobs, nor more than a type's
 * own limit. A slot is freed when the handler finishes; the outcome is then written (batched)
 * while the lease is still held, and a drain waits for those writes too.
 */
export class Worker implements LeaseHolder, CompletionListener {
  private state: WorkerState = 'idle';
  /** Started and not yet recorded, by job id. */
  private readonly active = new Map<string, WorkerAttempt>();
  /** Claimed attempts not started yet, in claim order. */
  private readonly buffer: WorkerAttempt[] = [];
  private readonly bufferedByType = new Map<string, number>();
  private running = 0;
  private readonly runningByType = new Map<string, number>();
  private runningTransactional = 0;
  private readonly wake = new WakeSignal();
  /**
   * Buffered jobs taken out to be handed back (handBackWaiting) until the database has them: never
   * started, and renewed meanwhile, so a hand-back that fails is tried again rather than left to
   * the reaper (which would count an attempt that never ran).
   */
  private readonly returning: WorkerAttempt[] = [];
  /** The hand-back in flight, if any; one at a time, and a drain waits for it. */
  private handingBack: Promise<number> | null = null;
  /** Notified when the last started job has been recorded (a drain waits for it). */
  private readonly allRecorded = new WakeSignal();
  /** Set while pump runs: a job that finishes synchronously must not start the next one from within. */
  private pumping = false;
  private draining: Promise<{ finished: number; released: number }> | null = null;
  private readonly prefetchSizer: PrefetchSizer;
  private readonly planner: ClaimPlanner;
  private readonly prefetch: number;
  private readonly transactionalCapacity: number;
  private loop: Promise<void> | null = null;
  // These two, the due wake-ups and the drain's deadline read monotonicNow itself, not the injectable
  // `now`: they pair with real timers, which a test's hand-moved clock does not move. (-Infinity: the
  // monotonic clock starts near 0, and 0 would read as a claim at process start.)
  private lastProgressAt: number;
  private lastClaimAt = -Infinity;
  /** The last claim found less than it asked for: wait for a notification or the poll. */
  private queueLooksEmpty = false;
  /**
   * Types whose last claim came back full, so more of them are likely waiting. A claim for several
   * types can come back short because one has nothing waiting, while another (held to a few slots
   * by its concurrency) has plenty: a freed slot of such a type claims again at once, rather than
   * at the poll.
   */
  private readonly typesWithMore = new Set<string>();
  /** A claim sent before the batch it follows runs (sendClaimAhead), awaited in the loop's next round. */
  private claimAhead: { request: ClaimRequest; claimed: Promise<ClaimedJob[]>; nudgesAtSend: number; sentAt: number } | null = null;
  /** A claim is out (one at a time: a claim sent ahead goes only after the last came back). */
  private claimOut = false;
  /**
   * Cancels heard while a claim was out that matched nothing here: the cancel may have committed
   * just after that claim took the job, its notification arriving before the claim's rows. Those
   * jobs are dropped when the rows come in, so a job cancelled before it started never starts.
   */
  private readonly cancelledWhileClaiming = new Set<string>();
  /** Counts notifications, so one that arrives during a claim is not lost. */
  private nudges = 0;
  /** Set while the loop waits for the database: slow or away is not stuck (liveness). */
  private waitingOnDatabase = false;
  /** When known jobs come due (monotonic ms), earliest first: retries and delayed jobs. */
  private readonly dueWakes: number[] = [];
  private dueTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly settings: WorkerSettings,
    private readonly store: JobStore,
    private readonly registry: HandlerLookup,
    private readonly runner: JobRunner,
    private readonly recorder: OutcomeRecorder,
    private readonly logger: EngineLogger,
    /**
     * The clock of claim ages, run times and the rate meter: monotonic, and the lease keeper's too
     * (a lease's renewedAt starts when its claim was sent). Tests move it by hand; timers keep real time.
     */
    private readonly now: () => number = monotonicNow,
  ) {
    this.lastProgressAt = monotonicNow();
    this.prefetch = settings.prefetch ?? 0;
    this.prefetchSizer = new PrefetchSizer(this.prefetch, registry.all(), now);
    this.transactionalCapacity = settings.transactionalCapacity ?? Infinity;
    this.planner = new ClaimPlanner(
      settings.concurrency,
      registry.all().map((h) => ({
        type: h.type,
        concurrency: h.concurrency,
        maxAttempts: h.maxAttempts,
        transactional: h.transactional,
        rateLimit: h.rateLimit,
        globalConcurrency: h.globalConcurrency,
        circuitBreaker: h.circuitBreaker !== null,
      })),
      settings.workerId,
      settings.leaseMs,
      this.transactionalCapacity,
      this.prefetch,
    );
    recorder.onRetryScheduled((delayMs) => this.wakeIn(delayMs));
  }

  /** Jobs started and not yet recorded. */
  get inFlight(): number {
    return this.active.size;
  }

  get isDraining(): boolean {
    return this.state === 'draining' || this.state === 'stopped';
  }

  /**
   * How long since the loop last went round; liveness reads it. A loop waiting on the database
   * counts as progressing: restarting the process would not bring the database back.
   */
  get silentForMs(): number {
    return this.waitingOnDatabase ? 0 : Math.round(monotonicNow() - this.lastProgressAt);
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.lastProgressAt = monotonicNow();
    if (this.registry.types().length === 0) {
      this.logger.log('No @JobHandler found in this application: the worker will not claim anything.');
    }
    this.state = 'running';
    this.loop = this.claimLoop();
  }

  /** A notification: there may be new work. */
  nudge(): void {
    this.nudges++;
    this.queueLooksEmpty = false;
    this.wake.notify();
  }

  /**
   * Stops claiming, and starting buffered jobs, at once (shutdown has begun); started jobs keep
   * running. A handler that calls this while a batch of synchronous jobs is being started lets
   * that batch run to its end: those jobs are started in one pass, which checks the state once.
   */
  stopClaiming(): void {
    if (this.state !== 'running') return;
    this.state = 'draining';
    this.dueWakes.length = 0;
    this.armDueWake();
    this.wake.notify();
  }

  /**
   * Jobs come due in `delayMs`: a retry this worker scheduled, or delayed jobs someone enqueued (a
   * notification). The loop wakes for them then rather than at its next poll, so a short delay or
   * backoff is not stretched to the poll interval.
   */
  wakeIn(delayMs: number): void {
    // Also before start: the worker hears notifications as soon as it subscribes.
    if ((this.state !== 'running' && this.state !== 'idle') || !Number.isFinite(delayMs)) return;
    const due = monotonicNow() + delayMs + DUE_WAKE_MARGIN_MS;
    const wakes = this.dueWakes;
    if (wakes.length >= MAX_DUE_WAKES) {
      if (due >= wakes[wakes.length - 1]) return;
      wakes.pop();
    }
    // Usually the latest yet: the search from the end stops at once.
    let i = wakes.length;
    while (i > 0 && wakes[i - 1] > due) i--;
    wakes.splice(i, 0, due);
    if (i === 0) this.armDueWake();
  }

  /** One timer, for the earliest wake-up; it wakes the loop and moves on to the next. */
  private armDueWake(): void {
    if (this.dueTimer) clearTimeout(this.dueTimer);
    this.dueTimer = null;
    if (this.dueWakes.length === 0) return;
    this.dueTimer = setTimeout(
      () => {
        this.dueTimer = null;
        const now = monotonicNow();
        if (this.dueWakes[0] <= now) {
          let due = 1;
          while (due < this.dueWakes.length && this.dueWakes[due] <= now) due++;
          this.dueWakes.splice(0, due);
          if (this.state === 'running') this.nudge();
        }
        this.armDueWake();
      },
      Math.min(MAX_TIMER_MS, Math.max(0, this.dueWakes[0] - monotonicNow())),
    );
    this.dueTimer.unref?.();
  }

  /**
   * Stops claiming, hands buffered jobs back, and gives started jobs `timeoutMs` to finish; the
   * rest are interrupted and released back to pending. Resolves when every job has been recorded
   * or released.
   */
  drain(timeoutMs: number): Promise<{ finished: number; released: number }> {
    // One drain however often it is asked for: a second caller waits for the same one.
    this.draining ??= this.drainOnce(timeoutMs);
    return this.draining;
  }

  private async drainOnce(timeoutMs: number): Promise<{ finished: number; released: number }> {
    if (this.state === 'idle') this.state = 'stopped';
    if (this.state === 'stopped') return { finished: 0, released: 0 };
    // In-flight jobs get drainTimeoutMs from now: the hand-back below (retried if it fails) and
    // the claim still out come out of it, not on top of it.
    const deadline = monotonicNow() + timeoutMs;
    this.stopClaiming();
    await this.loop;
    await this.handingBack;
    const unstarted = await this.releaseBuffer();
    const atStart = this.active.size;
    await this.untilAllRecorded(deadline);
    const leftover = [...this.active.values()].filter((attempt) => attempt.slotHeld && !attempt.interruption);
    for (const attempt of leftover) {
      attempt.interrupt('drain', new Error(`shutdown: drain timed out after ${timeoutMs} ms; the job is released`));
    }
    // Attempts whose handler has finished are only waiting for their outcome's write: they keep
    // their lease (and its renewals) until it lands. A failed write retries while the lease is
    // held; from now on it gives up after a few tries, so a database that is away cannot hold
    // the shutdown for a whole lease.
    for (const attempt of this.active.values()) attempt.drainTimedOut = true;
    await this.untilAllRecorded(Infinity);
    this.state = 'stopped';
    return { finished: atStart - leftover.length, released: leftover.length + unstarted };
  }

  /**
   * Interrupts a job (cancel notification, lost lease); a buffered one is simply dropped. With
   * `leaseToken`, only the attempt holding that lease: a lease reported lost must not stop a newer
   * attempt of the same job that this worker has claimed since.
   */
  interrupt(jobId: string, reason: 'lease-lost' | 'cancelled', leaseToken?: string): void {
    const holds = (lease: Lease) => leaseToken === undefined || lease.leaseToken === leaseToken;
    // Also when it matches an attempt here: the claim out may hold a newer one (this one's lease
    // lost, the job claimed again). A cancelled job never becomes claimable again, so this is safe.
    if (reason === 'cancelled' && leaseToken === undefined && this.claimOut) this.cancelledWhileClaiming.add(jobId);
    // Being handed back: the database has let it go already (a hand-back that failed late).
    const returning = this.returning.findIndex((r) => r.id === jobId && holds(r));
    if (returning >= 0) {
      this.returning.splice(returning, 1);
      return;
    }
    const index = this.buffer.findIndex((b) => b.id === jobId && holds(b));
    if (index >= 0) {
      const [dropped] = this.buffer.splice(index, 1);
      this.countBuffered(dropped.job.type, -1);
      if (reason === 'lease-lost') this.logger.warn(`Job ${jobId} (${dropped.job.type}) lost its lease before it started; dropped.`);
      return;
    }
    const entry = this.active.get(jobId);
    if (!entry || !holds(entry)) return;
    const why =
      reason === 'cancelled' ? new Error('job was cancelled') : new Error('lease lost: another worker may own this job now');
    entry.interrupt(reason, why);
  }

  heldLeases(): HeldLease[] {
    const started = [...this.active.values()].filter((attempt) => !attempt.interruption);
    return [...started, ...this.buffer, ...this.returning];
  }

  leaseGone(lease: Lease, status: JobStatus | null): void {
    this.interrupt(lease.id, status === 'cancelled' ? 'cancelled' : 'lease-lost', lease.leaseToken);
  }

  /**
   * The database hands a job out again only once the lease on it is gone. So if this worker still
   * holds an attempt of a job it has just claimed, that attempt is stale: its lease was lost while
   * it waited or ran, and the job came back to this same worker. It is dropped or interrupted
   * before the new attempt is buffered, so the two never share renewals, outcomes or interrupts.
   */
  private dropStaleAttempts(claimed: readonly ClaimedJob[]): void {
    if (this.active.size === 0 && this.buffer.length === 0 && this.returning.length === 0) return;
    const waiting = new Set([...this.buffer, ...this.returning].map((b) => b.job.id));
    for (const job of claimed) {
      if (this.active.has(job.id) || waiting.has(job.id)) this.interrupt(job.id, 'lease-lost');
    }
  }

  private async claimLoop(): Promise<void> {
    try {
      while (this.state === 'running') {
        this.lastProgressAt = monotonicNow();
        const ahead = this.claimAhead;
        this.claimAhead = null;
        const request = ahead ? ahead.request : this.wantsToClaim() ? this.planner.plan(this.load()) : null;
        if (request) {
          let claimed: ClaimedJob[];
          // A notification after a claim was sent may be about jobs it missed.
          const nudgesBefore = ahead ? ahead.nudgesAtSend : this.nudges;
          const sentAt = ahead ? ahead.sentAt : this.now();
          try {
            this.waitingOnDatabase = true;
            this.claimOut = true;
            claimed = await (ahead ? ahead.claimed : this.store.claim(request));
          } catch (error) {
            this.claimReturned();
            this.logger.warn(`Claiming jobs failed: ${(error as Error)?.message ?? error}; retrying.`);
            await this.wake.wait(Math.min(CLAIM_ERROR_BACKOFF_MS, this.settings.pollIntervalMs));
            continue;
          } finally {
            this.waitingOnDatabase = false;
          }
          // Nothing is left to run now that the claim is back: jobs run faster than claims come back.
          const ranDry = this.buffer.length === 0 && this.running < this.settings.concurrency;
          this.bufferClaimed(claimed, sentAt);
          this.noteTypesWithMore(request, claimed);
          const asked = Math.min(request.limit, request.perType.reduce((sum, t) => sum + t.limit, 0));
          this.queueLooksEmpty = claimed.length < asked && this.nudges === nudgesBefore;
          if (ranDry && claimed.length >= asked) await this.sendClaimAhead();
          this.pump();
          // A full batch suggests more is waiting: go round again at once.
          if (!this.queueLooksEmpty) continue;
        }
        if (this.state !== 'running') break;
        // The poll interval ran out: claim, even if the timer fired a hair early on the clock
        // wantsToClaim reads (it would otherwise skip this round and sleep a whole interval more).
        if (!(await this.wake.wait(this.settings.pollIntervalMs))) this.queueLooksEmpty = false;
      }
    } finally {
      await this.settleClaimAhead();
    }
  }

  /** Which types came back full from this claim (typesWithMore). */
  private noteTypesWithMore(request: ClaimRequest, claimed: readonly ClaimedJob[]): void {
    const note = (type: string, count: number, limit: number) =>
      count >= Math.min(limit, request.limit) ? this.typesWithMore.add(type) : this.typesWithMore.delete(type);
    if (request.perType.length === 1) {
      note(request.perType[0].type, claimed.length, request.perType[0].limit);
      return;
    }
    const counts = new Map<string, number>();
    for (const job of claimed) counts.set(job.type, (counts.get(job.type) ?? 0) + 1);
    for (const { type, limit } of request.perType) note(type, counts.get(type) ?? 0, limit);
  }

  /**
   * Claimed jobs join the buffer, in claim order; those cancelled while the claim was out are
   * dropped. Their leases count from `sentAt`, when the claim was sent: the database's lease began
   * no earlier, so the lease keeper never presumes one held past its expiry there.
   */
  private bufferClaimed(claimed: readonly ClaimedJob[], sentAt: number): void {
    const cancelled = this.claimReturned();
    const claimedAt = this.now();
    this.lastClaimAt = monotonicNow();
    this.dropStaleAttempts(claimed);
    for (const job of claimed) {
      this.buffer.push(new WorkerAttempt(job, this.registry.get(job.type) as RegisteredHandler, claimedAt, sentAt, this));
      this.countBuffered(job.type, 1);
    }
    if (cancelled) for (const job of claimed) if (cancelled.has(job.id)) this.interrupt(job.id, 'cancelled');
  }

  /** The claim that was out is back (or failed); returns the cancels heard meanwhile, if any. */
  private claimReturned(): ReadonlySet<string> | null {
    this.claimOut = false;
    if (this.cancelledWhileClaiming.size === 0) return null;
    const cancelled = new Set(this.cancelledWhileClaiming);
    this.cancelledWhileClaiming.clear();
    return cancelled;
  }

  /**
   * Sends the next claim before the batch that just came in runs. Only called when a full batch
   * came back to a worker that had nothing left to run (a backlog of jobs that run faster than a
   * claim's round trip): the database then works on the next claim while the worker runs this
   * batch, where it used to sit idle through it. The claim is planned as if this batch had already
   * run, so it adds one more batch (up to the current prefetch plus concurrency) to what the worker
   * holds. Only once the buffer's target has grown past `concurrency` (the rate meter has seen jobs
   * shorter than 100 ms on average): an idle worker meeting a burst of slow jobs does not claim
   * ahead. One claim is out at a time: this one is sent only after the last came back.
   * Not while outcomes fall behind, nor with prefetch off (as in every worker with flow control).
   */
  private async sendClaimAhead(): Promise<void> {
    if (this.state !== 'running' || this.prefetchSizer.total() <= this.settings.concurrency || this.recording >= this.recordingLimit) return;
    // As if the buffer had run; jobs still being handed back keep their room.
    const request = this.planner.plan({ ...this.load(), buffered: this.returning.length, bufferedByType: NOTHING_BUFFERED });
    if (!request) return;
    this.claimOut = true;
    const sentAt = this.now();
    const claimed = this.store.claim(request);
    // Awaited in the loop's next round (or as it ends); until then a failure must not count as unhandled.
    claimed.catch(() => undefined);
    this.claimAhead = { request, claimed, nudgesAtSend: this.nudges, sentAt };
    // node-postgres's pool hands out a connection a tick later, and a batch of short jobs runs
    // synchronously: let the statement reach the socket first, or it would go out after the batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** The loop has ended: the jobs of a claim sent ahead join the buffer, so a drain hands them back. */
  private async settleClaimAhead(): Promise<void> {
    const ahead = this.claimAhead;
    if (!ahead) return;
    this.claimAhead = null;
    try {
      this.bufferClaimed(await ahead.claimed, ahead.sentAt);
    } catch (error) {
      // A failed claim claimed nothing.
      this.claimReturned();
      this.logger.warn(`Claiming jobs failed: ${(error as Error)?.message ?? error}.`);
    }
  }

  /**
   * Claim when slots are free, or (every slot taken, and jobs finishing lately) the buffer is down
   * to its low-water mark, unless the queue looked empty recently or outcomes are falling behind.
   * Buffered jobs are started as soon as a slot frees (pump), so a free slot means the buffer is
   * empty or holds only jobs held back by their type's limits or the connections: other types'
   * jobs must still be claimed for it.
   */
  private wantsToClaim(): boolean {
    const slotsFree = this.running < this.settings.concurrency;
    // Cheapest tests first: this runs each time a job finishes.
    if ((!slotsFree && this.unstarted > this.prefetch * LOW_WATER) || this.recording >= this.recordingLimit) return false;
    if (this.queueLooksEmpty && monotonicNow() - this.lastClaimAt < this.settings.pollIntervalMs) return false;
    if (slotsFree) return true;
    // Every slot is taken: top the buffer up only while jobs are finishing. A worker whose handlers
    // all run long (or hang) claims nothing it could not start. (With several types, the plan may
    // still come out empty, every type held to its own share: a wasted round, at low rates only.)
    const target = this.prefetchSizer.total();
    return target > 0 && this.unstarted <= target * LOW_WATER;
  }

  /**
   * Claimed jobs not started: buffered, or being handed back. Those being handed back take buffer
   * room too, so hand-backs that keep failing cannot grow what the worker holds pass after pass.
   */
  private get unstarted(): number {
    return this.buffer.length + this.returning.length;
  }

  /**
   * Wakes the claim loop only when it would claim: a busy worker frees a slot per job, and waking
   * the loop for each of them costs more than the jobs themselves when they are short.
   */
  private wakeIfClaimDue(): void {
    if (this.state === 'running' && this.wantsToClaim()) this.wake.notify();
  }

  /** Finished jobs whose outcome is still being written. */
  private get recording(): number {
    return this.active.size - this.running;
  }

  /**
   * Outcomes not yet written, at most, before claims pause. Writes overlap claims (that is what
   * keeps the database busy on both), but if they fall behind, claiming stops until they land, so
   * a backlog never grows toward an expiring lease.
   */
  private get recordingLimit(): number {
    return 2 * Math.max(this.settings.concurrency, this.prefetch);
  }

  private load() {
    return {
      running: this.running,
      runningByType: this.runningByType,
      runningTransactional: this.runningTransactional,
      buffered: this.unstarted,
      bufferedByType: this.bufferedByType,
      prefetch: this.prefetchSizer.total(),
      prefetchByType: this.prefetchSizer.perType(),
    };
  }

  /**
   * Hands back the buffered jobs still not started `waitedMs` after their claim, their claim's
   * attempt undone, for any worker to take; resolves to how many went back. The buffer holds about
   * 100 ms of work, so a job that has waited far longer is not starting soon here: its slots are
   * held by handlers that run long (or hang), or its type's limit or the connections are. The
   * lease keeper calls this each pass, after renewing. One hand-back at a time, and none once a
   * drain has begun (the drain hands back everything unstarted).
   */
  handBackWaiting(waitedMs: number): Promise<number> {
    if (this.handingBack || this.state !== 'running') return Promise.resolve(0);
    const claimedBefore = this.now() - waitedMs;
    // The buffer is in claim order: the jobs that waited longest lead it.
    let waiting = 0;
    while (waiting < this.buffer.length && this.buffer[waiting].claimedAt <= claimedBefore) waiting++;
    for (const attempt of this.buffer.splice(0, waiting)) {
      this.countBuffered(attempt.job.type, -1);
      this.returning.push(attempt);
    }
    if (this.returning.length === 0) return Promise.resolve(0);
    const batch = [...this.returning];
    const handingBack = this.store.release(batch).then(
      (ids) => {
        // Those not released had lost their lease already: not this worker's either way.
        const sent = new Set(batch);
        let kept = 0;
        for (const attempt of this.returning) if (!sent.has(attempt)) this.returning[kept++] = attempt;
        this.returning.length = kept;
        if (ids.length > 0) {
          this.logger.log(`Handed back ${ids.length} prefetched job(s) that found no free slot here since their claim; any worker can take them.`);
        }
        return ids.length;
      },
      (error: unknown) => {
        this.logger.warn(
          `Could not hand back ${batch.length} prefetched job(s): ${(error as Error)?.message}. This worker keeps their leases, starts none of them, and tries again at its next lease renewal.`,
        );
        return 0;
      },
    );
    this.handingBack = handingBack;
    void handingBack.then(() => (this.handingBack = null));
    return handingBack;
  }

  /** Starts buffered jobs, in claim order, while slots (and their type's limits) allow. */
  private pump(): void {
    if (this.state !== 'running' || this.pumping) return;
    this.pumping = true;
    try {
      this.startBuffered();
    } finally {
      this.pumping = false;
    }
  }

  private startBuffered(): void {
    for (let i = 0; i < this.buffer.length && this.running < this.settings.concurrency; ) {
      const { job, handler } = this.buffer[i];
      const typeFull = (this.runningByType.get(job.type) ?? 0) >= handler.concurrency;
      const noConnection = handler.transactional && this.runningTransactional >= this.transactionalCapacity;
      if (typeFull || noConnection) {
        i++;
        continue;
      }
      const next = i === 0 ? this.buffer.shift()! : this.buffer.splice(i, 1)[0];
      this.countBuffered(job.type, -1);
      this.launch(next);
    }
  }

  /**
   * Starts one attempt. The steps after the handler are continuations rather than one async
   * function: a handler that returns synchronously is recorded without a promise turn per step,
   * which for short jobs is most of the worker's cost per job.
   */
  private launch(entry: WorkerAttempt): void {
    const { job, handler } = entry;
    entry.slotHeld = true;
    if (this.prefetchSizer.timesTypes) entry.startedAt = this.now();
    this.active.set(job.id, entry);
    this.holdSlot(handler, 1);
    if (handler.rateLimit) {
      this.markStarted(job).then(() => this.run(entry), (error: unknown) => this.internalError(entry, error));
    } else {
      this.run(entry);
    }
  }

  private run(entry: WorkerAttempt): void {
    let outcome: AttemptOutcome | PromiseLike<AttemptOutcome>;
    try {
      // Interrupted while its start was being recorded (rate limits): the handler must not run.
      const interruption = entry.interruption;
      outcome = interruption ? { kind: 'interrupted', reason: interruption } : this.runner.run(entry.job, entry.handler, entry);
    } catch (error) {
      this.internalError(entry, error);
      return;
    }
    if (isThenable(outcome)) {
      outcome.then((settled) => this.handlerDone(entry, settled), (error: unknown) => this.internalError(entry, error));
    } else {
      this.handlerDone(entry, outcome);
    }
  }

  /**
   * The handler is done: its slot takes the next job while the outcome is written. Never throws:
   * whatever goes wrong, the attempt still ends (the lease expiry recovers its job).
   */
  private handlerDone(entry: WorkerAttempt, outcome: AttemptOutcome): void {
    try {
      this.recordOutcome(entry, outcome);
    } catch (error) {
      this.internalError(entry, error);
    }
  }

  private recordOutcome(entry: WorkerAttempt, outcome: AttemptOutcome): void {
    this.prefetchSizer.record(entry.handler.type, entry.startedAt);
    this.freeSlot(entry);
    if (outcome.kind === 'succeeded') {
      // The hot path: the attempt itself joins the completion batch and hears back (completionSettled).
      entry.resultJson = outcome.resultJson;
      this.recorder.recordSuccess(entry);
      return;
    }
    this.finishAfter(entry, this.recorder.record(entry.job, entry.handler, outcome, entry));
  }

  completionSettled(entry: WorkerAttempt, applied: boolean): void {
    try {
      this.finishAfter(entry, this.recorder.completionWritten(entry.job, entry.handler, applied));
    } catch (error) {
      this.internalError(entry, error);
    }
  }

  completionFailed(entry: WorkerAttempt, error: unknown): void {
    try {
      this.finishAfter(entry, this.recorder.retryCompletion(entry.job, entry.handler, entry.resultJson, entry, error));
    } catch (error) {
      this.internalError(entry, error);
    }
  }

  private finishAfter(entry: WorkerAttempt, recording: Promise<void> | undefined): void {
    if (recording) recording.then(() => this.finishedSafely(entry), (error: unknown) => this.internalError(entry, error));
    else this.finished(entry);
  }

  private finishedSafely(entry: WorkerAttempt): void {
    try {
      this.finished(entry);
    } catch (error) {
      this.internalError(entry, error);
    }
  }

  /** Defensive: runner and recorder do not throw; if they ever do, the lease expiry recovers the job. */
  private internalError(entry: WorkerAttempt, error: unknown): void {
    this.logger.error(`Internal error while running job ${entry.job.id} (${entry.job.type}): ${(error as Error)?.stack ?? error}`);
    this.finished(entry);
  }

  /** The attempt is over (recorded, or given up on). */
  private finished(entry: WorkerAttempt): void {
    this.freeSlot(entry);
    // A newer attempt of the same job may have taken this id's place (see dropStaleAttempts).
    if (this.active.get(entry.job.id) === entry) this.active.delete(entry.job.id);
    if (this.active.size === 0) this.allRecorded.notify();
    // A recorded outcome may lift the pause on claims (outcomes falling behind).
    this.wakeIfClaimDue();
  }

  /** Resolves once no started job is left unrecorded, or at `deadline` (monotonic ms). */
  private async untilAllRecorded(deadline: number): Promise<void> {
    while (this.active.size > 0) {
      const left = deadline - monotonicNow();
      if (left <= 0) return;
      await this.allRecorded.wait(Math.min(left, 2 ** 31 - 1));
    }
  }

  private freeSlot(entry: WorkerAttempt): void {
    if (!entry.slotHeld) return;
    entry.slotHeld = false;
    this.holdSlot(entry.handler, -1);
    this.pump();
    if (this.typesWithMore.size > 0 && this.typesWithMore.has(entry.handler.type)) this.queueLooksEmpty = false;
    this.wakeIfClaimDue();
  }

  /** Rate limits count starts: record this one as of now, however late after its claim it is. */
  private async markStarted(job: ClaimedJob): Promise<void> {
    try {
      await this.store.markStarted(job.id);
    } catch (error) {
      this.logger.warn(`Could not record the start of job ${job.id} (${job.type}): ${(error as Error)?.message}`);
    }
  }

  private holdSlot(handler: RegisteredHandler, delta: 1 | -1): void {
    this.running += delta;
    this.runningByType.set(handler.type, (this.runningByType.get(handler.type) ?? 0) + delta);
    if (handler.transactional) this.runningTransactional += delta;
  }

  private countBuffered(type: string, delta: 1 | -1): void {
    this.bufferedByType.set(type, (this.bufferedByType.get(type) ?? 0) + delta);
  }

  /** Buffered jobs never started: back to pending, their claim's attempt undone. */
  private async releaseBuffer(): Promise<number> {
    const unstarted = [...this.buffer.splice(0), ...this.returning.splice(0)];
    this.bufferedByType.clear();
    if (unstarted.length === 0) return 0;
    // Tried a few times: a job left to its lease's expiry has an attempt counted that never ran,
    // and on its last attempt it would be dead-lettered unrun.
    for (let tries = 0; ; tries++) {
      try {
        return (await this.store.release(unstarted)).length;
      } catch (error) {
        if (tries >= HAND_BACK_RETRY_DELAYS_MS.length) {
          this.logger.error(
            `Could not hand back ${unstarted.length} unstarted job(s): ${(error as Error)?.message}. ` +
              'Their leases will expire and they will be retried.',
          );
          return 0;
        }
        await new Promise((resolve) => setTimeout(resolve, HAND_BACK_RETRY_DELAYS_MS[tries]));
      }
    }
  }
}
