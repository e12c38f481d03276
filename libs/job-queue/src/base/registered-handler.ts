import type { PayloadSchema } from './payload-schema.js';
import type { JobContext } from './job-context.js';

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
  /** Jobs of one group running at once across all workers; set: the type's jobs are started in turn across groups. */
  readonly groupConcurrency: number | null;
  readonly schedule: HandlerSchedule | null;
  invoke(payload: unknown, job: JobContext): unknown;
}

/** A handler's cron schedule, as the scheduler reads it (CronSchedule implements it). */
export interface HandlerSchedule {
  readonly expression: string;
  readonly timezone: string;
  /** The first slot after `after`, or null if there is none. */
  next(after: Date): Date | null;
}

/** The handlers this process runs, by type (JobHandlerRegistry implements it). */
export interface HandlerLookup {
  get(type: string): RegisteredHandler | undefined;
  types(): string[];
  all(): RegisteredHandler[];
}
