import type { RegisteredHandler } from '../base/registered-handler.js';
import type { EngineLogger } from '../base/logger.js';
import type { JobStore, NewJob } from '../persistence/job.store.js';

/** Slots one pass enqueues per schedule at most (a stalled process catching up). */
const MAX_SLOTS_PER_PASS = 100;
/** A pass that failed (the database away) is tried again this soon, then twice as late each time. */
const RETRY_AFTER_FAILURE_MS = 1_000;
const MAX_RETRY_AFTER_FAILURE_MS = 30_000;

export interface ScheduledType {
  type: string;
  cron: string;
  timezone: string;
  nextRunAt: Date | null;
}

/**
 * Enqueues one job per cron slot. Every process with the handler runs this; the idempotency key
 * `cron:<slot>` makes each slot exactly one row however many processes enqueue it.
 *
 * Catch-up policy: at start, only the most recent slot within `catchUpMs` is enqueued (a pod
 * that was down runs a missed schedule once, not once per missed slot); while running, every
 * slot since the previous pass is enqueued, up to 100 per pass.
 */
export class CronScheduler {
  private readonly lastChecked = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private stopped = true;
  private retryAfterMs = RETRY_AFTER_FAILURE_MS;

  constructor(
    private readonly handlers: readonly RegisteredHandler[],
    private readonly store: JobStore,
    private readonly logger: EngineLogger,
    private readonly catchUpMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get schedules(): ScheduledType[] {
    const now = new Date(this.now());
    return this.handlers.map((h) => ({
      type: h.type,
      cron: h.schedule!.expression,
      timezone: h.schedule!.timezone,
      nextRunAt: h.schedule!.next(now),
    }));
  }

  /**
   * Enqueues due slots; returns how many were new rows. The slots count as done only once their
   * enqueue has committed: a pass that fails (the database away) leaves them to the next one.
   */
  async runOnce(): Promise<number> {
    const now = this.now();
    const jobs: NewJob[] = [];
    const checked = new Map<string, number>();
    for (const handler of this.handlers) {
      const schedule = handler.schedule!;
      const since = this.lastChecked.get(handler.type);
      const slots: Date[] = [];
      if (since === undefined) {
        // First pass: the latest slot of the catch-up window, if any.
        let slot = schedule.next(new Date(now - this.catchUpMs - 1000));
        let latest: Date | null = null;
        while (slot && slot.getTime() <= now) {
          latest = slot;
          slot = schedule.next(slot);
        }
        if (latest) slots.push(latest);
      } else {
        let slot = schedule.next(new Date(since));
        while (slot && slot.getTime() <= now && slots.length < MAX_SLOTS_PER_PASS) {
          slots.push(slot);
          slot = schedule.next(slot);
        }
      }
      checked.set(handler.type, slots.length > 0 ? slots[slots.length - 1].getTime() : Math.max(since ?? 0, now - 1000));
      for (const slot of slots) {
        const scheduledFor = slot.toISOString();
        jobs.push({
          type: handler.type,
          payloadJson: JSON.stringify({ scheduledFor }),
          priority: 0,
          maxAttempts: handler.maxAttempts,
          maxAttemptsFromJob: false,
          notifyOnFinish: false,
          runAt: slot,
          delayMs: 0,
          idempotencyKey: `cron:${scheduledFor}`,
          orderingKey: null,
        });
      }
    }
    const added = jobs.length === 0 ? 0 : (await this.store.enqueue(jobs)).filter((r) => !r.deduplicated).length;
    for (const [type, at] of checked) this.lastChecked.set(type, at);
    if (added > 0) this.logger.debug?.(`Scheduled ${added} cron job(s).`);
    return added;
  }

  /** Runs a pass now, then wakes at each next slot (at least every 30 s). */
  start(): void {
    if (this.handlers.length === 0) return;
    this.stopped = false;
    this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private tick(): void {
    if (this.stopped) return;
    let failed = false;
    this.running = this.runOnce()
      .then(() => {
        this.retryAfterMs = RETRY_AFTER_FAILURE_MS;
      })
      .catch((error) => {
        failed = true;
        this.logger.warn(`Cron scheduling failed: ${(error as Error)?.message ?? error}; retrying in ${this.retryAfterMs} ms.`);
      })
      .finally(() => {
        if (this.stopped) return;
        // The slots of a failed pass are still due: they are retried soon, not at the next slot.
        const wait = failed ? this.retryAfterMs : Math.min(Math.max(this.msUntilNextSlot(), 10), 30_000);
        if (failed) this.retryAfterMs = Math.min(this.retryAfterMs * 2, MAX_RETRY_AFTER_FAILURE_MS);
        this.timer = setTimeout(() => this.tick(), wait);
        this.timer.unref?.();
      });
  }

  /** Milliseconds until the earliest next slot of any schedule. */
  msUntilNextSlot(): number {
    const now = this.now();
    let earliest = Infinity;
    for (const handler of this.handlers) {
      const next = handler.schedule!.next(new Date(now));
      if (next) earliest = Math.min(earliest, next.getTime() - now);
    }
    return earliest;
  }
}
