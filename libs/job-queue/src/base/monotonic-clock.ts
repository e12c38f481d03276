import { performance } from 'node:perf_hooks';

/**
 * Milliseconds on a clock that never steps, unlike Date.now (NTP, a resumed VM). Every in-process
 * age, interval and deadline is measured on it; epoch times (run_at, cron slots, events' `at`)
 * stay on Date. Not an epoch time.
 */
export const monotonicNow = (): number => performance.now();
