import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the operator's view reads, each kept out of the jobs table's hot path:
 * - `job_workers`: one row per live worker process, upserted by its heartbeat; a row whose
 *   `expires_at` passed belongs to a process that stopped beating (killed, cut off).
 * - `paused_types`: a type listed here is started by no worker; rows survive restarts.
 * - `job_throughput`: outcomes per minute and type, added to by each process's batched tally,
 *   so throughput is read from at most a day of small rows, never from the jobs.
 * - `jobs.progress` and `jobs.logs`: the latest `job.progress()` value and the last `job.log()`
 *   lines; nullable columns with no default rewrite no row.
 */
export function createOperatorsViewMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueOperatorsView1765094400000 implements MigrationInterface {
    readonly name = 'JobQueueOperatorsView1765094400000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_workers (
          id text PRIMARY KEY,
          host text NOT NULL,
          pid integer NOT NULL,
          started_at timestamptz NOT NULL,
          heartbeat_at timestamptz NOT NULL DEFAULT now(),
          expires_at timestamptz NOT NULL,
          types text[] NOT NULL DEFAULT '{}',
          concurrency integer NOT NULL,
          in_flight integer NOT NULL DEFAULT 0,
          draining boolean NOT NULL DEFAULT false
        )`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.paused_types (
          type text PRIMARY KEY,
          paused_at timestamptz NOT NULL DEFAULT now()
        )`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_throughput (
          minute timestamptz NOT NULL,
          type text NOT NULL,
          completed integer NOT NULL DEFAULT 0,
          failed integer NOT NULL DEFAULT 0,
          dead integer NOT NULL DEFAULT 0,
          PRIMARY KEY (minute, type)
        )`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS progress jsonb`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS logs jsonb`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS logs`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS progress`);
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_throughput`);
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.paused_types`);
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_workers`);
    }
  };
}
