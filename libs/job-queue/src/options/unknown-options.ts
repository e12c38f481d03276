import type { JobQueueOptions, RetentionOptions, RetryOptions } from './job-queue-options.js';

/** Every key JobQueueOptions has: the type makes a new option fail to compile until it is listed. */
const KNOWN: Record<keyof JobQueueOptions, true> = {
  dataSource: true,
  schema: true,
  autoMigrate: true,
  runWorker: true,
  workerId: true,
  concurrency: true,
  prefetch: true,
  pollIntervalMs: true,
  leaseMs: true,
  drainTimeoutMs: true,
  maxQueueDepth: true,
  maxQueueDepthByType: true,
  depthRefreshMs: true,
  retry: true,
  deadLetterAlertThreshold: true,
  listen: true,
  synchronousClaims: true,
  maintenanceIntervalMs: true,
  heartbeatIntervalMs: true,
  metrics: true,
  tracing: true,
  retention: true,
};
const KNOWN_RETRY: Record<keyof RetryOptions, true> = { maxAttempts: true, baseDelayMs: true, maxDelayMs: true };
const KNOWN_RETENTION: Record<keyof RetentionOptions, true> = { completedMs: true, deadMs: true };
/** Added by Nest's ConfigurableModuleBuilder (forRoot's `isGlobal`), not by the user's typo. */
const BUILDER_EXTRAS = new Set(['isGlobal']);

/**
 * Option keys the module does not know (a typo such as `concurrenc`, which TypeScript catches in
 * a literal but not in an object from a config factory), as paths: `retry.maxAttemps`.
 */
export function unknownOptionKeys(options: JobQueueOptions): string[] {
  const unknown = Object.keys(options).filter((key) => !(key in KNOWN) && !BUILDER_EXTRAS.has(key));
  const nested = (name: string, value: unknown, known: object) => {
    if (value && typeof value === 'object') for (const key of Object.keys(value)) if (!(key in known)) unknown.push(`${name}.${key}`);
  };
  nested('retry', options.retry, KNOWN_RETRY);
  nested('retention', options.retention, KNOWN_RETENTION);
  return unknown;
}
