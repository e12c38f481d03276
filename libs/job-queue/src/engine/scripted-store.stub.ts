import type { EngineLogger } from '../base/logger.js';
import type { HandlerLookup, RegisteredHandler } from '../base/registered-handler.js';
import { StoreUnavailableError } from '../errors/store-unavailable.error.js';
import type { JobQueueEvent } from '../events/job-queue-event.js';
import type { ClaimedJob, ClaimRequest, JobStore, Lease, SentClaim } from '../persistence/job.store.js';
import { CompletionBatcher } from './completion-batcher.js';
import { EffectLedger } from './effect-ledger.js';
import { JobRunner } from './job-runner.js';
import { OutcomeRecorder } from './outcome-recorder.js';
import { RetryPolicy } from './retry-policy.js';
import { Worker } from './worker.js';

// Test support for the engine's unit specs (not shipped: the build leaves out *.stub.ts).

/**
 * A store double holding jobs in memory: claims hand out what the test queued, with a fresh token
 * each, and every post-claim write is fenced by the token like the real statements. Completion
 * writes wait at a gate the test opens, so it can act while they are in flight.
 */
export class ScriptedStore {
  readonly waiting: ClaimedJob[] = [];
  /** The token each job's current lease holds (absent: not running). */
  readonly leases = new Map<string, string>();
  readonly completed: string[] = [];
  readonly released: string[] = [];
  readonly started: string[] = [];
  /** While set, every completion write fails (the database away); counts the tries. */
  failCompletions = false;
  /** This many release calls fail before one goes through. */
  failReleases = 0;
  completionTries = 0;
  private claims = 0;
  private gate: Promise<void> | null = null;
  private openGate: (() => void) | null = null;
  private startGate: Promise<void> | null = null;
  private openStartGate: (() => void) | null = null;

  queue(...ids: string[]): void {
    for (const id of ids) this.waiting.push({ id, type: 'unit.job', payload: { id }, attempt: 1, maxAttempts: 3, idempotencyKey: null, leaseToken: '' });
  }

  holdCompletions(): void {
    this.gate = new Promise((resolve) => (this.openGate = resolve));
  }

  releaseCompletions(): void {
    this.openGate?.();
    this.gate = null;
  }

  holdStarts(): void {
    this.startGate = new Promise((resolve) => (this.openStartGate = resolve));
  }

  releaseStarts(): void {
    this.openStartGate?.();
    this.startGate = null;
  }

  async claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    const token = `claim-${++this.claims}`;
    const taken = this.waiting.splice(0, request.limit);
    for (const job of taken) this.leases.set(job.id, token);
    // As the real claim: the first `startNow` jobs are charged, the rest prefetched.
    const startNow = request.startNow ?? request.limit;
    return taken.map((job, i) => ({ ...job, leaseToken: token, prefetched: i >= startNow }));
  }

  /** As the real store: resolves once the claim is on its way (a pool hands out a connection a tick later). */
  async sendClaim(request: ClaimRequest): Promise<SentClaim> {
    const claimed = this.claim(request);
    claimed.catch(() => undefined);
    await new Promise<void>((resolve) => setImmediate(resolve));
    return { claimed };
  }

  /** Returns the ids whose lease was gone, as the real store does. */
  async completeMany(items: ReadonlyArray<{ lease: Lease; resultJson: string }>, confirms: readonly Lease[] = []): Promise<Set<string>> {
    await this.gate;
    this.completionTries++;
    if (this.failCompletions) throw new StoreUnavailableError(new Error('connection refused'));
    this.recordConfirms(confirms);
    const missed = new Set<string>();
    for (const { lease } of items) {
      if (this.leases.get(lease.id) !== lease.leaseToken) {
        missed.add(lease.id);
        continue;
      }
      this.leases.delete(lease.id);
      this.completed.push(lease.id);
    }
    return missed;
  }

  async complete(lease: Lease, resultJson: string): Promise<boolean> {
    return !(await this.completeMany([{ lease, resultJson }])).has(lease.id);
  }

  async release(leases: readonly Lease[]): Promise<string[]> {
    if (this.failReleases > 0) {
      this.failReleases--;
      throw new StoreUnavailableError(new Error('connection refused'));
    }
    const released = leases.filter((lease) => this.leases.get(lease.id) === lease.leaseToken).map((lease) => lease.id);
    for (const id of released) this.leases.delete(id);
    this.released.push(...released);
    return released;
  }

  /** Starts of prefetched attempts charged, in order (only those still held). */
  readonly confirmed: string[] = [];

  async confirmStarts(leases: readonly Lease[]): Promise<number> {
    return this.recordConfirms(leases);
  }

  private recordConfirms(leases: readonly Lease[]): number {
    const held = leases.filter((lease) => this.leases.get(lease.id) === lease.leaseToken);
    this.confirmed.push(...held.map((lease) => lease.id));
    return held.length;
  }

  async markStarted(jobId: string): Promise<void> {
    await this.startGate;
    this.started.push(jobId);
  }

  async renewLeases(): Promise<never[]> {
    return [];
  }
}

export const quietLogger: EngineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };
export const tick = () => new Promise((resolve) => setImmediate(resolve));

/** The handlers given, by type. */
export function handlersOf(...handlers: RegisteredHandler[]): HandlerLookup {
  const byType = new Map(handlers.map((handler) => [handler.type, handler]));
  return { get: (type) => byType.get(type), types: () => [...byType.keys()], all: () => [...byType.values()] };
}

export async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const started: Worker[] = [];

/** Drains every worker made by workerOn (each spec's afterEach). */
export async function drainWorkers(): Promise<void> {
  await Promise.all(started.splice(0).map((worker) => worker.drain(100)));
}

export interface WorkerOptions {
  concurrency?: number;
  prefetch?: number;
  pollIntervalMs?: number;
  now?: () => number;
  /** Each pause between tries of a failed outcome write. */
  writePause?: () => Promise<unknown>;
}

/** A worker with the real runner, recorder and batcher on a ScriptedStore. */
export function workerOn(handler: RegisteredHandler, options: WorkerOptions = {}) {
  const store = new ScriptedStore();
  const events: Array<Omit<JobQueueEvent, 'at'>> = [];
  const sink = { emit: (event: Omit<JobQueueEvent, 'at'>) => events.push(event) };
  const jobStore = store as unknown as JobStore;
  const recorder = new OutcomeRecorder(jobStore, new CompletionBatcher(jobStore), new RetryPolicy(), sink, quietLogger, 'w-unit', 30_000, async () => {
    await options.writePause?.();
  });
  const runner = new JobRunner(jobStore, new EffectLedger(jobStore, quietLogger), async () => {
    throw new Error('not used');
  });
  const worker = new Worker(
    {
      workerId: 'w-unit',
      concurrency: options.concurrency ?? 4,
      pollIntervalMs: options.pollIntervalMs ?? 20,
      leaseMs: 30_000,
      transactionalCapacity: Infinity,
      prefetch: options.prefetch ?? 0,
    },
    jobStore,
    handlersOf(handler),
    runner,
    recorder,
    quietLogger,
    options.now,
  );
  recorder.onRetryScheduled((delayMs) => worker.wakeIn(delayMs));
  started.push(worker);
  return { store, worker, events };
}

/** Counts the worker's decisions whether to claim, so a test can wait for some to pass. */
export function countDecisions(worker: Worker): () => number {
  const pacer = (worker as unknown as { pacer: { wantsToClaim(recording: number): boolean } }).pacer;
  const decide = pacer.wantsToClaim.bind(pacer);
  let decisions = 0;
  pacer.wantsToClaim = (recording) => (decisions++, decide(recording));
  return () => decisions;
}
