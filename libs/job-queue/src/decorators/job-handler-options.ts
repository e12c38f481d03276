import type { PayloadSchema } from '../base/payload-schema.js';

export type { PayloadSchema } from '../base/payload-schema.js';

export interface JobHandlerOptions {
  /** Attempts before dead-lettering; a job's own `maxAttempts` wins. @default module `retry.maxAttempts` */
  maxAttempts?: number;
  /** First retry delay for this type. @default module `retry.baseDelayMs` */
  baseDelayMs?: number;
  /** Retry delay cap for this type. @default module `retry.maxDelayMs` */
  maxDelayMs?: number;
  /** Jobs of this type in flight at once in this process. @default module `concurrency` */
  concurrency?: number;
  /** Attempt deadline: `job.signal` aborts and the attempt fails. @default none */
  timeoutMs?: number;
  /** Validates the payload before the handler runs; a rejection dead-letters the job at once. */
  schema?: PayloadSchema;
  /**
   * Run the handler inside a database transaction (`job.manager`) that also marks the job
   * completed, only while this worker holds the lease: its writes commit exactly once.
   * @default false
   */
  transactional?: boolean;
  /**
   * After `failureThreshold` consecutive failed attempts of this type (all workers together), no
   * worker claims it for `cooldownMs`; then one probe job runs: success closes the circuit,
   * failure re-opens it. PermanentJobError and invalid payloads do not count.
   */
  circuitBreaker?: { failureThreshold: number; cooldownMs: number };
  /** At most `max` starts of this type per `perMs`, across all workers. */
  rateLimit?: { max: number; perMs: number };
  /** At most this many jobs of this type running at once, across all workers. */
  globalConcurrency?: number;
  /**
   * Tenant fairness: jobs of this type are started in turn across their groups (`group` at
   * enqueue), so one group's backlog cannot hold back another group's jobs, and at most this many
   * jobs of one group run at once, across all workers. To share turns without a cap of its own,
   * set it to `concurrency` or more.
   */
  groupConcurrency?: number;
  /**
   * Schedule: a 5-field cron expression (6 with seconds first). Exactly one job per slot across
   * all processes, with payload `{ scheduledFor }` (ISO 8601, UTC).
   */
  cron?: string;
  /** IANA time zone the cron expression is read in. @default 'UTC' */
  timezone?: string;
}

/** What `@JobHandler` records on a method: metadata only, interpreted at boot. */
export interface JobHandlerMetadata {
  readonly type: string;
  readonly options: JobHandlerOptions;
}
