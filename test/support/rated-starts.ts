import type { TestDatabase } from './test-database.js';

/**
 * Keeps a copy of every start the workers stamp for `type` in job_queue.job_starts (the rate
 * limiter's own record, which maintenance prunes to the last window), in table rated_starts. The
 * handlers' own records come a variable moment later, so a window of those could hold a start the
 * limiter rightly let through.
 */
export async function keepRatedStarts(db: TestDatabase, type: string) {
  await db.query(`
    CREATE TABLE rated_starts (job_id bigint PRIMARY KEY, started_at timestamptz NOT NULL);
    CREATE FUNCTION keep_rated_start() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO rated_starts (job_id, started_at) VALUES (NEW.job_id, NEW.started_at)
      ON CONFLICT (job_id) DO UPDATE SET started_at = EXCLUDED.started_at;
      RETURN NULL;
    END $$;
    CREATE TRIGGER keep_rated_start AFTER INSERT OR UPDATE OF started_at ON job_queue.job_starts FOR EACH ROW
      WHEN (NEW.type = '${type}') EXECUTE FUNCTION keep_rated_start();`);
  return {
    /** The most starts kept in any 1 s window. */
    async busiestWindow(): Promise<number> {
      const [window] = await db.query(
        `SELECT max((SELECT count(*) FROM rated_starts b
                     WHERE b.started_at >= a.started_at AND b.started_at < a.started_at + interval '1 second'))::int AS busiest
         FROM rated_starts a`,
      );
      return window.busiest;
    },
    /** Stops copying; the starts kept so far stay in rated_starts. */
    async stop(): Promise<void> {
      await db.query(`DROP TRIGGER keep_rated_start ON job_queue.job_starts; DROP FUNCTION keep_rated_start()`);
    },
  };
}
