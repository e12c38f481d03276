import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Attempts are charged when a job starts, not when it is claimed:
 * - `prefetched`: claimed into a worker's buffer, its attempt not charged yet (the claim charges
 *   only the jobs that start at once; the others are charged as they start, with the worker's next
 *   completion statement). Only a running job can be prefetched: a CHECK says so, beside the one
 *   tying the lease token to 'processing'.
 * - `lease_expiries`: how often the reaper took the job back from a lost worker, charged or not;
 *   the backstop that dead-letters a job that keeps losing its worker before its start was charged.
 * Both have constant defaults, so adding them rewrites no row; the CHECK is added NOT VALID and
 * validated, which does not block writes meanwhile. See docs/decisions/0090-attempts-charged-at-start.md.
 */
export function createAttemptsChargedAtStartMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueAttemptsChargedAtStart1765008000000 implements MigrationInterface {
    readonly name = 'JobQueueAttemptsChargedAtStart1765008000000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS prefetched boolean NOT NULL DEFAULT false`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS lease_expiries integer NOT NULL DEFAULT 0`);
      const exists = await queryRunner.query(
        `SELECT 1 FROM pg_constraint WHERE conname = 'jobs_prefetched_while_processing' AND conrelid = '${s}.jobs'::regclass`,
      );
      if (exists.length === 0) {
        await queryRunner.query(`
          ALTER TABLE ${s}.jobs ADD CONSTRAINT jobs_prefetched_while_processing
          CHECK (NOT prefetched OR status = 'processing') NOT VALID`);
      }
      await queryRunner.query(`ALTER TABLE ${s}.jobs VALIDATE CONSTRAINT jobs_prefetched_while_processing`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      // A job still held unstarted goes back to the old rule: its claim counted an attempt.
      await queryRunner.query(`UPDATE ${s}.jobs SET attempts = attempts + 1 WHERE prefetched`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP CONSTRAINT IF EXISTS jobs_prefetched_while_processing`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS lease_expiries`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS prefetched`);
    }
  };
}
