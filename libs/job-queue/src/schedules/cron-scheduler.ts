import type { RegisteredHandler } from '../base/registered-handler.js';
import type { EngineLogger } from '../base/logger.js';
import type { JobStore, NewJob, ScheduleSlot } from '../persistence/job.store.js';
import { type CronEntry, decoratorEntry, runtimeEntry } from './cron-entry.js';

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

/** Runtime schedules (JobQueueAdmin.upsertSchedule): on in a worker process, with the module's default attempts. */
export interface RuntimeScheduleSettings {
  readonly defaultMaxAttempts: number;
  /** The longest wait between two reads of the stored schedules (without LISTEN, how soon a new one is seen). */
  readonly rereadEveryMs: number;
}

/**
 * Enqueues one job per cron slot. Every process with the handler runs this; the idempotency key
 * `cron:<slot>` makes each slot exactly one row however many processes enqueue it. With
 * `runtime`, it also enqueues the slots of the schedules stored in the database, re-read at each
 * pass, keyed `schedule:<name>:<slot>` on their type, and records each one's last slot.
 *
 * Catch-up policy: at start, only the most recent slot within `catchUpMs` is enqueued (a pod
 * that was down runs a missed schedule once, not once per missed slot); while running, every
 * slot since the previous pass is enqueued, up to 100 per pass. A runtime schedule never
 * enqueues a slot from before it was added, or before its last recorded slot.
 */
export class CronScheduler {
  private readonly lastChecked = new Map<string, number>();
  private readonly decoratorEntries: CronEntry[];
  private runtimeEntries: CronEntry[] = [];
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private stopped = true;
  private retryAfterMs = RETRY_AFTER_FAILURE_MS;
  private refreshAfterPass = false;

  constructor(
    private readonly handlers: readonly RegisteredHandler[],
    private readonly store: JobStore,
    private readonly logger: EngineLogger,
    private readonly catchUpMs: number,
    private readonly now: () => number = Date.now,
    private readonly runtime: RuntimeScheduleSettings | null = null,
  ) {
    this.decoratorEntries = handlers.map(decoratorEntry);
  }

  /** The decorator schedules (runtime ones are listed from the database). */
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
    if (this.runtime) await this.loadRuntimeEntries();
    const now = this.now();
    const jobs: NewJob[] = [];
    const checked = new Map<string, number>();
    const recorded: ScheduleSlot[] = [];
    for (const entry of this.entries) {
      const slots = this.dueSlots(entry, now);
      checked.set(entry.key, slots.length > 0 ? slots[slots.length - 1].getTime() : Math.max(this.lastChecked.get(entry.key) ?? 0, now - 1000));
      if (entry.runtime && slots.length > 0) {
        const { name, cron, timezone } = entry.runtime;
        recorded.push({ name, cron, timezone, slot: slots[slots.length - 1] });
      }
      for (const slot of slots) {
        const scheduledFor = slot.toISOString();
        jobs.push({
          type: entry.type,
          payloadJson: JSON.stringify({ ...entry.payload, scheduledFor }),
          priority: entry.priority,
          maxAttempts: entry.maxAttempts,
          maxAttemptsFromJob: entry.maxAttemptsFromJob,
          notifyOnFinish: false,
          runAt: slot,
          delayMs: 0,
          idempotencyKey: `${entry.idempotencyPrefix}${scheduledFor}`,
          orderingKey: entry.orderingKey,
          groupKey: entry.groupKey,
        });
      }
    }
    const added = jobs.length === 0 ? 0 : (await this.store.enqueue(jobs)).filter((r) => !r.deduplicated).length;
    if (recorded.length > 0) await this.store.markScheduleSlots(recorded);
    for (const [key, at] of checked) this.lastChecked.set(key, at);
    if (added > 0) this.logger.debug?.(`Scheduled ${added} cron job(s).`);
    return added;
  }

  /** A runtime schedule changed (a notification): re-read them and wake for the next slot now. */
  refresh(): void {
    if (this.stopped || !this.runtime) return;
    if (this.running) {
      this.refreshAfterPass = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.tick();
  }

  private get entries(): CronEntry[] {
    return this.runtimeEntries.length === 0 ? this.decoratorEntries : [...this.decoratorEntries, ...this.runtimeEntries];
  }

  /** The slots of one entry this pass enqueues. */
  private dueSlots(entry: CronEntry, now: number): Date[] {
    const schedule = entry.schedule;
    const since = this.lastChecked.get(entry.key);
    const slots: Date[] = [];
    if (since === undefined) {
      // First pass: the latest slot of the catch-up window, if any (for a runtime schedule, not
      // from before it was added or its last recorded slot).
      const from = Math.max(now - this.catchUpMs - 1000, entry.runtime?.notBefore ?? -Infinity);
      let slot = schedule.next(new Date(from));
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
    return slots;
  }

  private async loadRuntimeEntries(): Promise<void> {
    const stored = await this.store.listSchedules();
    const entries: CronEntry[] = [];
    for (const schedule of stored) {
      const entry = runtimeEntry(schedule, this.runtime!.defaultMaxAttempts);
      if (entry) entries.push(entry);
      else this.logger.warn(`Schedule "${schedule.name}" has a cron or time zone this version cannot read; skipped.`);
    }
    this.runtimeEntries = entries;
    // Forget the slots of schedules removed or re-timed.
    const live = new Set(this.entries.map((entry) => entry.key));
    for (const key of this.lastChecked.keys()) if (!live.has(key)) this.lastChecked.delete(key);
  }

  /** Runs a pass now, then wakes at each next slot (at least every 30 s). */
  start(): void {
    if (this.handlers.length === 0 && !this.runtime) return;
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
        this.running = null;
        if (this.stopped) return;
        if (this.refreshAfterPass) {
          this.refreshAfterPass = false;
          this.tick();
          return;
        }
        // The slots of a failed pass are still due: they are retried soon, not at the next slot.
        const wait = failed ? this.retryAfterMs : Math.min(Math.max(this.msUntilNextSlot(), 10), this.runtime?.rereadEveryMs ?? 30_000);
        if (failed) this.retryAfterMs = Math.min(this.retryAfterMs * 2, MAX_RETRY_AFTER_FAILURE_MS);
        this.timer = setTimeout(() => this.tick(), wait);
        this.timer.unref?.();
      });
  }

  /** Milliseconds until the earliest next slot of any schedule. */
  msUntilNextSlot(): number {
    const now = this.now();
    let earliest = Infinity;
    for (const entry of this.entries) {
      const next = entry.schedule.next(new Date(now));
      if (next) earliest = Math.min(earliest, next.getTime() - now);
    }
    return earliest;
  }
}
