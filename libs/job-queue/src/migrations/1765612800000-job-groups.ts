import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tenant fairness (`group`, `groupConcurrency`):
 * - `group_key` on the jobs table (NULL: no group);
 * - `jobs_group_claim_idx`: waiting grouped jobs by type, group and claim order, so a claim can
 *   step from one group to the next (a skip scan) and read a group's first jobs without passing
 *   another group's backlog;
 * - `jobs_group_running_idx`: running grouped jobs by type and group, for `groupConcurrency`;
 * - `job_group_turns`: per type, the group that had the last turn, where the next claim starts.
 * Both indexes cover no existing row (the column is new): building them reads the table once.
 * The main claim index is unchanged, so a type without groups is claimed exactly as before.
 */
export function createJobGroupsMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueJobGroups1765612800000 implements MigrationInterface {
    readonly name = 'JobQueueJobGroups1765612800000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS group_key text`);
      await queryRunner.query(`
        CREATE INDEX IF NOT EXISTS jobs_group_claim_idx ON ${s}.jobs (type, group_key, priority DESC, run_at, id)
        WHERE status IN ('pending', 'failed') AND group_key IS NOT NULL`);
      await queryRunner.query(`
        CREATE INDEX IF NOT EXISTS jobs_group_running_idx ON ${s}.jobs (type, group_key)
        WHERE status = 'processing' AND group_key IS NOT NULL`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_group_turns (
          type       text PRIMARY KEY,
          last_group text NOT NULL
        )`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_group_turns`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_group_running_idx`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_group_claim_idx`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS group_key`);
    }
  };
}
