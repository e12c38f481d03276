import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `job_schedules`: cron schedules added at run time (JobQueueAdmin.upsertSchedule), one row per
 * name; every worker process enqueues their slots, one job per slot by idempotency key, and
 * `last_slot` records the latest slot enqueued so a restart neither repeats nor loses one.
 */
export function createRuntimeSchedulesMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueRuntimeSchedules1765267200000 implements MigrationInterface {
    readonly name = 'JobQueueRuntimeSchedules1765267200000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_schedules (
          name text PRIMARY KEY,
          cron text NOT NULL,
          timezone text NOT NULL,
          type text NOT NULL,
          payload jsonb NOT NULL DEFAULT '{}',
          options jsonb NOT NULL DEFAULT '{}',
          last_slot timestamptz,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now()
        )`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_schedules`);
    }
  };
}
