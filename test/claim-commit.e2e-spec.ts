import { Injectable } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DataSource } from 'typeorm';
import { JobHandler } from '../src/index.js';
import { PostgresJobStore, storeSettings, type PostgresJobStoreSettings } from '../libs/job-queue/src/persistence/postgres-job.store.js';
import { resolveJobQueueOptions } from '../libs/job-queue/src/options/resolve-options.js';
import type { ClaimRequest, TypeClaim } from '../libs/job-queue/src/persistence/job.store.js';
import { startQueueApp, type QueueApp } from './support/queue-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

@Injectable()
class CommitHandlers {
  @JobHandler('commit.worker.default')
  byDefault(): string {
    return 'ran';
  }

  @JobHandler('commit.worker.unflushed')
  unflushed(): string {
    return 'ran';
  }
}

const WAITING: PostgresJobStoreSettings = { prepare: true, synchronousClaims: true };
const UNFLUSHED: PostgresJobStoreSettings = { prepare: true, synchronousClaims: false };

/**
 * How each write commits, read at commit time: a deferred constraint trigger on the jobs table
 * runs inside COMMIT, before the commit record is written, and logs the `synchronous_commit` that
 * commit uses. Claims wait for their WAL flush unless `synchronousClaims` is off; then the claims
 * without flow control do not, and everything else (flow-control claims, completions, and
 * whatever runs next on the same connection) still does.
 */
describe('claim commits', () => {
  let db: TestDatabase;
  let api: QueueApp;
  let dataSource: DataSource;

  const request = (perType: TypeClaim[], flowControl = false): ClaimRequest => ({
    workerId: 'w',
    leaseMs: 30_000,
    limit: perType.reduce((sum, t) => sum + t.limit, 0),
    perType,
    flowControl,
  });
  const oneOf = (type: string, extra: Partial<TypeClaim> = {}): TypeClaim => ({ type, limit: 1, maxAttempts: 3, ...extra });

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    api = await startQueueApp(db.url, { runWorker: false });
    await db.query(`CREATE TABLE commit_log (seq serial PRIMARY KEY, job_id bigint, status text, mode text)`);
    await db.query(`
      CREATE FUNCTION log_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO commit_log (job_id, status, mode) VALUES (NEW.id, NEW.status, current_setting('synchronous_commit'));
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE CONSTRAINT TRIGGER log_commit_mode AFTER UPDATE ON job_queue.jobs
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION log_commit_mode()`);
    // One connection, so a setting left behind by a claim would show in the next statement.
    dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } });
    await dataSource.initialize();
    await new PostgresJobStore(dataSource, 'job_queue', WAITING).registerTypes(['commit.limited']);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await api?.close();
    await db?.drop();
  });

  /** Enqueues a job of each type, claims them in one request, and returns each claim's commit mode. */
  async function claimModes(settings: PostgresJobStoreSettings, perType: TypeClaim[], flowControl = false): Promise<string[]> {
    const enqueued = await api.producer.enqueueMany(perType.map(({ type }) => ({ type, payload: {} })));
    const claimed = await new PostgresJobStore(dataSource, 'job_queue', settings).claim(request(perType, flowControl));
    expect(claimed.map((job) => job.id).sort()).toEqual(enqueued.map((job) => job.id).sort());
    const rows = await db.query<{ mode: string }>(
      `SELECT mode FROM commit_log WHERE job_id = ANY ($1::bigint[]) AND status = 'processing' ORDER BY seq`,
      [enqueued.map((job) => job.id)],
    );
    return rows.map((row) => row.mode);
  }

  it('waits for the flush by default and with synchronousClaims, in every form of claim', async () => {
    expect(await claimModes(storeSettings(resolveJobQueueOptions({ dataSource })), [oneOf('commit.default')])).toEqual(['on']);
    expect(await claimModes(WAITING, [oneOf('commit.one')])).toEqual(['on']);
    expect(await claimModes({ prepare: false, synchronousClaims: true }, [oneOf('commit.unprepared')])).toEqual(['on']);
    expect(await claimModes(WAITING, [oneOf('commit.a'), oneOf('commit.b')])).toEqual(['on', 'on']);
    expect(await claimModes(WAITING, [oneOf('commit.flow')], true)).toEqual(['on']);
    expect(await claimModes(WAITING, [oneOf('commit.limited', { rateMax: 10, rateWindowMs: 1_000 })], true)).toEqual(['on']);
  });

  it('without synchronousClaims, commits a claim without waiting, and nothing after it', async () => {
    const store = new PostgresJobStore(dataSource, 'job_queue', UNFLUSHED);
    const [job] = await api.producer.enqueueMany([{ type: 'commit.unflushed', payload: {} }]);
    const [claimed] = await store.claim(request([oneOf('commit.unflushed')]));
    expect(claimed.id).toBe(job.id);
    // The same (only) connection: the claim's setting ended with its transaction.
    const [{ synchronous_commit: after }] = await dataSource.query('SHOW synchronous_commit');
    expect(after).toBe('on');
    expect(await store.completeMany([{ lease: claimed, resultJson: 'null' }])).toEqual(new Set());
    const modes = await db.query(`SELECT status, mode FROM commit_log WHERE job_id = $1 ORDER BY seq`, [job.id]);
    expect(modes).toEqual([
      { status: 'processing', mode: 'off' },
      { status: 'completed', mode: 'on' },
    ]);
  });

  it('without synchronousClaims, leaves out the flush in claims of several types and in unprepared claims, but never under flow control', async () => {
    expect(await claimModes(UNFLUSHED, [oneOf('commit.u.a'), oneOf('commit.u.b')])).toEqual(['off', 'off']);
    expect(await claimModes({ prepare: false, synchronousClaims: false }, [oneOf('commit.u.unprepared')])).toEqual(['off']);
    expect(await claimModes(UNFLUSHED, [oneOf('commit.u.flow')], true)).toEqual(['on']);
    expect(await claimModes(UNFLUSHED, [oneOf('commit.limited', { rateMax: 10, rateWindowMs: 1_000 })], true)).toEqual(['on']);
  });

  it('without synchronousClaims, leaves out the flush in the one-type claim for a large table too', async () => {
    await db.query(`
      INSERT INTO job_queue.jobs (type, payload, max_attempts, status, attempts, completed_at)
      SELECT 'commit.history', '{}'::jsonb, 3, 'completed', 1, now() FROM generate_series(1, 4500)`);
    expect(await claimModes(UNFLUSHED, [oneOf('commit.u.large')])).toEqual(['off']);
    const names: Array<{ name: string }> = await dataSource.query(`SELECT name FROM pg_prepared_statements`);
    // The large form's name: claimOneType_<cap>_<generation> (the guarded one is claimOneTypeSmall_<cap>).
    // This is the first claim since the table grew, so any such statement on this connection is its.
    expect(names.some(({ name }) => /_claimOneType_\d+_\d+$/.test(name))).toBe(true);
  });

  it("follows the module's synchronousClaims in a running worker", async () => {
    const modesOf = async (type: string, synchronousClaims?: boolean): Promise<string[]> => {
      const worker = await startQueueApp(db.url, synchronousClaims === undefined ? {} : { synchronousClaims }, [CommitHandlers]);
      try {
        const { id } = await worker.producer.enqueue(type, {});
        await waitFor(async () => (await worker.admin.getJob(id))?.status === 'completed', { message: `job ${id} completed` });
        const rows = await db.query<{ status: string; mode: string }>(`SELECT status, mode FROM commit_log WHERE job_id = $1 ORDER BY seq`, [id]);
        return rows.map((row) => `${row.status} ${row.mode}`);
      } finally {
        await worker.close();
      }
    };
    expect(await modesOf('commit.worker.default')).toEqual(['processing on', 'completed on']);
    expect(await modesOf('commit.worker.unflushed', false)).toEqual(['processing off', 'completed on']);
  });
});
