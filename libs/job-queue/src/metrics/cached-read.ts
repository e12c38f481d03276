import { monotonicNow } from '../base/monotonic-clock.js';

/**
 * A database read shared by every scrape within `everyMs`: concurrent scrapes wait for one read,
 * and a failed read keeps the last value (a scrape must not fail because the database blinked).
 */
export class CachedRead<T> {
  private value: T | null = null;
  private readAt = -Infinity;
  private reading: Promise<T | null> | null = null;

  constructor(
    private readonly everyMs: number,
    private readonly read: () => Promise<T>,
  ) {}

  get(): Promise<T | null> {
    if (monotonicNow() - this.readAt < this.everyMs) return Promise.resolve(this.value);
    this.reading ??= this.read().then(
      (value) => {
        this.value = value;
        this.readAt = monotonicNow();
        return value;
      },
      () => this.value,
    ).finally(() => {
      this.reading = null;
    });
    return this.reading;
  }
}
