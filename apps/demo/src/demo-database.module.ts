import { type DynamicModule, Global, Inject, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { type LocalPostgres, startLocalPostgres } from '../../../tools/local-postgres.js';

/** Injection token of the demo's `LocalPostgres`. */
export const DEMO_DATABASE = Symbol('DEMO_DATABASE');

/** The demo's PostgreSQL: DATABASE_URL when set, else an embedded server started for this run. */
export function startDemoDatabase(logger: Logger): Promise<LocalPostgres> {
  return startLocalPostgres((line) => logger.log(line));
}

/**
 * Provides the database to the rest of the app and stops an embedded server when the app shuts
 * down. Nest runs the shutdown hooks of global modules last, in reverse order of import: AppModule
 * imports this module before JobQueueModule, so the server stops only after the queue has
 * drained and closed its connections.
 */
@Global()
@Module({})
export class DemoDatabaseModule implements OnApplicationShutdown {
  private readonly logger = new Logger('DemoDatabase');

  constructor(@Inject(DEMO_DATABASE) private readonly database: LocalPostgres) {}

  static forRoot(database: LocalPostgres): DynamicModule {
    return { module: DemoDatabaseModule, providers: [{ provide: DEMO_DATABASE, useValue: database }], exports: [DEMO_DATABASE] };
  }

  async onApplicationShutdown(): Promise<void> {
    if (!this.database.embedded) return;
    this.logger.log('Stopping the embedded PostgreSQL…');
    await this.database.stop();
    this.logger.log('Embedded PostgreSQL stopped.');
  }
}
