import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { JobQueueEvents } from '../../../src/index.js';

/** Logs retries and dead letters from the queue's event stream, so the demo shows them happen. */
@Injectable()
export class QueueEventsLogger implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('QueueEvents');
  private subscription?: Subscription;

  constructor(private readonly events: JobQueueEvents) {}

  onModuleInit(): void {
    this.subscription = this.events.events$.subscribe((event) => {
      if (event.kind === 'retry-scheduled') {
        this.logger.warn(
          `Job ${event.jobId} (${event.type}) attempt ${event.attempt} failed: ${event.error}; retrying in ${event.delayMs} ms`,
        );
      } else if (event.kind === 'dead-lettered') {
        this.logger.error(`Job ${event.jobId} (${event.type}) is dead: ${event.error}. Replay it with POST /dead/${event.jobId}/retry`);
      }
    });
  }

  onModuleDestroy(): void {
    this.subscription?.unsubscribe();
  }
}
