import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Exactly-once support: the effect ledger behind `job.once()`, and a flag asking the finishing
 * statement to notify an `enqueueAndWait` caller (only those jobs pay for a NOTIFY).
 */
export function createEffectsMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueExactlyOnceEffects1764489600000 implements MigrationInterface {
    readonly name = 'JobQueueExactlyOnceEffects1764489600000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS notify_on_finish boolean NOT NULL DEFAULT false`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_effects (
          job_id      bigint      NOT NULL REFERENCES ${s}.jobs (id) ON DELETE CASCADE,
          key         text        NOT NULL,
          result      jsonb,
          attempt     integer     NOT NULL,
          recorded_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (job_id, key)
        )`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_effects`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS notify_on_finish`);
    }
  };
}
