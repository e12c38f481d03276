import { describe, expect, it } from 'vitest';
import { CronSchedule } from './cron-schedule.js';

/** The next `count` slots after `after`, as ISO strings (null once the schedule has none). */
function slots(expression: string, after: string, count: number, timezone = 'UTC'): Array<string | null> {
  const schedule = CronSchedule.parse(expression, timezone);
  const out: Array<string | null> = [];
  let cursor: Date | null = new Date(after);
  for (let i = 0; i < count && cursor; i++) {
    cursor = schedule.next(cursor);
    out.push(cursor ? cursor.toISOString() : null);
  }
  return out;
}

function parseError(expression: unknown, timezone?: string): string {
  try {
    CronSchedule.parse(expression as string, timezone);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`CronSchedule.parse(${JSON.stringify(expression)}, ${JSON.stringify(timezone)}) did not throw`);
}

describe('CronSchedule.parse: field forms', () => {
  it('reads *, numbers, ranges, steps, start/step, lists and ? as a wildcard', () => {
    expect(slots('* * * * *', '2025-06-02T10:07:30Z', 2)).toEqual(['2025-06-02T10:08:00.000Z', '2025-06-02T10:09:00.000Z']);
    expect(slots('7 * * * *', '2025-06-02T10:07:30Z', 2)).toEqual(['2025-06-02T11:07:00.000Z', '2025-06-02T12:07:00.000Z']);
    expect(slots('*/20 * * * *', '2025-06-02T10:00:00Z', 3)).toEqual([
      '2025-06-02T10:20:00.000Z',
      '2025-06-02T10:40:00.000Z',
      '2025-06-02T11:00:00.000Z',
    ]);
    expect(slots('10-12 * * * *', '2025-06-02T10:00:00Z', 4)).toEqual([
      '2025-06-02T10:10:00.000Z',
      '2025-06-02T10:11:00.000Z',
      '2025-06-02T10:12:00.000Z',
      '2025-06-02T11:10:00.000Z',
    ]);
    expect(slots('10-30/10 * * * *', '2025-06-02T10:00:00Z', 4)).toEqual([
      '2025-06-02T10:10:00.000Z',
      '2025-06-02T10:20:00.000Z',
      '2025-06-02T10:30:00.000Z',
      '2025-06-02T11:10:00.000Z',
    ]);
    // `a/n` runs from a to the end of the field's range.
    expect(slots('5/20 * * * *', '2025-06-02T10:00:00Z', 4)).toEqual([
      '2025-06-02T10:05:00.000Z',
      '2025-06-02T10:25:00.000Z',
      '2025-06-02T10:45:00.000Z',
      '2025-06-02T11:05:00.000Z',
    ]);
    expect(slots('1,2,58 * * * *', '2025-06-02T10:00:00Z', 4)).toEqual([
      '2025-06-02T10:01:00.000Z',
      '2025-06-02T10:02:00.000Z',
      '2025-06-02T10:58:00.000Z',
      '2025-06-02T11:01:00.000Z',
    ]);
    expect(slots('0,30 9-17/4 * * *', '2025-06-02T00:00:00Z', 7)).toEqual([
      '2025-06-02T09:00:00.000Z',
      '2025-06-02T09:30:00.000Z',
      '2025-06-02T13:00:00.000Z',
      '2025-06-02T13:30:00.000Z',
      '2025-06-02T17:00:00.000Z',
      '2025-06-02T17:30:00.000Z',
      '2025-06-03T09:00:00.000Z',
    ]);
    expect(slots('0 0 ? * ?', '2025-06-02T10:00:00Z', 1)).toEqual(slots('0 0 * * *', '2025-06-02T10:00:00Z', 1));
    // Extra whitespace between fields is fine.
    expect(slots('  0   12  *  * *  ', '2025-06-02T10:00:00Z', 1)).toEqual(['2025-06-02T12:00:00.000Z']);
  });

  it('reads month and weekday names in any case, alone, in lists and in ranges', () => {
    expect(slots('0 0 1 jan,JUL *', '2025-02-07T00:00:00Z', 2)).toEqual(['2025-07-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z']);
    expect(slots('0 0 1 Feb-apr *', '2025-01-15T00:00:00Z', 4)).toEqual([
      '2025-02-01T00:00:00.000Z',
      '2025-03-01T00:00:00.000Z',
      '2025-04-01T00:00:00.000Z',
      '2026-02-01T00:00:00.000Z',
    ]);
    // 2025-06-07 is a Saturday.
    expect(slots('0 0 * * mon-fri', '2025-06-07T00:00:00Z', 2)).toEqual(['2025-06-09T00:00:00.000Z', '2025-06-10T00:00:00.000Z']);
    expect(slots('0 0 * * MON,wed', '2025-06-02T12:00:00Z', 2)).toEqual(['2025-06-04T00:00:00.000Z', '2025-06-09T00:00:00.000Z']);
    expect(slots('0 0 * * sun-sat', '2025-06-02T12:00:00Z', 1)).toEqual(['2025-06-03T00:00:00.000Z']);
  });

  it('takes 7 as Sunday, like 0 and sun, also at the end of a range', () => {
    // 2025-06-02 is a Monday; the next Sunday is 2025-06-08.
    const sunday = ['2025-06-08T09:00:00.000Z', '2025-06-15T09:00:00.000Z'];
    expect(slots('0 9 * * 7', '2025-06-02T00:00:00Z', 2)).toEqual(sunday);
    expect(slots('0 9 * * 0', '2025-06-02T00:00:00Z', 2)).toEqual(sunday);
    expect(slots('0 9 * * sun', '2025-06-02T00:00:00Z', 2)).toEqual(sunday);
    expect(slots('0 0 * * 5-7', '2025-06-02T00:00:00Z', 4)).toEqual([
      '2025-06-06T00:00:00.000Z',
      '2025-06-07T00:00:00.000Z',
      '2025-06-08T00:00:00.000Z',
      '2025-06-13T00:00:00.000Z',
    ]);
    expect(slots('0 0 * * 0-7', '2025-06-02T00:00:00Z', 7)).toHaveLength(7);
    expect(slots('0 0 * * 0-7', '2025-06-02T00:00:00Z', 7).at(-1)).toBe('2025-06-09T00:00:00.000Z');
  });

  it('runs a day that matches day-of-month OR weekday when both are restricted, and both when one is *', () => {
    // The 13th, or any Friday.
    expect(slots('0 0 13 * 5', '2025-06-01T00:00:00Z', 8)).toEqual([
      '2025-06-06T00:00:00.000Z',
      '2025-06-13T00:00:00.000Z', // Friday the 13th: once, not twice
      '2025-06-20T00:00:00.000Z',
      '2025-06-27T00:00:00.000Z',
      '2025-07-04T00:00:00.000Z',
      '2025-07-11T00:00:00.000Z',
      '2025-07-13T00:00:00.000Z', // a Sunday, the 13th
      '2025-07-18T00:00:00.000Z',
    ]);
    expect(slots('0 0 13 * *', '2025-06-01T00:00:00Z', 2)).toEqual(['2025-06-13T00:00:00.000Z', '2025-07-13T00:00:00.000Z']);
    expect(slots('0 0 * * 5', '2025-06-01T00:00:00Z', 2)).toEqual(['2025-06-06T00:00:00.000Z', '2025-06-13T00:00:00.000Z']);
    // The month still restricts both: February, and the 29th or a Monday.
    expect(slots('0 0 29 2 1', '2025-01-01T00:00:00Z', 2)).toEqual(['2025-02-03T00:00:00.000Z', '2025-02-10T00:00:00.000Z']);
  });

  it('reads 6 fields with seconds first, and 5 fields as second 0', () => {
    expect(slots('*/15 * * * * *', '2025-06-02T00:00:07Z', 5)).toEqual([
      '2025-06-02T00:00:15.000Z',
      '2025-06-02T00:00:30.000Z',
      '2025-06-02T00:00:45.000Z',
      '2025-06-02T00:01:00.000Z',
      '2025-06-02T00:01:15.000Z',
    ]);
    expect(slots('30 0 12 * * *', '2025-06-02T00:00:00Z', 2)).toEqual(['2025-06-02T12:00:30.000Z', '2025-06-03T12:00:30.000Z']);
    expect(slots('* * * * * *', '2025-06-02T23:59:58.500Z', 3)).toEqual([
      '2025-06-02T23:59:59.000Z',
      '2025-06-03T00:00:00.000Z',
      '2025-06-03T00:00:01.000Z',
    ]);
    expect(CronSchedule.parse('* * * * * *').hasSeconds).toBe(true);
    expect(CronSchedule.parse('15 * * * * *').hasSeconds).toBe(true);
    expect(CronSchedule.parse('* * * * *').hasSeconds).toBe(false);
    expect(CronSchedule.parse('0 * * * * *').hasSeconds).toBe(false);
    expect(CronSchedule.parse('*/5 * * * *').expression).toBe('*/5 * * * *');
    expect(CronSchedule.parse('*/5 * * * *').timezone).toBe('UTC');
    expect(CronSchedule.parse('*/5 * * * *', 'Europe/Paris').timezone).toBe('Europe/Paris');
  });
});

describe('CronSchedule.parse: invalid input', () => {
  it.each([
    ['', /cron "" must have 5 fields .*or 6 with seconds first/],
    ['   ', /must have 5 fields/],
    ['* * * *', /cron "\* \* \* \*" must have 5 fields/],
    ['* * * * * * *', /must have 5 fields/],
    ['60 * * * *', /minute field "60" has 60, outside 0-59/],
    ['* 24 * * *', /hour field "24" has 24, outside 0-23/],
    ['0 0 0 * *', /day of month field "0" has 0, outside 1-31/],
    ['0 0 32 * *', /day of month field "32" has 32, outside 1-31/],
    ['0 0 * 0 *', /month field "0" has 0, outside 1-12/],
    ['0 0 * 13 *', /month field "13" has 13, outside 1-12/],
    ['0 0 * * 8', /weekday field "8" has 8, outside 0-7/],
    ['60 * * * * *', /second field "60" has 60, outside 0-59/],
    ['a * * * *', /minute field "a" has "a", which is not a number/],
    ['1.5 * * * *', /minute field "1.5"/],
    ['-1 * * * *', /minute field "-1"/],
    ['1- * * * *', /minute field "1-"/],
    ['5-1 * * * *', /minute field "5-1" has range 5-1 going backwards/],
    ['0 0 * * 7-1', /weekday field "7-1" has range 7-1 going backwards/],
    ['*/0 * * * *', /minute field "\*\/0" has step "0", which must be a positive integer/],
    ['*/x * * * *', /minute field "\*\/x" has step "x"/],
    ['*/2.5 * * * *', /has step "2.5"/],
    ['1/2/3 * * * *', /minute field "1\/2\/3" is malformed/],
    ['1,,2 * * * *', /minute field "1,,2" is malformed/],
    [',1 * * * *', /is malformed/],
    ['0 0 * mon *', /month field "mon" has "mon", which is not a number or name/],
    ['0 0 * * jan', /weekday field "jan" has "jan", which is not a number or name/],
    ['0 0 * * funday', /weekday field "funday"/],
    // A range has two ends: a third is not silently dropped.
    ['1-2-3 * * * *', /minute field "1-2-3"/],
    ['0 0 * * 1-2-5', /weekday field "1-2-5"/],
  ])('rejects %j with an error naming the field', (expression, message) => {
    expect(parseError(expression)).toMatch(message);
  });

  it('rejects a non-string expression', () => {
    expect(parseError(42)).toMatch(/cron must be a string/);
    expect(parseError(undefined)).toMatch(/cron must be a string/);
  });

  it.each(['Mars/Olympus', 'Europe/Pariss', '', 'not a zone'])('rejects the time zone %j with a clear error', (timezone) => {
    expect(parseError('* * * * *', timezone)).toMatch(
      new RegExp(`timezone "${timezone}" is not a valid IANA time zone \\(for example "Europe/Paris" or "UTC"\\)`),
    );
  });
});

describe('CronSchedule.next', () => {
  it('returns the first slot strictly after the given instant, in whole seconds', () => {
    expect(slots('*/15 * * * *', '2025-06-02T10:07:30Z', 1)).toEqual(['2025-06-02T10:15:00.000Z']);
    expect(slots('*/15 * * * *', '2025-06-02T10:15:00Z', 1)).toEqual(['2025-06-02T10:30:00.000Z']);
    expect(slots('*/15 * * * *', '2025-06-02T10:14:59.999Z', 1)).toEqual(['2025-06-02T10:15:00.000Z']);
    expect(slots('*/15 * * * *', '2025-06-02T10:15:00.001Z', 1)).toEqual(['2025-06-02T10:30:00.000Z']);
    // Across a month, a year and a leap day.
    expect(slots('0 0 1 * *', '2025-12-15T00:00:00Z', 2)).toEqual(['2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z']);
    expect(slots('0 12 28-29 2 *', '2028-02-27T00:00:00Z', 3)).toEqual([
      '2028-02-28T12:00:00.000Z',
      '2028-02-29T12:00:00.000Z',
      '2029-02-28T12:00:00.000Z',
    ]);
  });

  it('reads the fields in the schedule time zone (Europe/Paris, winter and summer)', () => {
    expect(slots('0 9 * * *', '2025-01-15T00:00:00Z', 1, 'Europe/Paris')).toEqual(['2025-01-15T08:00:00.000Z']);
    expect(slots('0 9 * * *', '2025-07-15T00:00:00Z', 1, 'Europe/Paris')).toEqual(['2025-07-15T07:00:00.000Z']);
    // Monday midnight in India is Sunday 18:30 UTC.
    expect(slots('0 0 * * MON', '2025-06-02T00:00:00Z', 1, 'Asia/Kolkata')).toEqual(['2025-06-08T18:30:00.000Z']);
    // New Year in Paris is still December 31 in UTC.
    expect(slots('0 0 1 1 *', '2025-06-01T00:00:00Z', 1, 'Europe/Paris')).toEqual(['2025-12-31T23:00:00.000Z']);
  });

  it('skips a local time that does not exist on the spring-forward day (Europe/Paris, 2025-03-30 02:00 → 03:00)', () => {
    expect(slots('30 2 * * *', '2025-03-29T12:00:00Z', 2, 'Europe/Paris')).toEqual([
      '2025-03-31T00:30:00.000Z', // 2025-03-30 02:30 never happened
      '2025-04-01T00:30:00.000Z',
    ]);
    // Hourly: 01:00 CET, then 03:00 CEST (one real hour later), 04:00 CEST.
    expect(slots('0 * * * *', '2025-03-29T23:30:00Z', 3, 'Europe/Paris')).toEqual([
      '2025-03-30T00:00:00.000Z',
      '2025-03-30T01:00:00.000Z',
      '2025-03-30T02:00:00.000Z',
    ]);
    expect(slots('0 3 * * *', '2025-03-29T12:00:00Z', 1, 'Europe/Paris')).toEqual(['2025-03-30T01:00:00.000Z']);
  });

  it('skips a local time that does not exist on the spring-forward day (America/New_York, 2025-03-09 02:00 → 03:00)', () => {
    expect(slots('30 2 * * *', '2025-03-08T12:00:00Z', 2, 'America/New_York')).toEqual([
      '2025-03-10T06:30:00.000Z',
      '2025-03-11T06:30:00.000Z',
    ]);
    expect(slots('0 2 * * *', '2025-03-08T12:00:00Z', 1, 'America/New_York')).toEqual(['2025-03-10T06:00:00.000Z']);
    expect(slots('59 1 * * *', '2025-03-08T12:00:00Z', 2, 'America/New_York')).toEqual([
      '2025-03-09T06:59:00.000Z', // 01:59 EST
      '2025-03-10T05:59:00.000Z', // 01:59 EDT
    ]);
    expect(slots('0 3 * * *', '2025-03-08T12:00:00Z', 1, 'America/New_York')).toEqual(['2025-03-09T07:00:00.000Z']);
    // Every minute (6 fields): 01:59 EST is followed by 03:00 EDT, one real minute later.
    expect(slots('0 * * * * *', '2025-03-09T06:58:30Z', 3, 'America/New_York')).toEqual([
      '2025-03-09T06:59:00.000Z',
      '2025-03-09T07:00:00.000Z',
      '2025-03-09T07:01:00.000Z',
    ]);
  });

  it('skips a missing local midnight (America/Santiago, 2025-09-07 00:00 → 01:00) and half-hour shifts (Australia/Lord_Howe)', () => {
    expect(slots('0 0 * * *', '2025-09-06T05:00:00Z', 2, 'America/Santiago')).toEqual([
      '2025-09-08T03:00:00.000Z',
      '2025-09-09T03:00:00.000Z',
    ]);
    // 2025-10-05 02:00 → 02:30 on Lord Howe Island: 02:00 is skipped, 02:30 exists.
    expect(slots('*/30 2 * * *', '2025-10-04T12:00:00Z', 3, 'Australia/Lord_Howe')).toEqual([
      '2025-10-04T15:30:00.000Z',
      '2025-10-05T15:00:00.000Z',
      '2025-10-05T15:30:00.000Z',
    ]);
  });

  it('agrees with a minute-by-minute scan across spring-forward changes in several zones', () => {
    const cases: Array<{ expression: string; minutes: number[]; hours: number[] }> = [
      { expression: '30 2 * * *', minutes: [30], hours: [2] },
      { expression: '0 * * * *', minutes: [0], hours: range(0, 23) },
      { expression: '*/20 1-3 * * *', minutes: [0, 20, 40], hours: [1, 2, 3] },
      { expression: '45 23,0 * * *', minutes: [45], hours: [23, 0] },
    ];
    const windows: Array<[string, string]> = [
      ['Europe/Paris', '2025-03-29T00:00:00Z'],
      ['America/New_York', '2025-03-08T00:00:00Z'],
      ['America/Santiago', '2025-09-05T00:00:00Z'],
      ['Australia/Lord_Howe', '2025-10-03T00:00:00Z'],
    ];
    for (const [timezone, from] of windows) {
      const local = localFields(timezone);
      const start = Date.parse(from);
      const end = start + 3 * 86_400_000;
      for (const { expression, minutes, hours } of cases) {
        const expected: number[] = [];
        for (let t = start + 60_000; t < end; t += 60_000) {
          const f = local(t);
          if (minutes.includes(f.minute) && hours.includes(f.hour)) expected.push(t);
        }
        const schedule = CronSchedule.parse(expression, timezone);
        const actual: number[] = [];
        for (let t = schedule.next(new Date(start)); t && t.getTime() < end; t = schedule.next(t)) actual.push(t.getTime());
        expect(actual.map(iso), `${expression} in ${timezone} from ${from}`).toEqual(expected.map(iso));
      }
    }
  });

  it('terminates on rare and impossible dates', () => {
    expect(slots('0 0 29 2 *', '2025-01-01T00:00:00Z', 3)).toEqual([
      '2028-02-29T00:00:00.000Z',
      '2032-02-29T00:00:00.000Z',
      '2036-02-29T00:00:00.000Z',
    ]);
    expect(slots('0 0 29 2 *', '2025-01-01T00:00:00Z', 1, 'Europe/Paris')).toEqual(['2028-02-28T23:00:00.000Z']);
    expect(slots('59 59 23 29 2 *', '2025-01-01T00:00:00Z', 1, 'America/New_York')).toEqual(['2028-03-01T04:59:59.000Z']);
    expect(slots('0 0 1 1 *', '2025-06-01T00:00:00Z', 2)).toEqual(['2026-01-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    expect(slots('59 23 31 12 *', '2025-12-31T23:59:00Z', 1)).toEqual(['2026-12-31T23:59:00.000Z']);
    // Never: null, not a hang.
    expect(slots('0 0 30 2 *', '2025-01-01T00:00:00Z', 1)).toEqual([null]);
    expect(slots('0 0 31 4 *', '2025-01-01T00:00:00Z', 1)).toEqual([null]);
    expect(slots('* * * 31 11 *', '2025-01-01T00:00:00Z', 1, 'Europe/Paris')).toEqual([null]);
  });
});

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Wall-clock hour and minute of an instant in a zone, independently of the code under test. */
function localFields(timezone: string): (ms: number) => { hour: number; minute: number } {
  const format = new Intl.DateTimeFormat('en-GB', { timeZone: timezone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
  return (ms) => {
    const [hour, minute] = format.format(ms).split(':').map(Number);
    return { hour, minute };
  };
}
