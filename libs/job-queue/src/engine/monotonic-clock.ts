import { performance } from 'node:perf_hooks';

/**
 * Milliseconds on a clock that never steps, unlike Date.now (NTP, a resumed VM): the engine's
 * ages and intervals within this process (claims, renewals, run times, rates) are measured on it,
 * so a wall-clock step neither presumes leases lost nor pauses hand-backs. Not an epoch time.
 */
export const monotonicNow = (): number => performance.now();
