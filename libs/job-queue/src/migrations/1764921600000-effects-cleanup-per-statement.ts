import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Effect-ledger rows go with their job through one trigger per deleting statement instead of a
 * foreign key's ON DELETE CASCADE, whose check runs once per deleted row: half the cost of a
 * completion that deletes its job (`retention.completedMs: 0`), and of every retention chunk.
 * See docs/decisions/0070-retention-at-full-speed.md.
 */
export function createEffectsCleanupPerStatementMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueEffectsCleanupPerStatement1764921600000 implements MigrationInterface {
    readonly name = 'JobQueueEffectsCleanupPerStatement1764921600000';

    async up(queryRunner: QueryRunner): Promise<void> {
      // Most deletes find the ledger empty (few handlers call job.once): then the join is not planned at all.
      await queryRunner.query(`
        CREATE OR REPLACE FUNCTION ${s}.delete_job_effects() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM ${s}.job_effects) THEN
            DELETE FROM ${s}.job_effects e USING deleted_jobs d WHERE e.job_id = d.id;
          END IF;
          RETURN NULL;
        END $$`);
      await queryRunner.query(`DROP TRIGGER IF EXISTS jobs_delete_effects ON ${s}.jobs`);
      await queryRunner.query(`
        CREATE TRIGGER jobs_delete_effects AFTER DELETE ON ${s}.jobs REFERENCING OLD TABLE AS deleted_jobs
        FOR EACH STATEMENT EXECUTE FUNCTION ${s}.delete_job_effects()`);
      await queryRunner.query(`ALTER TABLE ${s}.job_effects DROP CONSTRAINT IF EXISTS job_effects_job_id_fkey`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      // An effect recorded after its job was deleted (a late attempt) has no job: it goes first.
      await queryRunner.query(`DELETE FROM ${s}.job_effects e WHERE NOT EXISTS (SELECT 1 FROM ${s}.jobs j WHERE j.id = e.job_id)`);
      const exists = await queryRunner.query(
        `SELECT 1 FROM pg_constraint WHERE conname = 'job_effects_job_id_fkey' AND conrelid = '${s}.job_effects'::regclass`,
      );
      if (exists.length === 0) {
        await queryRunner.query(`
          ALTER TABLE ${s}.job_effects ADD CONSTRAINT job_effects_job_id_fkey
          FOREIGN KEY (job_id) REFERENCES ${s}.jobs (id) ON DELETE CASCADE NOT VALID`);
      }
      await queryRunner.query(`ALTER TABLE ${s}.job_effects VALIDATE CONSTRAINT job_effects_job_id_fkey`);
      await queryRunner.query(`DROP TRIGGER IF EXISTS jobs_delete_effects ON ${s}.jobs`);
      await queryRunner.query(`DROP FUNCTION IF EXISTS ${s}.delete_job_effects()`);
    }
  };
}
