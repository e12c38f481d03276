import { Injectable, Logger } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';
import type { EventSink, JobQueueEvent } from './job-queue-event.js';

/** The queue's event stream. Subscribe to `events$`; filter on `kind`. */
@Injectable()
export class JobQueueEvents implements EventSink {
  private readonly logger = new Logger('JobQueueEvents');
  private readonly subject = new Subject<JobQueueEvent>();
  readonly events$: Observable<JobQueueEvent> = this.subject.asObservable();

  /** Whether anyone subscribes to `events$` now. */
  get observed(): boolean {
    return this.subject.observed;
  }

  emit(event: Omit<JobQueueEvent, 'at'>): void {
    // Nobody listening: skip building the event (this runs for every job).
    if (!this.subject.observed) return;
    try {
      this.subject.next({ ...event, at: new Date() });
    } catch (error) {
      // A subscriber's failure must never reach the engine that emitted the event. RxJS itself
      // reports a throw from a subscriber's callback as an uncaught exception (docs/admin-and-events.md);
      // this catches what reaches here nonetheless (RxJS's deprecated synchronous error handling).
      this.logger.error(`An events$ subscriber threw on "${event.kind}": ${(error as Error)?.message ?? error}`);
    }
  }
}
