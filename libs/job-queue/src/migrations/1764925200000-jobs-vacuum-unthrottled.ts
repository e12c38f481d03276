import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Autovacuum of the jobs table is not throttled (autovacuum_vacuum_cost_delay 0): every job
 * leaves three or four dead row versions, and under a sustained load the throttled vacuum fell
 * behind them (table and dead tuples growing, throughput halving), the unthrottled one kept the
 * table bounded. A storage parameter, applied without rewriting the table.
 * See docs/decisions/0070-retention-at-full-speed.md.
 */
export function createJobsVacuumUnthrottledMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueJobsVacuumUnthrottled1764925200000 implements MigrationInterface {
    readonly name = 'JobQueueJobsVacuumUnthrottled1764925200000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs SET (autovacuum_vacuum_cost_delay = 0)`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs RESET (autovacuum_vacuum_cost_delay)`);
    }
  };
}
