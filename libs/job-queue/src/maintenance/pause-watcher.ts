import type { EngineLogger } from '../base/logger.js';
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
  private failing = false;

  constructor(
    private readonly store: Pick<JobStore, 'pausedTypes'>,
    private readonly apply: (types: readonly string[]) => PauseChange,
    private readonly events: EventSink,
    private readonly logger: EngineLogger,
  ) {}

  /**
   * The periodic read: never rejects, and says once that the list cannot be read (the database
   * away) and once that it can again, not at every poll. The last list read holds meanwhile.
   */
  async poll(): Promise<void> {
    try {
      await this.refresh();
      if (this.failing) this.logger.log('The paused types can be read again.');
      this.failing = false;
    } catch (error) {
      if (!this.failing) {
        this.logger.warn(`Could not read the paused types: ${(error as Error)?.message ?? error}. The last list read holds until it can be.`);
      }
      this.failing = true;
    }
  }

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
