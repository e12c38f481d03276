import { Logger, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { HealthIndicatorService } from '@nestjs/terminus';
import { JobQueueAdmin } from './admin/job-queue.admin.js';
import { JobQueueConnection } from './connection/job-queue.connection.js';
import { JobHandlerExplorer } from './discovery/job-handler.explorer.js';
import { JobHandlerRegistry } from './discovery/job-handler.registry.js';
import { JobQueueEvents } from './events/job-queue.events.js';
import { JobQueueHealthIndicator } from './health/job-queue.health.js';
import { JOB_INSTRUMENTS, JOB_QUEUE_OPTIONS, JOB_STORE, JOB_TRACING } from './base/job-queue.constants.js';
import { OpenTelemetryTracing } from './tracing/open-telemetry-tracing.js';
import { JobQueueMetrics } from './metrics/job-queue.metrics.js';
import type { JobStore } from './persistence/job.store.js';
import { JOB_QUEUE_MODULE_OPTIONS, JobQueueConfigurableModule } from './job-queue.module-definition.js';
import type { JobQueueOptions, ResolvedJobQueueOptions } from './options/job-queue-options.js';
import { resolveJobQueueOptions } from './options/resolve-options.js';
import { unknownOptionKeys } from './options/unknown-options.js';
import { JobQueueMonitor } from './maintenance/job-queue.monitor.js';
import { JobNotificationHub } from './notifications/job-notification.hub.js';
import { PostgresJobStore, storeSettings } from './persistence/postgres-job.store.js';
import { Backpressure } from './producer/backpressure.js';
import { JobProducer } from './producer/job.producer.js';
import { JobQueueOrchestrator } from './orchestrator/job-queue.orchestrator.js';
import { JobQueueTester } from './testing/job-queue.tester.js';

/**
 * Background jobs on PostgreSQL. `JobQueueModule.forRoot({ dataSource })` or `forRootAsync(...)`;
 * global, so JobProducer, JobQueueAdmin, JobQueueEvents and JobQueueHealthIndicator inject anywhere.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: JOB_QUEUE_OPTIONS,
      useFactory: (options: JobQueueOptions) => {
        const resolved = resolveJobQueueOptions(options);
        // Warned, not refused: a shared config object may carry keys meant for someone else.
        const unknown = unknownOptionKeys(options);
        if (unknown.length > 0) {
          new Logger('JobQueue').warn(`Unknown JobQueueModule option(s) ignored: ${unknown.join(', ')}. Check their spelling.`);
        }
        return resolved;
      },
      inject: [JOB_QUEUE_MODULE_OPTIONS],
    },
    {
      provide: JobQueueConnection,
      useFactory: (options: ResolvedJobQueueOptions) => JobQueueConnection.open(options),
      inject: [JOB_QUEUE_OPTIONS],
    },
    {
      provide: JOB_STORE,
      useFactory: (connection: JobQueueConnection, options: ResolvedJobQueueOptions) =>
        new PostgresJobStore(connection.dataSource, options.schema, storeSettings(options)),
      inject: [JobQueueConnection, JOB_QUEUE_OPTIONS],
    },
    {
      provide: JOB_INSTRUMENTS,
      useFactory: (options: ResolvedJobQueueOptions, store: JobStore, backpressure: Backpressure) =>
        options.metrics ? JobQueueMetrics.create(options.metrics.registry, store, backpressure, options.depthRefreshMs) : null,
      inject: [JOB_QUEUE_OPTIONS, JOB_STORE, Backpressure],
    },
    {
      provide: JOB_TRACING,
      useFactory: (options: ResolvedJobQueueOptions) => (options.tracing ? OpenTelemetryTracing.load() : null),
      inject: [JOB_QUEUE_OPTIONS],
    },
    HealthIndicatorService,
    JobHandlerRegistry,
    JobHandlerExplorer,
    Backpressure,
    JobQueueMonitor,
    JobNotificationHub,
    JobQueueEvents,
    JobQueueOrchestrator,
    JobProducer,
    JobQueueAdmin,
    JobQueueHealthIndicator,
    // Always provided (options may come from a factory); it refuses to run unless runWorker is 'manual'.
    JobQueueTester,
  ],
  exports: [JobProducer, JobQueueAdmin, JobQueueEvents, JobQueueHealthIndicator, JobHandlerRegistry, JobQueueTester],
})
export class JobQueueModule extends JobQueueConfigurableModule {}
