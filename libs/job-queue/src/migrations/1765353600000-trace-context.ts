import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `jobs.trace_context`: the W3C trace context (JSON of the propagation carrier) of the span that
 * enqueued the job, so its attempts continue that trace in whatever process runs them. Nullable,
 * no default: adding it rewrites no row.
 */
export function createTraceContextMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueTraceContext1765353600000 implements MigrationInterface {
    readonly name = 'JobQueueTraceContext1765353600000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS trace_context text`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS trace_context`);
    }
  };
}
