import type { ScheduleJobOptions, ScheduleSlot, StoredSchedule } from './job.store.js';
import type { ScheduleSql } from './schedule.sql.js';
import type { SqlExecutor } from './sql-executor.js';

interface ScheduleRow {
  name: string;
  cron: string;
  timezone: string;
  type: string;
  payload: Record<string, unknown>;
  options: ScheduleJobOptions;
  last_slot: Date | null;
  updated_at: Date;
}

/** Runtime cron schedules: stored, listed, and the slots they enqueued. */
export class ScheduleQueries {
  constructor(
    private readonly executor: SqlExecutor,
    private readonly sql: ScheduleSql,
  ) {}

  async upsert(schedule: Omit<StoredSchedule, 'lastSlot' | 'updatedAt'>): Promise<StoredSchedule> {
    const { rows } = await this.executor.query<ScheduleRow>(this.sql.upsertSchedule, [
      schedule.name,
      schedule.cron,
      schedule.timezone,
      schedule.type,
      JSON.stringify(schedule.payload),
      JSON.stringify(schedule.options),
    ]);
    return toSchedule(rows[0]);
  }

  async remove(name: string): Promise<boolean> {
    return (await this.executor.query(this.sql.removeSchedule, [name])).rowCount > 0;
  }

  async list(): Promise<StoredSchedule[]> {
    return (await this.executor.query<ScheduleRow>(this.sql.listSchedules)).rows.map(toSchedule);
  }

  async markSlots(slots: ReadonlyArray<ScheduleSlot>): Promise<void> {
    if (slots.length === 0) return;
    await this.executor.query(this.sql.markScheduleSlots, [
      slots.map((s) => s.name),
      slots.map((s) => s.slot),
      slots.map((s) => s.cron),
      slots.map((s) => s.timezone),
    ]);
  }

  async lastCronSlots(types: readonly string[]): Promise<Map<string, Date>> {
    if (types.length === 0) return new Map();
    const { rows } = await this.executor.query<{ type: string; last_key: string | null }>(this.sql.lastCronSlots, [types]);
    const slots = new Map<string, Date>();
    for (const row of rows) {
      const at = row.last_key ? new Date(row.last_key.slice('cron:'.length)) : null;
      if (at && !Number.isNaN(at.getTime())) slots.set(row.type, at);
    }
    return slots;
  }
}

function toSchedule(row: ScheduleRow): StoredSchedule {
  return {
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    type: row.type,
    payload: row.payload,
    options: row.options,
    lastSlot: row.last_slot,
    updatedAt: row.updated_at,
  };
}
