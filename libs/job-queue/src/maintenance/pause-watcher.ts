import type { EventSink } from '../events/job-queue-event.js';
import type { PauseChange } from '../engine/paused-types.js';
import type { JobStore } from '../persistence/job.store.js';

/**
 * Reads the paused types from the database (every poll interval, and at once when a pause or
 * resume is announced) and hands them to the worker; emits `paused` / `resumed` for each change
 * this process sees. One read at a time: reads asked for meanwhile share the next one.
 */
export class PauseWatcher {
  private reading: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly store: Pick<JobStore, 'pausedTypes'>,
    private readonly apply: (types: readonly string[]) => PauseChange,
    private readonly events: EventSink,
  ) {}

  refresh(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = this.read().finally(() => {
      this.reading = null;
      if (this.again) {
        this.again = false;
        void this.refresh().catch(() => undefined);
      }
    });
    return this.reading;
  }

  private async read(): Promise<void> {
    const change = this.apply(await this.store.pausedTypes());
    for (const type of change.paused) this.events.emit({ kind: 'paused', type });
    for (const type of change.resumed) this.events.emit({ kind: 'resumed', type });
  }
}
