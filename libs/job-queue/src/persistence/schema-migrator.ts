import type { DataSource } from 'typeorm';
import { createJobQueueMigrations } from '../migrations/index.js';

/** Lock id shared by every process booting against the same database. */
const MIGRATION_LOCK_CLASS = 0x4a51; // "JQ"

/**
 * Creates or upgrades the schema at boot. All pending migrations run in one transaction holding a
 * transaction-level advisory lock, so ten pods booting at once apply each migration exactly once,
 * and it works through transaction-mode poolers.
 */
export class SchemaMigrator {
  constructor(
    private readonly dataSource: DataSource,
    private readonly schema: string,
  ) {}

  async migrate(): Promise<string[]> {
    const migrations = createJobQueueMigrations(this.schema).map((Migration) => new Migration());
    const queryRunner = this.dataSource.createQueryRunner();
    const applied: string[] = [];
    try {
      await queryRunner.startTransaction();
      await queryRunner.query(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, [MIGRATION_LOCK_CLASS, this.schema]);
      await queryRunner.query(`CREATE SCHEMA IF NOT EXISTS "${this.schema}"`);
      await queryRunner.query(
        `CREATE TABLE IF NOT EXISTS "${this.schema}".schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const rows: Array<{ name: string }> = await queryRunner.query(`SELECT name FROM "${this.schema}".schema_migrations`);
      const done = new Set(rows.map((row) => row.name));
      for (const migration of migrations) {
        const name = migration.name ?? migration.constructor.name;
        if (done.has(name)) continue;
        await migration.up(queryRunner);
        await queryRunner.query(`INSERT INTO "${this.schema}".schema_migrations (name) VALUES ($1)`, [name]);
        applied.push(name);
      }
      await queryRunner.commitTransaction();
      return applied;
    } catch (error) {
      if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction();
      throw error;
    } finally {
      await queryRunner.release();
    }
  }
}
