import { type DynamicModule, Logger, Module } from '@nestjs/common';
import { dashboardController } from './dashboard.controller.js';
import type { JobQueueDashboardOptions } from './dashboard-options.js';

/**
 * The web dashboard, served by the app's own HTTP server (Express or Fastify) at `path` (default
 * `queue`): overview, job lists, a job's page, dead letters, pauses, circuits, schedules, and a
 * JSON API under `<path>/api/`. Needs JobQueueModule in the app; see docs/operations/dashboard.md.
 */
@Module({})
export class JobQueueDashboardModule {
  static forRoot(options: JobQueueDashboardOptions = {}): DynamicModule {
    if (!options.guards?.length) {
      new Logger('JobQueueDashboard').warn(
        `The dashboard at /${options.path ?? 'queue'} has no guards: it is read-only, and anyone who reaches it can read every job's payload. Give it your app's auth guard.`,
      );
    }
    return {
      module: JobQueueDashboardModule,
      imports: options.imports ?? [],
      controllers: [dashboardController(options)],
      providers: [...(options.guards ?? [])],
    };
  }
}
