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
    return (await this.run(false)).applied;
  }

  /**
   * What `migrate` would do, done in a transaction that is then rolled back: the pending
   * migrations and the statements they run, against the database as it is; nothing changes.
   */
  async dryRun(): Promise<{ applied: string[]; statements: string[] }> {
    return this.run(true);
  }

  private async run(dryRun: boolean): Promise<{ applied: string[]; statements: string[] }> {
    const migrations = createJobQueueMigrations(this.schema).map((Migration) => new Migration());
    const queryRunner = this.dataSource.createQueryRunner();
    const applied: string[] = [];
    const statements: string[] = [];
    try {
      await queryRunner.startTransaction();
      await queryRunner.query(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, [MIGRATION_LOCK_CLASS, this.schema]);
      const preamble = [
        `CREATE SCHEMA IF NOT EXISTS "${this.schema}"`,
        `CREATE TABLE IF NOT EXISTS "${this.schema}".schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
      ];
      for (const statement of preamble) await queryRunner.query(statement);
      const rows: Array<{ name: string }> = await queryRunner.query(`SELECT name FROM "${this.schema}".schema_migrations`);
      const done = new Set(rows.map((row) => row.name));
      for (const migration of migrations) {
        const name = migration.name ?? migration.constructor.name;
        if (done.has(name)) continue;
        if (statements.length === 0) statements.push(...preamble.map((statement) => `${statement};`));
        statements.push(`-- ${name}`);
        const query = queryRunner.query.bind(queryRunner);
        // Each statement the migration runs is recorded (a dry run prints them).
        queryRunner.query = ((sql: string, parameters?: unknown[], structured?: boolean) => {
          statements.push(`${sql.trim().replace(/\n {6,}/g, '\n  ')};`);
          return query(sql, parameters, structured as never);
        }) as typeof queryRunner.query;
        try {
          await migration.up(queryRunner);
        } finally {
          queryRunner.query = query;
        }
        await queryRunner.query(`INSERT INTO "${this.schema}".schema_migrations (name) VALUES ($1)`, [name]);
        statements.push(`INSERT INTO "${this.schema}".schema_migrations (name) VALUES ('${name}');`);
        applied.push(name);
      }
      if (dryRun) await queryRunner.rollbackTransaction();
      else await queryRunner.commitTransaction();
      return { applied, statements };
    } catch (error) {
      if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction();
      throw error;
    } finally {
      await queryRunner.release();
    }
  }
}
