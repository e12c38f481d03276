import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface TestDatabase {
  url: string;
  name: string;
  /** A short-lived client on the test database, for assertions. */
  query<Row = any>(sql: string, params?: unknown[]): Promise<Row[]>;
  drop(): Promise<void>;
}

/** A fresh database for one test file, dropped (with its connections) when the file is done. */
export async function createTestDatabase(adminUrl: string): Promise<TestDatabase> {
  const name = `ajq_test_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
  // DROP … WITH (FORCE) may kill a client pg-pool is still closing; that error is expected.
  pool.on('error', () => undefined);
  return {
    url: url.toString(),
    name,
    async query(sql, params) {
      return (await pool.query(sql, params)).rows;
    },
    async drop() {
      await pool.end();
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
