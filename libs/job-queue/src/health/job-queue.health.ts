import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorStatus } from '@nestjs/terminus';
import { JobQueueMonitor } from '../maintenance/job-queue.monitor.js';
import { JobQueueOrchestrator } from '../orchestrator/job-queue.orchestrator.js';

/**
 * Readiness's status: `degraded` where the installed Terminus has that state (12); Terminus 11
 * has not, and readiness there is `up` with `degraded: true` instead.
 */
export type JobQueueReadyStatus = 'degraded' extends HealthIndicatorStatus ? 'up' | 'down' | 'degraded' : 'up' | 'down';

/** What `isReady()` resolves with, under its key: Terminus's indicator result, with its details. */
export type JobQueueReadiness<Key extends string = 'job-queue'> = Record<
  Key,
  {
    status: JobQueueReadyStatus;
    depth: number;
    dead: number;
    inFlight: number;
    draining: boolean;
    limit?: number;
    openCircuits?: string[];
    message?: string;
    degraded?: boolean;
  }
>;

/** Terminus indicators for Kubernetes probes: liveness and readiness of this process's queue. */
@Injectable()
export class JobQueueHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    private readonly orchestrator: JobQueueOrchestrator,
    private readonly monitor: JobQueueMonitor,
  ) {}

  /**
   * Up while the worker loop goes round (or in a producer-only process). A database outage does
   * not take it down: restarting the pod would not bring the database back.
   */
  isAlive<const Key extends string = 'job-queue'>(key: Key = 'job-queue' as Key) {
    const session = this.health.check(key);
    const status = this.orchestrator.status();
    const silentForMs = status.silentForMs;
    if (!status.runWorker || silentForMs === null) return session.up({ runWorker: status.runWorker });
    const data = { inFlight: status.inFlight, silentForMs };
    return silentForMs > this.monitor.stallThresholdMs ? session.down({ ...data, message: 'worker loop is stuck' }) : session.up(data);
  }

  /**
   * Down while draining, while the database is unreachable, and while the queue is saturated;
   * degraded while the last hour's dead letters reach the alert threshold; up otherwise.
   */
  async isReady<const Key extends string = 'job-queue'>(key: Key = 'job-queue' as Key): Promise<JobQueueReadiness<Key>> {
    const session = this.health.check(key);
    const status = this.orchestrator.status();
    const snapshot = await this.monitor.snapshot();
    const data = {
      depth: snapshot.depth,
      dead: snapshot.deadLastHour,
      inFlight: status.inFlight,
      draining: status.draining,
      ...(snapshot.limit !== null ? { limit: snapshot.limit } : {}),
      // Shown, not failing: an open circuit protects a downstream; this pod can still serve.
      ...(snapshot.openCircuits.length > 0 ? { openCircuits: snapshot.openCircuits } : {}),
    };
    if (status.draining) return session.down({ ...data, message: 'draining for shutdown' });
    if (!snapshot.databaseReachable) return session.down({ ...data, message: `database unreachable: ${snapshot.error}` });
    if (snapshot.saturated) return session.down({ ...data, message: 'queue saturated' });
    if (snapshot.alerting) {
      const degraded = (session as { degraded?: (d: object) => unknown }).degraded;
      // Terminus 11 has no degraded state: report up with the flag instead.
      return typeof degraded === 'function'
        ? (degraded.call(session, { ...data, message: 'dead letters reached the alert threshold' }) as JobQueueReadiness<Key>)
        : session.up({ ...data, degraded: true });
    }
    return session.up(data);
  }
}
