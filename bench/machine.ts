import os from 'node:os';
import pg from 'pg';

export interface MachineDescription {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  os: string;
  /** 1, 5 and 15 minute load averages when the run started: other work on the machine skews numbers. */
  loadAverage: number[];
  node: string;
  database: {
    source: 'DATABASE_URL' | 'embedded';
    /** host:port, no credentials. */
    address: string;
    version: string;
    settings: Record<string, string>;
  };
}

/** The PostgreSQL settings that move queue numbers most. */
const KEY_SETTINGS = [
  'fsync',
  'synchronous_commit',
  'shared_buffers',
  'wal_level',
  'max_connections',
  'autovacuum',
  'work_mem',
  'max_wal_size',
  'checkpoint_timeout',
];

export async function describeMachine(url: string, embedded: boolean): Promise<MachineDescription> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string; setting: string }>(
      `SELECT name, current_setting(name) AS setting FROM pg_settings WHERE name = ANY($1) ORDER BY array_position($1, name)`,
      [KEY_SETTINGS],
    );
    const [{ version }] = (await client.query<{ version: string }>(`SELECT current_setting('server_version') AS version`)).rows;
    const address = new URL(url);
    return {
      cpuModel: os.cpus()[0]?.model?.trim() ?? 'unknown',
      cores: os.availableParallelism?.() ?? os.cpus().length,
      memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
      os: `${os.type()} ${os.release()} ${os.arch()}`,
      loadAverage: os.loadavg().map((n) => Math.round(n * 100) / 100),
      node: process.version,
      database: {
        source: embedded ? 'embedded' : 'DATABASE_URL',
        address: `${address.hostname}:${address.port || 5432}`,
        version,
        settings: Object.fromEntries(rows.map((row) => [row.name, row.setting])),
      },
    };
  } finally {
    await client.end();
  }
}
