import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Flow control: ordering keys on jobs, one row per job type (circuit breaker state, and the row
 * that serialises claims of rate-limited or globally limited types), and the start log that
 * rate limits count.
 */
export function createFlowControlMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueFlowControl1764576000000 implements MigrationInterface {
    readonly name = 'JobQueueFlowControl1764576000000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS ordering_key text`);
      // The claim checks "is this the oldest unfinished job of its key?" on this index.
      await queryRunner.query(`
        CREATE INDEX IF NOT EXISTS jobs_ordering_idx ON ${s}.jobs (ordering_key, id)
        WHERE ordering_key IS NOT NULL AND status IN ('pending', 'processing', 'failed')`);
      // Counting running jobs of a type, for global concurrency limits.
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS jobs_running_type_idx ON ${s}.jobs (type) WHERE status = 'processing'`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_types (
          type                 text PRIMARY KEY,
          circuit_state        text NOT NULL DEFAULT 'closed' CHECK (circuit_state IN ('closed', 'open', 'half-open')),
          consecutive_failures integer NOT NULL DEFAULT 0,
          cooldown_ms          integer NOT NULL DEFAULT 0,
          opened_at            timestamptz,
          reopen_at            timestamptz
        )`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_starts (
          type       text        NOT NULL,
          job_id     bigint      NOT NULL,
          started_at timestamptz NOT NULL
        )`);
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS job_starts_type_idx ON ${s}.job_starts (type, started_at)`);
      // The worker moves a start to the moment its handler really starts.
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS job_starts_job_idx ON ${s}.job_starts (job_id)`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_starts`);
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_types`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_running_type_idx`);
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_ordering_idx`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS ordering_key`);
    }
  };
}
