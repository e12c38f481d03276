import {
  ConsoleLogger,
  type DynamicModule,
  type INestApplicationContext,
  Logger,
  type LoggerService,
  type ModuleMetadata,
  type Provider,
  type Type,
} from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  JobProducer,
  JobQueueAdmin,
  JobQueueEvents,
  JobQueueHealthIndicator,
  JobQueueModule,
  type JobQueueOptions,
} from '../../src/index.js';

export interface QueueApp {
  app: INestApplicationContext;
  producer: JobProducer;
  admin: JobQueueAdmin;
  events: JobQueueEvents;
  health: JobQueueHealthIndicator;
  close(): Promise<void>;
}

/** Quiet by default; set AJQ_TEST_LOGS=1 to see the queue's logs while debugging a test. */
const quiet: LoggerService | undefined = process.env.AJQ_TEST_LOGS
  ? undefined
  : { log() {}, warn() {}, error() {}, debug() {}, verbose() {} };

/**
 * Records the messages Nest's loggers write at error level (the queue logs through them) until
 * `stop()`, which puts the usual logger back. Nest's logger is one per process: boot the apps
 * first (booting one sets the logger), then capture.
 */
export function captureErrorLogs(): { errors: string[]; stop(): void } {
  const errors: string[] = [];
  const usual: LoggerService = quiet ?? new ConsoleLogger();
  Logger.overrideLogger({
    log: (message, ...rest) => usual.log(message, ...rest),
    warn: (message, ...rest) => usual.warn(message, ...rest),
    debug: (message, ...rest) => usual.debug?.(message, ...rest),
    verbose: (message, ...rest) => usual.verbose?.(message, ...rest),
    error: (message, ...rest) => {
      errors.push(String(message));
      usual.error(message, ...rest);
    },
  });
  return { errors, stop: () => Logger.overrideLogger(usual) };
}

/**
 * AJQ_TEST_LISTEN=false runs the whole suite without LISTEN (as behind a pooler in transaction
 * mode); a test that passes `listen` itself still gets what it asked for.
 */
const listenDefault: Partial<JobQueueOptions> = process.env.AJQ_TEST_LISTEN === 'false' ? { listen: false } : {};

/**
 * Compiles and initialises a Nest testing module. When init fails (onModuleInit threw), the
 * module is closed before the error is rethrown, so nothing it opened stays open.
 */
export async function bootTestingModule(metadata: ModuleMetadata): Promise<TestingModule> {
  const builder = Test.createTestingModule(metadata);
  if (quiet) builder.setLogger(quiet);
  const app = await builder.compile();
  try {
    await app.init();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

/** Boots JobQueueModule with the given handler providers in this process, as an app would. */
export async function startQueueApp(
  url: string,
  options: Partial<JobQueueOptions> = {},
  providers: Array<Provider | Type> = [],
  imports: DynamicModule[] = [],
): Promise<QueueApp> {
  const app = await bootTestingModule({
    imports: [
      JobQueueModule.forRoot({
        pollIntervalMs: 200,
        ...listenDefault,
        ...options,
        dataSource: options.dataSource ?? { type: 'postgres', url },
      }),
      ...imports,
    ],
    providers,
  });
  let closed = false;
  return {
    app,
    producer: app.get(JobProducer),
    admin: app.get(JobQueueAdmin),
    events: app.get(JobQueueEvents),
    health: app.get(JobQueueHealthIndicator),
    async close() {
      if (closed) return;
      closed = true;
      await app.close();
    },
  };
}
