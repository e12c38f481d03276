import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { JobQueueHealthIndicator } from '../../../src/index.js';

/**
 * Kubernetes probes. Liveness: is the worker loop going round (a database outage does not fail
 * it). Readiness: down while draining, while the database is unreachable and while the queue is
 * saturated; degraded (still 200) while dead letters of the last hour reach the alert threshold.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly queue: JobQueueHealthIndicator,
  ) {}

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.queue.isAlive()]);
  }

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([() => this.queue.isReady()]);
  }
}
