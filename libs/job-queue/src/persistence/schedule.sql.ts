import type { JobTables } from './job-tables.js';

/** Cron schedules added at run time, and the last slot each has enqueued. */
export function scheduleSql({ jobs, schedules, channel }: JobTables) {
  return {
    /**
     * Adds or replaces a schedule by name (the primary key makes two concurrent upserts one row,
     * the later winning). A changed cron or time zone starts the schedule afresh from now: its
     * last slot is forgotten, so no slot of the old timetable is caught up. Every process hears of it.
     */
    upsertSchedule: `
      WITH saved AS (
        INSERT INTO ${schedules} AS s (name, cron, timezone, type, payload, options)
        VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb)
        ON CONFLICT (name) DO UPDATE SET
          cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, type = EXCLUDED.type, payload = EXCLUDED.payload,
          options = EXCLUDED.options, updated_at = now(),
          last_slot = CASE WHEN (s.cron, s.timezone) = (EXCLUDED.cron, EXCLUDED.timezone) THEN s.last_slot END
        RETURNING name, cron, timezone, type, payload, options, last_slot, updated_at
      ), notified AS (SELECT pg_notify('${channel}', 'schedules') FROM saved)
      SELECT saved.*, (SELECT count(*) FROM notified)::int AS notified FROM saved`,

    /** One delete wins; only it notifies. */
    removeSchedule: `
      WITH removed AS (DELETE FROM ${schedules} WHERE name = $1 RETURNING name)
      SELECT pg_notify('${channel}', 'schedules') FROM removed`,

    /** Read-only. */
    listSchedules: `SELECT name, cron, timezone, type, payload, options, last_slot, updated_at FROM ${schedules} ORDER BY name`,

    /**
     * Records the latest slot each schedule enqueued ($1 names, $2 slots, $3 crons, $4 time
     * zones: the timetable the slot came from). GREATEST: processes that enqueue the same slots at
     * once, or a slow one behind, never move it back. A pass that read the timetable before an
     * upsert changed it records nothing, so the new timetable still starts afresh.
     */
    markScheduleSlots: `
      UPDATE ${schedules} s SET last_slot = GREATEST(s.last_slot, m.slot)
      FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[]) AS m(name, slot, cron, timezone)
      WHERE s.name = m.name AND s.cron = m.cron AND s.timezone = m.timezone`,

    /**
     * Read-only: the latest slot a decorator schedule enqueued, from its jobs' idempotency keys
     * (`cron:<ISO time>` sorts by time), on the idempotency index. Gone once retention deleted them.
     */
    lastCronSlots: `
      SELECT t.type, (SELECT max(j.idempotency_key) FROM ${jobs} j
                      WHERE j.type = t.type AND j.idempotency_key >= 'cron:' AND j.idempotency_key < 'cron;') AS last_key
      FROM unnest($1::text[]) AS t(type)`,
  };
}

export type ScheduleSql = ReturnType<typeof scheduleSql>;
