import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Debounce and unique windows:
 * - `debounce_key`, with a unique index over the jobs of a type still waiting to start (`pending`):
 *   at most one per key, and concurrent debounced enqueues meet in it (ON CONFLICT);
 * - `expired_idempotency_key`: where an idempotency key goes once its `uniqueForMs` window is
 *   over, so the next enqueue with the key can make a new job and the old row still shows it.
 * The index covers no existing row (the column is new): building it reads the table once.
 */
export function createDebounceAndUniqueWindowsMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueDebounceAndUniqueWindows1765440000000 implements MigrationInterface {
    readonly name = 'JobQueueDebounceAndUniqueWindows1765440000000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS debounce_key text`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS expired_idempotency_key text`);
      await queryRunner.query(`
        CREATE UNIQUE INDEX IF NOT EXISTS jobs_debounce_idx ON ${s}.jobs (type, debounce_key)
        WHERE debounce_key IS NOT NULL AND status = 'pending'`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP INDEX IF EXISTS ${s}.jobs_debounce_idx`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS expired_idempotency_key`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS debounce_key`);
    }
  };
}
