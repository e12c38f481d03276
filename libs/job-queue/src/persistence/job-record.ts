import type { JobStatus } from '../base/job-status.js';

/** One attempt's failure, kept in the job's history. */
export interface JobAttemptError {
  attempt: number;
  at: string;
  workerId: string | null;
  error: string;
}

/** One `job.log()` line: when, in which attempt, and the message (at most 2 KB). */
export interface JobLogLine {
  at: string;
  attempt: number;
  message: string;
}

/** A job row as the admin API returns it (the table's columns in camelCase). */
export interface JobRecord {
  id: string;
  type: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  errors: JobAttemptError[];
  result: unknown;
  /** The latest value the handler passed to `job.progress()`, or null. */
  progress: unknown;
  /** The last 100 `job.log()` lines, oldest first. */
  logs: JobLogLine[];
  idempotencyKey: string | null;
  orderingKey: string | null;
  /** The debounce key it was enqueued with, or null. */
  debounceKey: string | null;
  /** The group (tenant) it was enqueued with, or null. */
  group: string | null;
  workerId: string | null;
  runAt: Date;
  createdAt: Date;
  claimedAt: Date | null;
  completedAt: Date | null;
  retryAfter: Date | null;
  deadAt: Date | null;
  leaseExpiresAt: Date | null;
}
