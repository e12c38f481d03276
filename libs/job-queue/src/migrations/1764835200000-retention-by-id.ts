import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retention walks the table in id order instead of keeping an index of finished jobs: every
 * completion used to add an entry to the completed-job index, about a tenth of the completion's
 * cost in the database, only so that pruning, once a second, could find the oldest ones. The
 * cancelled-job index goes with it (the same walk prunes cancelled jobs). The dead-letter index
 * stays: dead letters are listed and alerted on.
 */
export function createRetentionByIdMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueRetentionById1764835200000 implements MigrationInterface {
    readonly name = 'JobQueueRetentionById1764835200000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_completed_idx`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_cancelled_idx`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_completed_idx ON ${s}.jobs (completed_at) WHERE status = 'completed'`);
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_cancelled_idx ON ${s}.jobs (created_at) WHERE status = 'cancelled'`);
    }
  };
}
