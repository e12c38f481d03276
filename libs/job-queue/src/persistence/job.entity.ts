import { Column, Entity, PrimaryColumn } from 'typeorm';
import { DEFAULT_SCHEMA } from '../options/defaults.js';
import type { JobAttemptError, JobLogLine } from './job-record.js';
import type { JobStatus } from '../base/job-status.js';

/**
 * The `jobs` table for apps that read it through TypeORM. The schema itself is created by the
 * migrations (synchronize stays off); the engine's hot path uses the explicit SQL in job.sql.ts.
 */
@Entity({ name: 'jobs', schema: DEFAULT_SCHEMA, synchronize: false })
export class JobEntity {
  @PrimaryColumn({ type: 'bigint' })
  id!: string;

  @Column({ type: 'text' })
  type!: string;

  @Column({ type: 'jsonb' })
  payload!: unknown;

  @Column({ type: 'text' })
  status!: JobStatus;

  @Column({ type: 'integer' })
  priority!: number;

  @Column({ type: 'integer' })
  attempts!: number;

  @Column({ name: 'max_attempts', type: 'integer' })
  maxAttempts!: number;

  @Column({ name: 'max_attempts_from_job', type: 'boolean' })
  maxAttemptsFromJob!: boolean;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError!: string | null;

  @Column({ type: 'jsonb' })
  errors!: JobAttemptError[];

  @Column({ type: 'jsonb', nullable: true })
  result!: unknown;

  /** The latest `job.progress()` value. */
  @Column({ type: 'jsonb', nullable: true })
  progress!: unknown;

  /** The last `job.log()` lines. */
  @Column({ type: 'jsonb', nullable: true })
  logs!: JobLogLine[] | null;

  @Column({ name: 'idempotency_key', type: 'text', nullable: true })
  idempotencyKey!: string | null;

  @Column({ name: 'ordering_key', type: 'text', nullable: true })
  orderingKey!: string | null;

  @Column({ name: 'group_key', type: 'text', nullable: true })
  groupKey!: string | null;

  @Column({ name: 'worker_id', type: 'text', nullable: true })
  workerId!: string | null;

  @Column({ name: 'lease_token', type: 'uuid', nullable: true })
  leaseToken!: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt!: Date | null;

  @Column({ name: 'run_at', type: 'timestamptz' })
  runAt!: Date;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'claimed_at', type: 'timestamptz', nullable: true })
  claimedAt!: Date | null;

  @Column({ name: 'completed_at', type: 'timestamptz', nullable: true })
  completedAt!: Date | null;

  @Column({ name: 'retry_after', type: 'timestamptz', nullable: true })
  retryAfter!: Date | null;

  @Column({ name: 'dead_at', type: 'timestamptz', nullable: true })
  deadAt!: Date | null;
}
