import { setTimeout as sleep } from 'node:timers/promises';

/** CLOCK_MONOTONIC in ns: the same clock in every process on this machine. */
export const now = (): bigint => process.hrtime.bigint();

export const msBetween = (from: bigint, to: bigint): number => Number(to - from) / 1e6;

/** Waits until the monotonic clock reaches `at` (pacing, not a wait for a condition). */
export async function sleepUntil(at: bigint): Promise<void> {
  const ms = msBetween(now(), at);
  if (ms > 0) await sleep(ms);
}

/**
 * Polls `check` every `everyMs` until it returns true; resolves with the monotonic time at which
 * it was first seen true. Rejects after `timeoutMs`.
 */
export async function pollUntil(check: () => Promise<boolean>, everyMs: number, timeoutMs: number, what: string): Promise<bigint> {
  const deadline = now() + BigInt(timeoutMs) * 1_000_000n;
  for (;;) {
    if (await check()) return now();
    if (now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
