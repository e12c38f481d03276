import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Indexes the retention pruner walked, oldest first (replaced by a walk in id order: see 1764835200000). */
export function createRetentionMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueRetention1764662400000 implements MigrationInterface {
    readonly name = 'JobQueueRetention1764662400000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_completed_idx ON ${s}.jobs (completed_at) WHERE status = 'completed'`);
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_cancelled_idx ON ${s}.jobs (created_at) WHERE status = 'cancelled'`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_cancelled_idx`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_completed_idx`);
    }
  };
}
