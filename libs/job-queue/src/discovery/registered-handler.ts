import type { PayloadSchema } from '../decorators/job-handler-options.js';
import type { JobContext } from '../engine/job-context.js';
import type { CronSchedule } from '../schedules/cron-schedule.js';

/** A discovered handler with its options resolved against the module defaults. */
export interface RegisteredHandler {
  readonly type: string;
  /** `Provider.method`, for error messages and logs. */
  readonly location: string;
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly concurrency: number;
  readonly timeoutMs: number | null;
  readonly schema: PayloadSchema | null;
  readonly transactional: boolean;
  readonly circuitBreaker: { readonly failureThreshold: number; readonly cooldownMs: number } | null;
  readonly rateLimit: { readonly max: number; readonly perMs: number } | null;
  readonly globalConcurrency: number | null;
  readonly schedule: CronSchedule | null;
  invoke(payload: unknown, job: JobContext): unknown;
}
