import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Job dependencies (`dependsOn`):
 * - status `blocked`: a job waiting for the jobs it depends on;
 * - `job_dependencies`: one row per edge, `settled` once the job depended on has finished (so a
 *   dead job retried and completed later is not counted twice);
 * - on the jobs table: `has_dependants` (set by an enqueue that depends on the job, under the
 *   job's row lock), `dependencies_left` (NULL for a job without dependencies) and
 *   `on_dependency_failure`;
 * - a trigger that settles a job's dependants in the statement that finishes it (or deletes it
 *   unfinished). It runs after the row's update, where each of its statements takes a fresh
 *   snapshot: an enqueue that held the row's lock (and so made the finishing update wait) has
 *   committed by then, and its edges are seen. Rows without dependants skip it in the WHEN clause.
 * Columns with constant defaults rewrite no row; the new status CHECK is added NOT VALID (it only
 * admits more than the old one).
 */
export function createJobDependenciesMigration(schema: string): new () => MigrationInterface {
  const s = `"${schema}"`;
  return class JobQueueJobDependencies1765526400000 implements MigrationInterface {
    readonly name = 'JobQueueJobDependencies1765526400000';

    async up(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS has_dependants boolean NOT NULL DEFAULT false`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS dependencies_left integer`);
      await queryRunner.query(`
        ALTER TABLE ${s}.jobs ADD COLUMN IF NOT EXISTS on_dependency_failure text
          CHECK (on_dependency_failure IN ('cancel', 'run'))`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP CONSTRAINT IF EXISTS jobs_status_check`);
      await queryRunner.query(`
        ALTER TABLE ${s}.jobs ADD CONSTRAINT jobs_status_check
          CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'dead', 'cancelled', 'blocked')) NOT VALID`);
      await queryRunner.query(`
        CREATE TABLE IF NOT EXISTS ${s}.job_dependencies (
          depends_on bigint  NOT NULL,
          job_id     bigint  NOT NULL,
          settled    boolean NOT NULL DEFAULT false,
          PRIMARY KEY (depends_on, job_id)
        )`);
      // job.dependencies() and the removal of a deleted job's edges.
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS job_dependencies_job_idx ON ${s}.job_dependencies (job_id)`);
      await queryRunner.query(`
        CREATE OR REPLACE FUNCTION ${s}.settle_dependants() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
          outcome text := CASE WHEN TG_OP = 'DELETE' THEN 'deleted' ELSE NEW.status END;
          word text := CASE outcome WHEN 'dead' THEN 'dead-lettered' ELSE outcome END;
          children bigint[];
          released int := 0;
          notified int;
        BEGIN
          -- Each edge is settled once: a dead job retried and completed later changes nothing more.
          WITH settled AS (
            UPDATE ${s}.job_dependencies SET settled = true WHERE depends_on = OLD.id AND NOT settled RETURNING job_id
          ) SELECT array_agg(job_id ORDER BY job_id) INTO children FROM settled;
          IF children IS NULL THEN
            RETURN NULL;
          END IF;

          -- Dependants that go on: one dependency fewer; pending once none is left. Locked in id
          -- order, so two finishing jobs that share dependants wait for each other in one order.
          WITH waiting AS MATERIALIZED (
            SELECT id FROM ${s}.jobs
            WHERE id = ANY (children) AND status = 'blocked' AND (outcome = 'completed' OR on_dependency_failure = 'run')
            ORDER BY id FOR UPDATE
          ), freed AS (
            UPDATE ${s}.jobs c
            SET dependencies_left = c.dependencies_left - 1,
                status = CASE WHEN c.dependencies_left <= 1 THEN 'pending' ELSE 'blocked' END
            FROM waiting WHERE c.id = waiting.id AND c.status = 'blocked'
            RETURNING c.status
          ) SELECT count(*) FILTER (WHERE status = 'pending') INTO released FROM freed;
          IF released > 0 THEN
            PERFORM pg_notify('auto_job_queue:' || TG_TABLE_SCHEMA, 'new');
          END IF;
          IF outcome = 'completed' THEN
            RETURN NULL;
          END IF;

          -- A dependency failed: its dependants that cancel, and theirs below them that cancel too,
          -- in one statement (no trigger nesting per level of the graph). Their own trigger runs
          -- then, settles their edges and lets the dependants that run anyway go on.
          WITH RECURSIVE doomed(id, cause, cause_type, cause_word) AS (
            SELECT c.id, OLD.id, OLD.type, word FROM ${s}.jobs c
            WHERE c.id = ANY (children) AND c.status = 'blocked' AND c.on_dependency_failure = 'cancel'
            UNION
            SELECT c.id, doomed.id, p.type, 'cancelled'
            FROM doomed JOIN ${s}.job_dependencies d ON d.depends_on = doomed.id
                        JOIN ${s}.jobs c ON c.id = d.job_id
                        JOIN ${s}.jobs p ON p.id = doomed.id
            WHERE c.status = 'blocked' AND c.on_dependency_failure = 'cancel'
          ), first_cause AS (
            SELECT DISTINCT ON (id) id, cause, cause_type, cause_word FROM doomed ORDER BY id, cause
          ), locked AS MATERIALIZED (
            SELECT id FROM ${s}.jobs WHERE id IN (SELECT id FROM first_cause) ORDER BY id FOR UPDATE
          ), cancelled AS (
            UPDATE ${s}.jobs c
            SET status = 'cancelled', retry_after = NULL,
                last_error = 'dependency ' || f.cause || ' (' || f.cause_type || ') was ' || f.cause_word
            FROM first_cause f
            WHERE c.id = f.id AND c.id IN (SELECT id FROM locked) AND c.status = 'blocked'
            RETURNING c.id, c.notify_on_finish
          )
          SELECT count(pg_notify('auto_job_queue:' || TG_TABLE_SCHEMA, 'finished:' || id)) INTO notified
          FROM cancelled WHERE notify_on_finish;
          RETURN NULL;
        END $$`);
      await queryRunner.query(`DROP TRIGGER IF EXISTS jobs_settle_dependants ON ${s}.jobs`);
      await queryRunner.query(`
        CREATE TRIGGER jobs_settle_dependants AFTER UPDATE OF status ON ${s}.jobs
        FOR EACH ROW WHEN (NEW.has_dependants AND NEW.status IN ('completed', 'dead', 'cancelled') AND OLD.status <> NEW.status)
        EXECUTE FUNCTION ${s}.settle_dependants()`);
      await queryRunner.query(`DROP TRIGGER IF EXISTS jobs_settle_dependants_of_deleted ON ${s}.jobs`);
      await queryRunner.query(`
        CREATE TRIGGER jobs_settle_dependants_of_deleted AFTER DELETE ON ${s}.jobs
        FOR EACH ROW WHEN (OLD.has_dependants AND OLD.status NOT IN ('completed', 'dead', 'cancelled'))
        EXECUTE FUNCTION ${s}.settle_dependants()`);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP TRIGGER IF EXISTS jobs_settle_dependants_of_deleted ON ${s}.jobs`);
      await queryRunner.query(`DROP TRIGGER IF EXISTS jobs_settle_dependants ON ${s}.jobs`);
      await queryRunner.query(`DROP FUNCTION IF EXISTS ${s}.settle_dependants()`);
      await queryRunner.query(`DROP TABLE IF EXISTS ${s}.job_dependencies`);
      await queryRunner.query(`UPDATE ${s}.jobs SET status = 'cancelled', last_error = 'dependencies removed by a migration rollback' WHERE status = 'blocked'`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP CONSTRAINT IF EXISTS jobs_status_check`);
      await queryRunner.query(`
        ALTER TABLE ${s}.jobs ADD CONSTRAINT jobs_status_check
          CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'dead', 'cancelled')) NOT VALID`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS on_dependency_failure`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS dependencies_left`);
      await queryRunner.query(`ALTER TABLE ${s}.jobs DROP COLUMN IF EXISTS has_dependants`);
    }
  };
}
