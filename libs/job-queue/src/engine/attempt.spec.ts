import { describe, expect, it } from 'vitest';
import { handlerStub } from '../base/registered-handler.stub.js';
import type { ClaimedJob } from '../persistence/job.store.js';
import { Attempt, type AttemptServices } from './attempt.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import type { JobRunner } from './job-runner.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import { quietLogger, tick } from './scripted-store.stub.js';

const job: ClaimedJob = { id: '7', type: 'email.welcome', payload: {}, attempt: 1, maxAttempts: 3, idempotencyKey: null, leaseToken: 't1' };

/**
 * An attempt with services that note each step in order. `outcome` is what the runner returns;
 * `recording` what the recorder's follow-ups return (undefined: nothing left to write).
 */
function attemptWith({
  outcome = { kind: 'succeeded', resultJson: '{"ok":1}' } as AttemptOutcome | Promise<AttemptOutcome> | (() => never),
  recording = undefined as Promise<void> | undefined,
  rateLimited = false,
  markStarted = async () => undefined as void,
  claimed = job,
  confirmed = 1,
} = {}) {
  const steps: string[] = [];
  const errors: string[] = [];
  const services = {
    runner: {
      run: () => {
        steps.push('run');
        return typeof outcome === 'function' ? outcome() : outcome;
      },
    } as unknown as JobRunner,
    recorder: {
      recordSuccess: (completion: Attempt) => void steps.push(`recordSuccess:${completion.resultJson}`),
      startConfirmation: () => void steps.push('startConfirmation'),
      startEnded: () => void steps.push('startEnded'),
      completionWritten: (_job: ClaimedJob, _handler: unknown, applied: boolean) => (steps.push(`completionWritten:${applied}`), recording),
      retryCompletion: (_job: ClaimedJob, _handler: unknown, resultJson: string, held: Attempt, error: Error) => (
        steps.push(`retryCompletion:${resultJson}:${held === attempt}:${error.message}`), recording
      ),
      record: (_job: ClaimedJob, _handler: unknown, recorded: AttemptOutcome, held: Attempt) => (
        steps.push(`record:${recorded.kind}:${held === attempt}`), recording
      ),
    } as unknown as OutcomeRecorder,
    store: {
      markStarted: async () => (steps.push('markStarted'), markStarted()),
      confirmStarts: async () => (steps.push('confirmStarts'), confirmed),
    },
    logger: { ...quietLogger, error: (message: string) => errors.push(message) },
    owner: {
      handlerReturned: (returned: Attempt) => void steps.push(`handlerReturned:${returned === attempt}`),
      attemptFinished: (finished: Attempt) => void steps.push(`attemptFinished:${finished === attempt}`),
    },
  } satisfies AttemptServices;
  const handler = handlerStub({ rateLimit: rateLimited ? { max: 10, perMs: 1_000 } : null });
  const attempt = new Attempt(claimed, handler, 5, 4, services);
  return { attempt, steps, errors };
}

describe('Attempt', () => {
  it('claimed prefetched: asks for its start to be charged as it runs, and withdraws that once its handler returns', () => {
    const { attempt, steps } = attemptWith({ claimed: { ...job, prefetched: true } });
    attempt.start();
    expect(steps).toEqual(['startConfirmation', 'run', 'startEnded', 'handlerReturned:true', 'recordSuccess:{"ok":1}']);
  });

  it('charged by its claim: no confirm at all', () => {
    const { attempt, steps } = attemptWith({ claimed: { ...job, prefetched: false } });
    attempt.start();
    expect(steps).toEqual(['run', 'handlerReturned:true', 'recordSuccess:{"ok":1}']);
  });

  it('claimed prefetched after losing a worker before: charged before its handler runs', async () => {
    const { attempt, steps } = attemptWith({ claimed: { ...job, prefetched: true, leaseExpiries: 1 } });
    attempt.start();
    expect(steps).toEqual(['confirmStarts']);
    await tick();
    expect(steps).toEqual(['confirmStarts', 'run', 'handlerReturned:true', 'recordSuccess:{"ok":1}']);
  });

  it('claimed prefetched after losing a worker, its lease gone before the charge: never runs', async () => {
    const { attempt, steps } = attemptWith({ claimed: { ...job, prefetched: true, leaseExpiries: 2 }, confirmed: 0 });
    attempt.start();
    await tick();
    expect(steps).toEqual(['confirmStarts', 'handlerReturned:true', 'record:interrupted:true', 'attemptFinished:true']);
  });

  it('is its own lease, from its claim', () => {
    const { attempt } = attemptWith();
    expect(attempt).toMatchObject({ id: '7', leaseToken: 't1', renewedAt: 4, claimedAt: 5, slotHeld: false });
    expect(attempt.lease).toBe(attempt);
  });

  it('a synchronous success: frees its slot, then joins the completion batch, all before start() returns', () => {
    const { attempt, steps } = attemptWith();
    attempt.start();
    expect(steps).toEqual(['run', 'handlerReturned:true', 'recordSuccess:{"ok":1}']);
  });

  it('hears its completion written, follows with the recorder’s bookkeeping, and tells its owner once it is over', async () => {
    let circuitWritten = () => undefined as void;
    const { attempt, steps } = attemptWith({ recording: new Promise<void>((resolve) => (circuitWritten = resolve)) });
    attempt.start();
    attempt.settled(true);
    expect(steps.slice(3)).toEqual(['completionWritten:true']);
    circuitWritten();
    await tick();
    expect(steps.slice(3)).toEqual(['completionWritten:true', 'attemptFinished:true']);
  });

  it('with nothing left to write after its completion, is over at once', () => {
    const { attempt, steps } = attemptWith();
    attempt.start();
    attempt.settled(false);
    expect(steps.slice(3)).toEqual(['completionWritten:false', 'attemptFinished:true']);
  });

  it('has the recorder retry its completion when the batch’s statement failed', async () => {
    const { attempt, steps } = attemptWith({ recording: Promise.resolve() });
    attempt.start();
    attempt.failed(new Error('connection refused'));
    await tick();
    expect(steps.slice(3)).toEqual(['retryCompletion:{"ok":1}:true:connection refused', 'attemptFinished:true']);
  });

  it('records any other outcome through the recorder, the attempt as the lease holder', async () => {
    const { attempt, steps } = attemptWith({
      outcome: Promise.resolve({ kind: 'failed', error: 'smtp refused', permanent: false }),
      recording: Promise.resolve(),
    });
    attempt.start();
    await tick();
    expect(steps).toEqual(['run', 'handlerReturned:true', 'record:failed:true', 'attemptFinished:true']);
  });

  it('a rate-limited type records its start before its handler runs', async () => {
    const { attempt, steps } = attemptWith({ rateLimited: true });
    attempt.start();
    expect(steps).toEqual(['markStarted']);
    await tick();
    expect(steps).toEqual(['markStarted', 'run', 'handlerReturned:true', 'recordSuccess:{"ok":1}']);
  });

  it('interrupted while its start is recorded: the handler never runs, the interruption is recorded', async () => {
    let started = () => undefined as void;
    const { attempt, steps } = attemptWith({ rateLimited: true, markStarted: () => new Promise<void>((resolve) => (started = resolve)) });
    attempt.start();
    attempt.interrupt('cancelled', new Error('job was cancelled'));
    started();
    await tick();
    expect(steps).toEqual(['markStarted', 'handlerReturned:true', 'record:interrupted:true', 'attemptFinished:true']);
  });

  it('a runner that throws (it must not) ends the attempt with an internal error; the lease expiry recovers the job', () => {
    const { attempt, steps, errors } = attemptWith({
      outcome: () => {
        throw new Error('bug');
      },
    });
    attempt.start();
    expect(steps).toEqual(['run', 'attemptFinished:true']);
    expect(errors).toEqual([expect.stringContaining('Internal error while running job 7')]);
  });

  it('may keep retrying a failed write only while not interrupted and no drain has timed out', () => {
    const { attempt } = attemptWith();
    expect(attempt.mayKeepWriting).toBe(true);
    attempt.drainTimedOut = true;
    expect(attempt.mayKeepWriting).toBe(false);
    const { attempt: other } = attemptWith();
    other.interrupt('lease-lost', new Error('lease lost'));
    expect(other.mayKeepWriting).toBe(false);
  });
});
