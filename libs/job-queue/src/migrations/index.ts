import type { MigrationInterface } from 'typeorm';
import { DEFAULT_SCHEMA } from '../options/defaults.js';
import { createJobsMigration } from './1764403200000-create-jobs.js';
import { createEffectsMigration } from './1764489600000-exactly-once-effects.js';
import { createFlowControlMigration } from './1764576000000-flow-control.js';
import { createRetentionMigration } from './1764662400000-retention.js';
import { createLeanHotPathMigration } from './1764748800000-lean-hot-path.js';
import { createRetentionByIdMigration } from './1764835200000-retention-by-id.js';
import { createEffectsCleanupPerStatementMigration } from './1764921600000-effects-cleanup-per-statement.js';
import { createJobsVacuumUnthrottledMigration } from './1764925200000-jobs-vacuum-unthrottled.js';
import { createAttemptsChargedAtStartMigration } from './1765008000000-attempts-charged-at-start.js';
import { createOperatorsViewMigration } from './1765094400000-operators-view.js';
import { createRuntimeSchedulesMigration } from './1765267200000-runtime-schedules.js';
import { createTraceContextMigration } from './1765353600000-trace-context.js';
import { createDebounceAndUniqueWindowsMigration } from './1765440000000-debounce-and-unique-windows.js';
import { createJobDependenciesMigration } from './1765526400000-job-dependencies.js';
import { createJobGroupsMigration } from './1765612800000-job-groups.js';

/** The library's migrations, in order, for the given schema. */
export function createJobQueueMigrations(schema: string = DEFAULT_SCHEMA): Array<new () => MigrationInterface> {
  return [
    createJobsMigration(schema),
    createEffectsMigration(schema),
    createFlowControlMigration(schema),
    createRetentionMigration(schema),
    createLeanHotPathMigration(schema),
    createRetentionByIdMigration(schema),
    createEffectsCleanupPerStatementMigration(schema),
    createJobsVacuumUnthrottledMigration(schema),
    createAttemptsChargedAtStartMigration(schema),
    createOperatorsViewMigration(schema),
    createRuntimeSchedulesMigration(schema),
    createTraceContextMigration(schema),
    createDebounceAndUniqueWindowsMigration(schema),
    createJobDependenciesMigration(schema),
    createJobGroupsMigration(schema),
  ];
}

/** Migrations for the default `job_queue` schema, for apps that run TypeORM migrations themselves. */
export const JOB_QUEUE_MIGRATIONS = createJobQueueMigrations();
