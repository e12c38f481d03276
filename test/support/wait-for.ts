/**
 * Polls `check` until it returns a truthy value or the deadline passes; never a bare sleep.
 *
 * A falsy value is retried, and so is a thrown error (a query or request that failed on its way).
 * A failed assertion is not: an `expect` inside `check` that fails ends the wait at once with that
 * failure, so an invariant checked on the way (liveness still up, nothing run twice) cannot be
 * retried away. To assert that something holds the whole time, sample it with `sampleWhile`.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 15_000, intervalMs = 25, message = 'condition' }: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (error) {
      if (isAssertionFailure(error)) throw error;
      last = error;
    }
    if (performance.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${message} (last: ${last instanceof Error ? last.message : String(last)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Vitest's `expect` (chai underneath) throws an AssertionError. */
function isAssertionFailure(error: unknown): boolean {
  return error instanceof Error && error.name === 'AssertionError';
}

/**
 * Checks `invariant` every 25 ms for `ms`: a stretch in which something must not happen, long
 * enough for a process that does it wrongly to have done it. A failed expect in `invariant`
 * ends it at once. (A deadline, not a sleep: `waitFor` with the stretch as its condition.)
 */
export async function holdsThroughout(ms: number, invariant: () => Promise<void> | void, message: string): Promise<void> {
  const until = performance.now() + ms;
  await waitFor(
    async () => {
      await invariant();
      return performance.now() >= until;
    },
    { timeoutMs: ms + 15_000, message },
  );
}

export interface Sampler<S> {
  /** Stops sampling once the sample under way is in, takes a last one; resolves with every sample taken. */
  stop(): Promise<S[]>;
}

/**
 * Takes `sample` every `intervalMs`, one at a time, from now until `stop()` (which takes a last
 * one, so both ends of the stretch are sampled): for something that must hold throughout a stretch
 * of a test (liveness during an outage), where a check at a few points would miss a lapse between
 * them. A sample that throws is recorded as the error's message (a probe that got no answer is an
 * answer too). Assert on what `stop()` returns.
 */
export function sampleWhile<S>(sample: () => Promise<S>, { intervalMs = 25 }: { intervalMs?: number } = {}): Sampler<S | string> {
  const samples: Array<S | string> = [];
  const take = async () => {
    samples.push(await sample().catch((error: unknown) => `sample failed: ${error instanceof Error ? error.message : String(error)}`));
  };
  let stopped = false;
  let wake: (() => void) | null = null;
  const loop = (async () => {
    while (!stopped) {
      await take();
      if (stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  })();
  return {
    async stop() {
      if (!stopped) {
        stopped = true;
        (wake as (() => void) | null)?.();
        await loop;
        await take();
      }
      return [...samples];
    },
  };
}
