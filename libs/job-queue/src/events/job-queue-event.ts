export type JobQueueEventKind =
  | 'completed'
  | 'retry-scheduled'
  | 'dead-lettered'
  | 'dead-letter-alert'
  | 'lease-expired'
  | 'lease-lost'
  | 'saturated'
  | 'draining'
  | 'drained'
  | 'circuit-opened'
  | 'circuit-closed'
  | 'paused'
  | 'resumed';

/** One thing that happened in the queue; `jobId` and `type` are set where they apply. */
export interface JobQueueEvent {
  kind: JobQueueEventKind;
  at: Date;
  jobId?: string;
  type?: string;
  attempt?: number;
  workerId?: string;
  /** The attempt's error, or the dead-letter reason. */
  error?: string;
  /** retry-scheduled: how long until the retry. */
  delayMs?: number;
  /** dead-letter-alert: dead letters in the last hour; saturated: waiting jobs. */
  count?: number;
  depth?: number;
  limit?: number;
}

/** Where the engine reports events; it must never throw back into the engine. */
export interface EventSink {
  emit(event: Omit<JobQueueEvent, 'at'>): void;
  /** false while nobody listens: a hot path may then skip building its events. */
  readonly observed?: boolean;
}
