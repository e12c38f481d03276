export { JobQueueModule } from './job-queue.module.js';
export { JOB_QUEUE_ASYNC_OPTIONS_TYPE, JOB_QUEUE_OPTIONS_TYPE } from './job-queue.module-definition.js';
export type { JobQueueOptions, ResolvedJobQueueOptions, RetentionOptions, RetryOptions } from './options/job-queue-options.js';
export { JobHandler } from './decorators/job-handler.decorator.js';
export type { JobHandlerOptions, PayloadSchema } from './decorators/job-handler-options.js';
export type { JobContext, JobDependency, JobProgress } from './base/job-context.js';
export type { JobPayload, JobTypes } from './base/job-types.js';
export type { JobQueueEvent, JobQueueEventKind } from './events/job-queue-event.js';
export { JobProducer } from './producer/job.producer.js';
export type { EnqueueAndWaitOptions, EnqueueManyItem, EnqueueOptions, EnqueueResult } from './base/enqueue-options.js';
export {
  JobQueueAdmin,
  type ListDeadOptions,
  type ListJobsOptions,
  type PurgeOptions,
  type RetryDeadManyOptions,
  type ScheduleInfo,
  type ThroughputOptions,
} from './admin/job-queue.admin.js';
export { JobQueueEvents } from './events/job-queue.events.js';
export { JobQueueHealthIndicator, type JobQueueReadiness, type JobQueueReadyStatus } from './health/job-queue.health.js';
export type { JobRecord, JobAttemptError, JobLogLine } from './persistence/job-record.js';
export type { JobStatus } from './base/job-status.js';
export type { CircuitRecord, JobCounts, JobPage, JobStats, ThroughputMinute, WorkerRecord } from './persistence/job.store.js';
export type { ScheduledType } from './schedules/cron-scheduler.js';
export type { ScheduleDefinition } from './admin/schedule-input.js';
export type { ScheduleJobOptions } from './persistence/job.store.js';
export { JobEntity } from './persistence/job.entity.js';
export { JOB_QUEUE_ENTITIES } from './persistence/entities.js';
export { JOB_QUEUE_MIGRATIONS, createJobQueueMigrations } from './migrations/index.js';
export * from './errors/index.js';
export { JobQueueErrorFilter } from './http/job-queue-error.filter.js';
export { JobQueueDashboardModule } from './dashboard/job-queue-dashboard.module.js';
export type { DashboardAction, JobQueueDashboardOptions } from './dashboard/dashboard-options.js';
