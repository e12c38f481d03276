import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import { JobQueueDashboardModule, JobQueueErrorFilter, JobQueueModule } from '../../../src/index.js';
import type { LocalPostgres } from '../../../tools/local-postgres.js';
import { DEMO_DATABASE, DemoDatabaseModule } from './demo-database.module.js';
import { DemoDashboardGuard } from './demo-dashboard.guard.js';
import type { DemoConfig } from './demo-config.js';
import { HealthController } from './health.controller.js';
import { JobsController } from './jobs.controller.js';
import { MetricsController } from './metrics.controller.js';

import { QueueEventsLogger } from './queue-events.logger.js';
import { SignupsController } from './signups.controller.js';
import { WelcomeMailer } from './welcome-mailer.js';

@Module({})
export class AppModule {
  static forRoot(config: DemoConfig, database: LocalPostgres): DynamicModule {
    return {
      module: AppModule,
      imports: [
        // Before JobQueueModule: see DemoDatabaseModule on shutdown order.
        DemoDatabaseModule.forRoot(database),
        TerminusModule,
        JobQueueModule.forRootAsync({
          inject: [DEMO_DATABASE],
          useFactory: ({ url }: LocalPostgres) => ({
            dataSource: { type: 'postgres', url },
            runWorker: config.runWorker,
            maxQueueDepth: config.maxQueueDepth,
            metrics: true,
          }),
        }),
        // The dashboard at /queue: open http://localhost:3000/queue?token=demo (DASHBOARD_TOKEN).
        JobQueueDashboardModule.forRoot({ guards: [DemoDashboardGuard] }),
      ],
      controllers: [SignupsController, JobsController, HealthController, MetricsController],
      providers: [WelcomeMailer, QueueEventsLogger, { provide: APP_FILTER, useClass: JobQueueErrorFilter }],
    };
  }
}
