import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The hot path, leaner:
 * - a CHECK ties the lease token to the 'processing' status, so a fenced write can match on the
 *   token alone and be planned on the primary key (a status predicate invites the planner onto a
 *   partial index full of dead entries when the table has not been vacuumed yet);
 * - running jobs of a type are counted on the lease index, so a claim maintains one index fewer.
 * The constraint is added NOT VALID and then validated, which does not block writes meanwhile.
 */
export function createLeanHotPathMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueLeanHotPath1764748800000 implements MigrationInterface {
    readonly name = 'JobQueueLeanHotPath1764748800000';

    async up(queryRunner: QueryRunner): Promise<void> {
      const exists = await queryRunner.query(
        `SELECT 1 FROM pg_constraint WHERE conname = 'jobs_lease_token_while_processing' AND conrelid = '${s}.jobs'::regclass`,
      );
      if (exists.length === 0) {
        await queryRunner.query(`
          ALTER TABLE ${s}.jobs ADD CONSTRAINT jobs_lease_token_while_processing
          CHECK ((lease_token IS NOT NULL) = (status = 'processing')) NOT VALID`);
      }
      await queryRunner.query(`ALTER TABLE ${s}.jobs VALIDATE CONSTRAINT jobs_lease_token_while_processing`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_running_type_idx`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_running_type_idx ON ${s}.jobs (type) WHERE status = 'processing'`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP CONSTRAINT IF EXISTS jobs_lease_token_while_processing`);
    }
  };
}
