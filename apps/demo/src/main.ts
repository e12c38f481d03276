import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { readDemoConfig } from './demo-config.js';
import { startDemoDatabase } from './demo-database.module.js';

/**
 * `npm run demo`: PostgreSQL (DATABASE_URL, or an embedded server), then a Nest HTTP app that
 * enqueues welcome e-mails and sends them with a flaky mailer. SIGTERM or Ctrl-C drains, then stops.
 */
async function bootstrap(): Promise<void> {
  const logger = new Logger('Demo');
  const config = readDemoConfig();
  const database = await startDemoDatabase(logger);
  // abortOnError: false lets a boot error reach the catch below, which stops the database.
  const app = await NestFactory.create(AppModule.forRoot(config, database), { abortOnError: false }).catch(async (error) => {
    await database.stop();
    throw error;
  });
  // On SIGINT/SIGTERM: readiness goes down, running jobs drain, then the app and the database close.
  app.enableShutdownHooks();
  try {
    await app.listen(config.port);
  } catch (error) {
    await app.close();
    throw error;
  }

  const { port } = app.getHttpServer().address() as AddressInfo; // PORT=0 picks a free one
  const base = `http://localhost:${port}`;
  const role = config.runWorker ? 'producer and worker' : 'producer only (DEMO_RUN_WORKER=false)';
  logger.log(`Listening on ${base}: ${role}.`);
  logger.log(`Try: curl -s -X POST ${base}/signups -H 'content-type: application/json' -d '{"email":"ada@example.com"}'`);
  logger.log(`Then: curl -s ${base}/jobs/1 (also /stats, /dead, /health/live, /health/ready, /metrics).`);
  logger.log(`Dashboard: ${base}/queue?token=${process.env.DASHBOARD_TOKEN ?? 'demo'}`);
  logger.log(`Stop with Ctrl-C, or kill ${process.pid} (SIGTERM) to watch jobs in flight drain first.`);
}

bootstrap().catch((error) => {
  new Logger('Demo').error(`The demo could not start: ${error?.message ?? error}`);
  process.exitCode = 1;
});
