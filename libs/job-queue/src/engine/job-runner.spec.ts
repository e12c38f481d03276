import type { EntityManager } from 'typeorm';
import { describe, expect, it, vi } from 'vitest';
import type { RegisteredHandler } from '../base/registered-handler.js';
import { JobTimeoutError } from '../errors/job-timeout.error.js';
import { PermanentJobError } from '../errors/permanent-job.error.js';
import type { ClaimedJob, JobStore, JobTransaction } from '../persistence/job.store.js';
import { AttemptControl } from './attempt-control.js';
import type { EffectLedger } from './effect-ledger.js';
import type { JobContext } from '../base/job-context.js';
import { handlerStub } from '../base/registered-handler.stub.js';
import { JobRunner, type HandlerEnqueue } from './job-runner.js';

const job: ClaimedJob = {
  id: '42',
  type: 'email.welcome',
  payload: { to: 'ada@example.com' },
  attempt: 2,
  maxAttempts: 5,
  idempotencyKey: 'signup-42',
  leaseToken: 'lease-token-1',
};

function handler(invoke: RegisteredHandler['invoke'], overrides: Partial<RegisteredHandler> = {}): RegisteredHandler {
  return handlerStub({ type: job.type, invoke, ...overrides });
}

/** A transaction double that records what the runner did with it. */
function fakeTransaction(completeApplies = true) {
  const calls: string[] = [];
  const manager = { query: async () => [], connection: {} } as unknown as EntityManager;
  const tx: JobTransaction = {
    manager,
    complete: vi.fn(async () => {
      calls.push('complete');
      return completeApplies;
    }),
    commit: vi.fn(async () => {
      calls.push('commit');
    }),
    rollback: vi.fn(async () => {
      calls.push('rollback');
    }),
    abandon: vi.fn(() => {
      calls.push('abandon');
    }),
  };
  return { tx, calls, manager };
}

/** A thrown object whose every way of being printed throws. */
function unprintable(): object {
  const fail = () => {
    throw new Error('no');
  };
  return { toString: fail, toJSON: fail, [Symbol.toPrimitive]: fail };
}

function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

function setup(tx?: JobTransaction | Error) {
  const enqueue = vi.fn<HandlerEnqueue>(async () => ({ id: '99', deduplicated: false }));
  const ledger = { once: vi.fn(async (_job: unknown, _key: string, fn: () => unknown) => fn()) };
  const store = {
    beginJobTransaction: vi.fn(async () => {
      if (!tx) throw new Error('beginJobTransaction was not expected');
      if (tx instanceof Error) throw tx;
      return tx;
    }),
  };
  const runner = new JobRunner(store as unknown as JobStore, ledger as unknown as EffectLedger, enqueue);
  return { runner, enqueue, ledger, store };
}

/** A handler that never settles and says when it has started. */
function hanging() {
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const seen: { job?: JobContext } = {};
  const invoke = (_payload: unknown, context: JobContext) => {
    seen.job = context;
    markStarted();
    return new Promise<never>(() => undefined);
  };
  return { invoke, started, seen };
}

describe('JobRunner', () => {
  describe('results', () => {
    it('turns a returned value into succeeded with its JSON', async () => {
      const control = new AttemptControl();
      const outcome = await setup().runner.run(job, handler(async () => ({ sent: true, n: [1, 2] })), control);
      expect(outcome).toEqual({ kind: 'succeeded', resultJson: '{"sent":true,"n":[1,2]}' });
      expect(control.signal.aborted).toBe(false);
    });

    it('accepts a synchronous handler', async () => {
      const outcome = await setup().runner.run(job, handler(() => 7), new AttemptControl());
      expect(outcome).toEqual({ kind: 'succeeded', resultJson: '7' });
    });

    it.each<[string, unknown]>([
      ['undefined', undefined],
      ['null', null],
      ['a function', () => 1],
    ])('stores %s as null', async (_label, value) => {
      const outcome = await setup().runner.run(job, handler(async () => value), new AttemptControl());
      expect(outcome).toEqual({ kind: 'succeeded', resultJson: 'null' });
    });

    it('fails (retryable) when the result is circular', async () => {
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      const outcome = await setup().runner.run(job, handler(async () => circular), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect((outcome as { error: string }).error).toContain('not JSON-serialisable');
    });

    it('fails (retryable) when the result holds a BigInt', async () => {
      const outcome = await setup().runner.run(job, handler(async () => ({ total: 10n })), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect((outcome as { error: string }).error).toContain('not JSON-serialisable');
    });

    it('fails when the result holds a NUL character, which jsonb cannot store', async () => {
      const outcome = await setup().runner.run(job, handler(async () => ({ text: 'a\u0000b' })), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect((outcome as { error: string }).error).toContain('NUL');
    });

    it('fails when the result holds a lone surrogate (a string cut inside an emoji), which jsonb cannot store', async () => {
      const cut = '👋 hello'.slice(0, 1);
      const outcome = await setup().runner.run(job, handler(async () => ({ text: cut })), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect((outcome as { error: string }).error).toContain('lone UTF-16 surrogate (\\ud83d');
    });

    it('stores a result holding whole emoji, and a literal backslash followed by "ud83d"', async () => {
      const text = '👋 C:\\ud83d';
      const outcome = await setup().runner.run(job, handler(async () => ({ text })), new AttemptControl());
      expect(outcome).toEqual({ kind: 'succeeded', resultJson: JSON.stringify({ text }) });
    });

    it('stores a result holding a literal backslash followed by "u0000" (text, not a NUL; jsonb stores it fine)', async () => {
      const text = 'C:\\u0000\\file'; // a backslash, then the letters u0000: no NUL character anywhere
      const outcome = await setup().runner.run(job, handler(async () => ({ text })), new AttemptControl());
      expect(outcome).toEqual({ kind: 'succeeded', resultJson: JSON.stringify({ text }) });
    });
  });

  describe('failures', () => {
    it.each<[string, () => unknown, string]>([
      ['an Error', () => { throw new Error('smtp refused'); }, 'smtp refused'],
      ['a TypeError', () => { throw new TypeError('x is not a function'); }, 'TypeError: x is not a function'],
      ['a rejected promise', () => Promise.reject(new Error('later')), 'later'],
      ['a string', () => { throw 'plain string'; }, 'plain string'],
      ['undefined', () => { throw undefined; }, 'non-Error thrown: undefined'],
      ['an object', () => { throw { status: 503 }; }, 'non-Error thrown: {"status":503}'],
      ['an empty string', () => { throw ''; }, 'thrown empty string'],
      ['an Error whose message holds NUL', () => { throw new Error('bad byte \u0000 here'); }, 'bad byte \uFFFD here'],
      ['an Error whose message is not a string', () => { throw Object.assign(new Error(), { message: 42 }); }, 'Error'],
      ['an object that cannot be printed', () => { throw unprintable(); }, 'thrown value that cannot be printed'],
      ['a revoked Proxy', () => { throw revokedProxy(); }, 'thrown value that cannot be printed'],
    ])('turns a throw of %s into a retryable failure with a readable message', async (_label, invoke, message) => {
      const outcome = await setup().runner.run(job, handler(invoke), new AttemptControl());
      expect(outcome).toEqual({ kind: 'failed', error: message, permanent: false });
    });

    it('marks PermanentJobError as permanent', async () => {
      const outcome = await setup().runner.run(
        job,
        handler(async () => {
          throw new PermanentJobError('customer deleted');
        }),
        new AttemptControl(),
      );
      expect(outcome).toMatchObject({ kind: 'failed', permanent: true });
      expect((outcome as { error: string }).error).toContain('customer deleted');
    });

    it('marks an error carrying the permanent code as permanent (another copy of the library)', async () => {
      const foreign = Object.assign(new Error('refused'), { code: 'JOB_PERMANENT_FAILURE' });
      const outcome = await setup().runner.run(job, handler(async () => Promise.reject(foreign)), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: true });
    });
  });

  describe('schema', () => {
    it('passes the schema’s output, not the raw payload, to the handler', async () => {
      const received: unknown[] = [];
      const schema = { parse: (input: unknown) => ({ ...(input as object), parsed: true }) };
      const outcome = await setup().runner.run(
        job,
        handler((payload) => received.push(payload), { schema }),
        new AttemptControl(),
      );
      expect(outcome.kind).toBe('succeeded');
      expect(received).toEqual([{ to: 'ada@example.com', parsed: true }]);
    });

    it('fails permanently with "invalid payload" when parse throws, without calling the handler', async () => {
      const invoke = vi.fn();
      const schema = {
        parse: () => {
          throw new Error('to: expected an e-mail address');
        },
      };
      const outcome = await setup().runner.run(job, handler(invoke, { schema }), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: true });
      const error = (outcome as { error: string }).error;
      expect(error.startsWith('invalid payload')).toBe(true);
      expect(error).toContain('to: expected an e-mail address');
      expect(invoke).not.toHaveBeenCalled();
    });

    it('treats a schema whose parse throws a non-Error the same way', async () => {
      const schema = {
        parse: () => {
          throw 'nope';
        },
      };
      const outcome = await setup().runner.run(job, handler(() => 1, { schema }), new AttemptControl());
      expect(outcome).toEqual({ kind: 'failed', error: 'invalid payload: nope', permanent: true });
    });

    it('an async parse that rejects is an invalid payload too', async () => {
      const schema = { parse: async () => Promise.reject(new Error('unknown plan')) };
      const outcome = await setup().runner.run(job, handler(() => 1, { schema }), new AttemptControl());
      expect(outcome).toEqual({ kind: 'failed', error: 'invalid payload: unknown plan', permanent: true });
    });

    it('an async parse that never settles times out like a handler, and the handler never runs', async () => {
      const invoke = vi.fn();
      const schema = { parse: () => new Promise(() => undefined) };
      const outcome = await setup().runner.run(job, handler(invoke, { schema, timeoutMs: 20 }), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect((outcome as { error: string }).error).toContain('20 ms');
      expect(invoke).not.toHaveBeenCalled();
    });

    it('an async parse that never settles ends when the attempt is interrupted', async () => {
      const control = new AttemptControl();
      const schema = { parse: () => new Promise(() => undefined) };
      const running = setup().runner.run(job, handler(() => 1, { schema }), control);
      control.interrupt('drain', new Error('shutdown'));
      expect(await running).toEqual({ kind: 'interrupted', reason: 'drain' });
    });
  });

  describe('the JobContext', () => {
    it('describes the job and carries the attempt’s signal', async () => {
      const control = new AttemptControl();
      let seen: JobContext | undefined;
      await setup().runner.run(job, handler((_payload, context) => (seen = context)), control);
      expect(seen).toMatchObject({ id: '42', type: 'email.welcome', attempt: 2, maxAttempts: 5, idempotencyKey: 'signup-42' });
      expect(seen!.signal).toBe(control.signal);
      expect(seen!.manager).toBeUndefined();
    });

    it('routes job.enqueue and job.once to the producer and the effect ledger', async () => {
      const { runner, enqueue, ledger } = setup();
      const outcome = await runner.run(
        job,
        handler(async (_payload, context) => {
          await context.enqueue('email.followup', { day: 2 }, { delayMs: 10 });
          return context.once('charge', () => 'charged');
        }),
        new AttemptControl(),
      );
      expect(outcome).toEqual({ kind: 'succeeded', resultJson: '"charged"' });
      expect(enqueue).toHaveBeenCalledWith('email.followup', { day: 2 }, { delayMs: 10 });
      expect(ledger.once).toHaveBeenCalledWith(job, 'charge', expect.any(Function));
    });
  });

  describe('timeout', () => {
    it('fails a handler that never settles, aborting its signal', async () => {
      const control = new AttemptControl();
      const { invoke } = hanging();
      const outcome = await setup().runner.run(job, handler(invoke, { timeoutMs: 30 }), control);
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect((outcome as { error: string }).error).toContain('timed out');
      expect(control.signal.aborted).toBe(true);
      expect(control.signal.reason).toBeInstanceOf(JobTimeoutError);
      expect(control.interruption).toBeNull();
    });

    it('leaves a handler that finishes in time alone', async () => {
      const control = new AttemptControl();
      const outcome = await setup().runner.run(job, handler(async () => 'quick', { timeoutMs: 5_000 }), control);
      expect(outcome).toEqual({ kind: 'succeeded', resultJson: '"quick"' });
      expect(control.signal.aborted).toBe(false);
    });
  });

  describe('interruption', () => {
    it("ends the attempt on interrupt('lease-lost') although the handler ignores its signal", async () => {
      const control = new AttemptControl();
      const { invoke, started, seen } = hanging();
      const running = setup().runner.run(job, handler(invoke), control);
      await started;
      const reason = new Error('lease lost');
      control.interrupt('lease-lost', reason);
      expect(await running).toEqual({ kind: 'interrupted', reason: 'lease-lost' });
      expect(seen.job!.signal.aborted).toBe(true);
      expect(seen.job!.signal.reason).toBe(reason);
    });

    it.each(['cancelled', 'drain'] as const)("reports interrupt('%s') with its reason", async (why) => {
      const control = new AttemptControl();
      const { invoke, started } = hanging();
      const running = setup().runner.run(job, handler(invoke, { timeoutMs: 60_000 }), control);
      await started;
      control.interrupt(why, new Error(why));
      expect(await running).toEqual({ kind: 'interrupted', reason: why });
      expect(control.signal.aborted).toBe(true);
    });

    it('stays interrupted when the handler rejects because its signal aborted', async () => {
      const control = new AttemptControl();
      const running = setup().runner.run(
        job,
        handler(
          (_payload, context) =>
            new Promise((_resolve, reject) => context.signal.addEventListener('abort', () => reject(context.signal.reason))),
        ),
        control,
      );
      await Promise.resolve();
      await new Promise((resolve) => setImmediate(resolve));
      control.interrupt('lease-lost', new Error('lease lost'));
      expect(await running).toEqual({ kind: 'interrupted', reason: 'lease-lost' });
    });

    it('discards a result that arrives together with an interruption', async () => {
      const control = new AttemptControl();
      const outcome = await setup().runner.run(
        job,
        handler(() => {
          control.interrupt('lease-lost', new Error('lease lost'));
          return 'late result';
        }),
        control,
      );
      expect(outcome).toEqual({ kind: 'interrupted', reason: 'lease-lost' });
    });
  });

  describe('transactional handlers', () => {
    it('completes the job inside the handler’s transaction and commits', async () => {
      const { tx, calls, manager } = fakeTransaction();
      const { runner, enqueue } = setup(tx);
      let seen: JobContext | undefined;
      const outcome = await runner.run(
        job,
        handler(
          async (_payload, context) => {
            seen = context;
            await context.enqueue('email.followup', { day: 2 });
            return { ok: true };
          },
          { transactional: true },
        ),
        new AttemptControl(),
      );
      expect(outcome).toEqual({ kind: 'committed' });
      expect(calls).toEqual(['complete', 'commit']);
      expect(tx.complete).toHaveBeenCalledWith(job, '{"ok":true}');
      expect(seen!.manager).toBe(manager);
      expect(enqueue).toHaveBeenCalledWith('email.followup', { day: 2 }, { manager });
    });

    it('rolls back and reports lease-lost when the fenced completion does not apply', async () => {
      const { tx, calls } = fakeTransaction(false);
      const outcome = await setup(tx).runner.run(job, handler(async () => 1, { transactional: true }), new AttemptControl());
      expect(outcome).toEqual({ kind: 'interrupted', reason: 'lease-lost' });
      expect(calls).toEqual(['complete', 'rollback']);
    });

    it('rolls back when the handler throws', async () => {
      const { tx, calls } = fakeTransaction();
      const outcome = await setup(tx).runner.run(
        job,
        handler(
          async () => {
            throw new Error('insert failed');
          },
          { transactional: true },
        ),
        new AttemptControl(),
      );
      expect(outcome).toEqual({ kind: 'failed', error: 'insert failed', permanent: false });
      expect(calls).toEqual(['rollback']);
    });

    it('rolls back when the result cannot be stored', async () => {
      const { tx, calls } = fakeTransaction();
      const outcome = await setup(tx).runner.run(job, handler(async () => 1n, { transactional: true }), new AttemptControl());
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect(calls).toEqual(['rollback']);
    });

    it('fails the attempt (retryable) when the transaction cannot be opened', async () => {
      const invoke = vi.fn();
      const outcome = await setup(new Error('pool exhausted')).runner.run(
        job,
        handler(invoke, { transactional: true }),
        new AttemptControl(),
      );
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect((outcome as { error: string }).error).toContain('pool exhausted');
      expect(invoke).not.toHaveBeenCalled();
    });

    it('abandons the transaction on timeout: the handler may still be running', async () => {
      const { tx, calls } = fakeTransaction();
      const control = new AttemptControl();
      const outcome = await setup(tx).runner.run(job, handler(hanging().invoke, { transactional: true, timeoutMs: 30 }), control);
      expect(outcome).toMatchObject({ kind: 'failed', permanent: false });
      expect(calls).toEqual(['abandon']);
      expect(control.signal.aborted).toBe(true);
    });

    it('abandons the transaction when the attempt is interrupted', async () => {
      const { tx, calls } = fakeTransaction();
      const control = new AttemptControl();
      const { invoke, started } = hanging();
      const outcome = setup(tx).runner.run(job, handler(invoke, { transactional: true }), control);
      await started;
      control.interrupt('cancelled', new Error('job was cancelled'));
      expect(await outcome).toEqual({ kind: 'interrupted', reason: 'cancelled' });
      expect(calls).toEqual(['abandon']);
    });
  });
});
