import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface ScratchDatabase {
  url: string;
  name: string;
  /** A short-lived query on the database, for setup and assertions. */
  query<Row = any>(sql: string, params?: unknown[]): Promise<Row[]>;
  drop(): Promise<void>;
}

/**
 * A fresh database on the server at `adminUrl`, so a test file or a benchmark run never sees
 * another's rows; `drop()` removes it with its connections.
 */
export async function createScratchDatabase(adminUrl: string, prefix: string): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  await withAdmin(adminUrl, (admin) => admin.query(`CREATE DATABASE ${name}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
  // DROP … WITH (FORCE) may end a client pg-pool is still closing; that error is expected.
  pool.on('error', () => undefined);
  return {
    url: url.toString(),
    name,
    async query(sql, params) {
      return (await pool.query(sql, params)).rows;
    },
    async drop() {
      await pool.end();
      await withAdmin(adminUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

async function withAdmin<T>(adminUrl: string, work: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}
