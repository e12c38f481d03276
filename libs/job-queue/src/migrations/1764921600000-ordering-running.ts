import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The running jobs of each ordering key, on their own small index. A claim takes a keyed job only
 * while no job of its key is running: the oldest-unfinished rule alone let a job whose enqueue
 * committed late (its transaction held open while a later job of the key was claimed) start while
 * that later job still ran. Only running keyed jobs are in it, so it stays a few entries per key.
 */
export function createOrderingRunningMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueOrderingRunning1764921600000 implements MigrationInterface {
    readonly name = 'JobQueueOrderingRunning1764921600000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`
        CREATE INDEX IF NOT EXISTS jobs_ordering_running_idx ON ${s}.jobs (ordering_key)
        WHERE ordering_key IS NOT NULL AND status = 'processing'`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_ordering_running_idx`);
    }
  };
}
