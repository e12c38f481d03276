/**
 * A parsed cron expression in a time zone: 5 fields (minute hour day month weekday) or 6 with
 * seconds first. Fields take `*`, numbers, ranges `a-b`, steps `*\/n` and `a-b/n`, lists, and
 * month/weekday names. As in classic cron, when both day-of-month and weekday are restricted a
 * day matching either runs.
 */
export class CronSchedule {
  private constructor(
    readonly expression: string,
    readonly timezone: string,
    private readonly seconds: ReadonlySet<number>,
    private readonly minutes: ReadonlySet<number>,
    private readonly hours: ReadonlySet<number>,
    private readonly days: ReadonlySet<number>,
    private readonly months: ReadonlySet<number>,
    private readonly weekdays: ReadonlySet<number>,
    private readonly dayRestricted: boolean,
    private readonly weekdayRestricted: boolean,
    private readonly clock: LocalClock,
  ) {}

  /** True when the expression has a seconds field (slots can be a second apart). */
  get hasSeconds(): boolean {
    return !(this.seconds.size === 1 && this.seconds.has(0));
  }

  static parse(expression: string, timezone = 'UTC'): CronSchedule {
    if (typeof expression !== 'string') throw new Error('cron must be a string such as "*/5 * * * *".');
    const fields = expression.trim().split(/\s+/);
    if (fields.length !== 5 && fields.length !== 6) {
      throw new Error(`cron "${expression}" must have 5 fields (minute hour day month weekday) or 6 with seconds first.`);
    }
    const [second, minute, hour, day, month, weekday] = fields.length === 6 ? fields : ['0', ...fields];
    let clock: LocalClock;
    try {
      clock = LocalClock.for(timezone);
    } catch {
      throw new Error(`timezone "${timezone}" is not a valid IANA time zone (for example "Europe/Paris" or "UTC").`);
    }
    const weekdays = parseField(weekday, 'weekday', 0, 7, WEEKDAY_NAMES, expression);
    if (weekdays.has(7)) weekdays.add(0);
    weekdays.delete(7);
    return new CronSchedule(
      expression,
      timezone,
      parseField(second, 'second', 0, 59, {}, expression),
      parseField(minute, 'minute', 0, 59, {}, expression),
      parseField(hour, 'hour', 0, 23, {}, expression),
      parseField(day, 'day of month', 1, 31, {}, expression),
      parseField(month, 'month', 1, 12, MONTH_NAMES, expression),
      weekdays,
      // As in Vixie cron, a field starting with * (even */2) does not count as restricted.
      !day.startsWith('*') && day !== '?',
      !weekday.startsWith('*') && weekday !== '?',
      clock,
    );
  }

  /** The first slot strictly after `after` (whole seconds), or null if none within ~5 years. */
  next(after: Date): Date | null {
    let t = Math.floor(after.getTime() / 1000) * 1000 + 1000;
    const limit = t + 5 * 366 * 24 * 3600 * 1000;
    while (t < limit) {
      const local = this.clock.fieldsAt(t);
      if (!this.months.has(local.month) || !this.dayMatches(local)) {
        // To the next local midnight, less two hours so a DST shift never jumps past it.
        const toMidnight = ((23 - local.hour) * 3600 + (59 - local.minute) * 60 + (60 - local.second)) * 1000;
        t += Math.max(toMidnight - 2 * 3600 * 1000, 3600 * 1000 - (local.minute * 60 + local.second) * 1000);
        continue;
      }
      if (!this.hours.has(local.hour)) {
        t += (3600 - local.minute * 60 - local.second) * 1000;
        continue;
      }
      if (!this.minutes.has(local.minute)) {
        t += (60 - local.second) * 1000;
        continue;
      }
      if (!this.seconds.has(local.second)) {
        t += 1000;
        continue;
      }
      return new Date(t);
    }
    return null;
  }

  private dayMatches(local: LocalFields): boolean {
    const dayOk = this.days.has(local.day);
    const weekdayOk = this.weekdays.has(local.weekday);
    if (this.dayRestricted && this.weekdayRestricted) return dayOk || weekdayOk;
    return dayOk && weekdayOk;
  }
}

const MONTH_NAMES: Record<string, number> = {
  jan: 1, feb: 2, mar: 3, apr: 4, may: 5, jun: 6, jul: 7, aug: 8, sep: 9, oct: 10, nov: 11, dec: 12,
};
const WEEKDAY_NAMES: Record<string, number> = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };

function parseField(
  text: string,
  name: string,
  min: number,
  max: number,
  names: Record<string, number>,
  expression: string,
): Set<number> {
  const values = new Set<number>();
  const fail = (why: string): never => {
    throw new Error(`cron "${expression}": ${name} field "${text}" ${why}.`);
  };
  const value = (token: string): number => {
    const named = names[token.toLowerCase()];
    if (named !== undefined) return named;
    if (!/^\d+$/.test(token)) fail(`has "${token}", which is not a number${Object.keys(names).length ? ' or name' : ''}`);
    const n = Number(token);
    if (n < min || n > max) fail(`has ${n}, outside ${min}-${max}`);
    return n;
  };
  for (const part of text.split(',')) {
    const [range, stepText, extra] = part.split('/');
    if (extra !== undefined || range === '') fail('is malformed');
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1) fail(`has step "${stepText}", which must be a positive integer`);
    let from: number;
    let to: number;
    if (range === '*' || range === '?') {
      [from, to] = [min, max];
    } else if (range.includes('-')) {
      const bounds = range.split('-');
      if (bounds.length !== 2) fail('is malformed');
      const [a, b] = bounds;
      [from, to] = [value(a), value(b)];
      if (from > to) fail(`has range ${a}-${b} going backwards`);
    } else {
      from = value(range);
      to = stepText === undefined ? from : max;
    }
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return values;
}

interface LocalFields {
  month: number;
  day: number;
  weekday: number;
  hour: number;
  minute: number;
  second: number;
}

/** Wall-clock fields of an instant in one time zone (Intl, cached per zone). */
class LocalClock {
  private static readonly cache = new Map<string, LocalClock>();
  private readonly format: Intl.DateTimeFormat;

  private constructor(timezone: string) {
    this.format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      month: 'numeric',
      day: 'numeric',
      weekday: 'short',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  }

  static for(timezone: string): LocalClock {
    let clock = LocalClock.cache.get(timezone);
    if (!clock) {
      clock = new LocalClock(timezone);
      LocalClock.cache.set(timezone, clock);
    }
    return clock;
  }

  fieldsAt(ms: number): LocalFields {
    const parts: Record<string, string> = {};
    for (const part of this.format.formatToParts(ms)) parts[part.type] = part.value;
    return {
      month: Number(parts.month),
      day: Number(parts.day),
      weekday: WEEKDAY_NAMES[parts.weekday.toLowerCase()],
      hour: Number(parts.hour),
      minute: Number(parts.minute),
      second: Number(parts.second),
    };
  }
}
