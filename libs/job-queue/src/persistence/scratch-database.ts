import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { toStoreError } from './driver-errors.js';

export interface ScratchDatabase {
  /** A connection URL of the new, empty database. */
  url: string;
  /** Drops it, closing whatever is still connected to it. */
  drop(): Promise<void>;
}

/**
 * A new database on the server `serverUrl` names, for one test file. Its name is random, so test
 * files running at once never share one; CREATE DATABASE needs no lock that they would contend for.
 */
export async function createScratchDatabase(serverUrl: string, prefix = 'ajq_test'): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await onServer(serverUrl, `CREATE DATABASE "${name}"`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    // WITH (FORCE) (PostgreSQL 13+) ends the connections a test left open.
    drop: () => onServer(serverUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
  };
}

async function onServer(serverUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  try {
    await client.connect();
    await client.query(statement);
  } catch (error) {
    throw toStoreError(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}
