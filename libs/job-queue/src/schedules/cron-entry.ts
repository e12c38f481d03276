import type { HandlerSchedule, RegisteredHandler } from '../base/registered-handler.js';
import type { StoredSchedule } from '../persistence/job.store.js';
import { CronSchedule } from './cron-schedule.js';

/** One timetable the scheduler enqueues from: a decorator's or a runtime schedule's. */
export interface CronEntry {
  /** The scheduler tracks the slots it has enqueued by this key. */
  readonly key: string;
  readonly type: string;
  readonly schedule: HandlerSchedule;
  /** The job's payload, `scheduledFor` added. */
  readonly payload: Readonly<Record<string, unknown>>;
  readonly priority: number;
  readonly maxAttempts: number;
  readonly maxAttemptsFromJob: boolean;
  readonly orderingKey: string | null;
  readonly groupKey: string | null;
  /** Each slot's idempotency key is this prefix and the slot's ISO time: one job per slot. */
  readonly idempotencyPrefix: string;
  /** A runtime schedule: its name (its slots are recorded) and the earliest time a slot may come from. */
  readonly runtime: { readonly name: string; readonly cron: string; readonly timezone: string; readonly notBefore: number } | null;
}

/** A `@JobHandler({ cron })`: slots keyed `cron:<slot>`, as they always were. */
export function decoratorEntry(handler: RegisteredHandler): CronEntry {
  return {
    key: `type:${handler.type}`,
    type: handler.type,
    schedule: handler.schedule!,
    payload: {},
    priority: 0,
    maxAttempts: handler.maxAttempts,
    maxAttemptsFromJob: false,
    orderingKey: null,
    groupKey: null,
    idempotencyPrefix: 'cron:',
    runtime: null,
  };
}

/**
 * A stored schedule. Its key holds the timetable, so a changed cron starts afresh; a stored row
 * the scheduler cannot parse (written by a newer version, say) is skipped, not fatal.
 */
export function runtimeEntry(stored: StoredSchedule, defaultMaxAttempts: number): CronEntry | null {
  let schedule: CronSchedule;
  try {
    schedule = CronSchedule.parse(stored.cron, stored.timezone);
  } catch {
    return null;
  }
  const maxAttempts = stored.options.maxAttempts;
  return {
    key: `schedule:${stored.name}\u0000${stored.cron}\u0000${stored.timezone}`,
    type: stored.type,
    schedule,
    payload: stored.payload,
    priority: stored.options.priority ?? 0,
    maxAttempts: maxAttempts ?? defaultMaxAttempts,
    maxAttemptsFromJob: maxAttempts !== undefined,
    orderingKey: stored.options.orderingKey ?? null,
    groupKey: stored.options.group ?? null,
    idempotencyPrefix: `schedule:${stored.name}:`,
    runtime: { name: stored.name, cron: stored.cron, timezone: stored.timezone, notBefore: (stored.lastSlot ?? stored.updatedAt).getTime() },
  };
}
