import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import { JOB_QUEUE_ENTITIES } from '../persistence/entities.js';
import { JobEntity } from '../persistence/job.entity.js';
import { SchemaMigrator } from '../persistence/schema-migrator.js';

/**
 * The DataSource the queue runs on: one the module opened (and closes last, after the drain), or
 * the app's own (which the app closes). Destroyed in onApplicationShutdown, after every
 * beforeApplicationShutdown drain has finished.
 */
export class JobQueueConnection implements OnApplicationShutdown {
  private static readonly logger = new Logger('JobQueue');

  private constructor(
    readonly dataSource: DataSource,
    readonly owned: boolean,
  ) {}

  static async open(options: ResolvedJobQueueOptions): Promise<JobQueueConnection> {
    const connection = isDataSource(options.dataSource)
      ? JobQueueConnection.adopt(options.dataSource)
      : await JobQueueConnection.create(options.dataSource);
    try {
      if (options.autoMigrate) {
        const applied = await new SchemaMigrator(connection.dataSource, options.schema).migrate();
        if (applied.length > 0) JobQueueConnection.logger.log(`Applied migrations to schema "${options.schema}": ${applied.join(', ')}`);
      } else {
        await JobQueueConnection.assertTablesExist(connection.dataSource, options.schema);
      }
    } catch (error) {
      await connection.onApplicationShutdown();
      throw error;
    }
    return connection;
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.owned && this.dataSource.isInitialized) await this.dataSource.destroy();
  }

  /**
   * Runs a boot step; if it throws, closes the DataSource this module opened before rethrowing.
   * A boot that fails gives the app no instance to close (NestFactory.create rejects), so with
   * `abortOnError: false` the pool would otherwise stay open until its idle timeout.
   */
  async closedIfFails<T>(step: () => T | Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      await this.onApplicationShutdown().catch(() => undefined);
      throw error;
    }
  }

  private static adopt(dataSource: DataSource): JobQueueConnection {
    if (dataSource.options.type !== 'postgres') {
      throw new JobQueueConfigError(`auto-job-queue runs on PostgreSQL; the DataSource given is "${dataSource.options.type}".`);
    }
    if (!dataSource.isInitialized) {
      throw new JobQueueConfigError(
        'The DataSource passed to JobQueueModule is not initialised. Call dataSource.initialize() first, ' +
          'or pass DataSourceOptions and let the module open it.',
      );
    }
    if (!dataSource.hasMetadata(JobEntity)) {
      throw new JobQueueConfigError(
        'The DataSource passed to JobQueueModule does not list the job entities. ' +
          "Add them: entities: [...yourEntities, ...JOB_QUEUE_ENTITIES] (import { JOB_QUEUE_ENTITIES } from 'auto-job-queue').",
      );
    }
    return new JobQueueConnection(dataSource, false);
  }

  private static async create(options: DataSourceOptions): Promise<JobQueueConnection> {
    const type = (options as { type?: string }).type ?? 'postgres';
    if (type !== 'postgres') {
      throw new JobQueueConfigError(`auto-job-queue runs on PostgreSQL; dataSource.type is "${type}". Use type: 'postgres'.`);
    }
    const dataSource = new DataSource({
      ...(options as DataSourceOptions & { type: 'postgres' }),
      type: 'postgres',
      entities: [...JOB_QUEUE_ENTITIES],
      migrations: [],
      migrationsRun: false,
      synchronize: false,
      subscribers: [],
    });
    await dataSource.initialize();
    return new JobQueueConnection(dataSource, true);
  }

  private static async assertTablesExist(dataSource: DataSource, schema: string): Promise<void> {
    const [row] = await dataSource.query(`SELECT to_regclass($1) IS NOT NULL AS present`, [`"${schema}".jobs`]);
    if (!row?.present) {
      throw new JobQueueConfigError(
        `Table "${schema}".jobs does not exist and autoMigrate is off. Run JOB_QUEUE_MIGRATIONS with your migrations, ` +
          'or set autoMigrate: true.',
      );
    }
  }
}

function isDataSource(value: unknown): value is DataSource {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as DataSource).initialize === 'function' &&
    typeof (value as DataSource).isInitialized === 'boolean'
  );
}
