import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retention walks the table in id order, so completions no longer maintain an index of finished
 * (or cancelled) jobs; one row holds the walk's position for whichever process leads maintenance.
 * See docs/decisions/0060-retention-walks-by-id.md.
 */
export function createRetentionByIdMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueRetentionById1764835200000 implements MigrationInterface {
    readonly name = 'JobQueueRetentionById1764835200000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_completed_idx`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_cancelled_idx`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.retention_walk (
          only_row   boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
          walked_to  bigint      NOT NULL DEFAULT 0,
          rest_until timestamptz NOT NULL DEFAULT '-infinity'
        )`);
      await queryRunner.query(`INSERT INTO ${s}.retention_walk DEFAULT VALUES ON CONFLICT DO NOTHING`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.retention_walk`);
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_completed_idx ON ${s}.jobs (completed_at) WHERE status = 'completed'`);
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_cancelled_idx ON ${s}.jobs (created_at) WHERE status = 'cancelled'`);
    }
  };
}
