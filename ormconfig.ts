import { DataSource } from 'typeorm';
import { JOB_QUEUE_ENTITIES, JOB_QUEUE_MIGRATIONS } from './src/index.js';

/**
 * TypeORM CLI data source for the job tables (schema `job_queue`), for running the library's
 * migrations yourself instead of `autoMigrate`. See docs/migrations.md for the commands.
 */
const url = process.env.DATABASE_URL;
if (!url) {
  throw new Error('Set DATABASE_URL (postgres://user:password@host:5432/database) to run job queue migrations.');
}

export default new DataSource({
  type: 'postgres',
  url,
  entities: [...JOB_QUEUE_ENTITIES],
  migrations: [...JOB_QUEUE_MIGRATIONS],
  synchronize: false,
});
