import { InvalidJobError } from '../errors/invalid-job.error.js';
import type { ScheduleJobOptions } from '../persistence/job.store.js';
import { CronSchedule } from '../schedules/cron-schedule.js';

/** What `upsertSchedule` takes besides the name. */
export interface ScheduleDefinition {
  /** 5 fields (minute hour day month weekday), or 6 with seconds first. */
  cron: string;
  /** An IANA time zone. @default 'UTC' */
  timezone?: string;
  type: string;
  /** Each job's payload, with `scheduledFor` (the slot, ISO 8601) added. @default {} */
  payload?: Record<string, unknown>;
  options?: ScheduleJobOptions;
}

const SPARED = 'Nothing was saved.';
/** Names and types: printable, no surrounding spaces, at most 200 characters. */
const NAME = /^\S(.{0,198}\S)?$/;
/** The columns are int4. */
const INT4_MAX = 2_147_483_647;
const OPTION_KEYS: ReadonlyArray<keyof ScheduleJobOptions> = ['priority', 'maxAttempts', 'orderingKey', 'group'];
/** As for enqueue: keys and groups are indexed text. */
const MAX_KEY_LENGTH = 512;

/** A schedule definition checked field by field; a refusal names the field and saves nothing. */
export function checkedSchedule(name: unknown, definition: ScheduleDefinition | undefined) {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new InvalidJobError('name', 'must be a non-empty string of at most 200 characters without surrounding spaces', SPARED);
  }
  if (!definition || typeof definition !== 'object') throw new InvalidJobError('definition', 'must be an object { cron, type, timezone?, payload?, options? }', SPARED);
  const timezone = definition.timezone ?? 'UTC';
  if (typeof timezone !== 'string') throw new InvalidJobError('timezone', 'must be an IANA time zone such as "Europe/Paris"', SPARED);
  try {
    CronSchedule.parse(definition.cron, timezone);
  } catch (error) {
    const message = (error as Error).message;
    throw new InvalidJobError(message.startsWith('timezone') ? 'timezone' : 'cron', message.replace(/\.$/, ''), SPARED);
  }
  if (typeof definition.type !== 'string' || !NAME.test(definition.type)) {
    throw new InvalidJobError('type', 'must be a non-empty string of at most 200 characters without surrounding spaces', SPARED);
  }
  const payload = definition.payload ?? {};
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    throw new InvalidJobError('payload', 'must be a JSON object (scheduledFor is added to it)', SPARED);
  }
  try {
    JSON.stringify(payload);
  } catch (error) {
    throw new InvalidJobError('payload', `could not be serialised to JSON: ${(error as Error).message}`, SPARED);
  }
  return { name, cron: definition.cron.trim(), timezone, type: definition.type, payload, options: checkedOptions(definition.options) };
}

function checkedOptions(options: unknown): ScheduleJobOptions {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new InvalidJobError('options', 'must be an object', SPARED);
  const given = options as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!(OPTION_KEYS as readonly string[]).includes(key)) {
      throw new InvalidJobError(`options.${key}`, `is not an option a schedule's jobs take (${OPTION_KEYS.join(', ')})`, SPARED);
    }
  }
  const checked: ScheduleJobOptions = {};
  if (given.priority !== undefined) {
    if (!Number.isInteger(given.priority) || Math.abs(given.priority as number) > INT4_MAX) {
      throw new InvalidJobError('options.priority', `must be an integer between -${INT4_MAX} and ${INT4_MAX}`, SPARED);
    }
    checked.priority = given.priority as number;
  }
  if (given.maxAttempts !== undefined) {
    if (!Number.isInteger(given.maxAttempts) || (given.maxAttempts as number) < 1 || (given.maxAttempts as number) > INT4_MAX) {
      throw new InvalidJobError('options.maxAttempts', `must be an integer from 1 to ${INT4_MAX}`, SPARED);
    }
    checked.maxAttempts = given.maxAttempts as number;
  }
  if (given.orderingKey !== undefined) {
    if (typeof given.orderingKey !== 'string' || given.orderingKey.length === 0) {
      throw new InvalidJobError('options.orderingKey', 'must be a non-empty string', SPARED);
    }
    checked.orderingKey = given.orderingKey;
  }
  if (given.group !== undefined) {
    if (typeof given.group !== 'string' || given.group.length === 0 || given.group.length > MAX_KEY_LENGTH || given.group.includes('\u0000')) {
      throw new InvalidJobError('options.group', `must be a non-empty string of at most ${MAX_KEY_LENGTH} characters, without NUL`, SPARED);
    }
    checked.group = given.group;
  }
  return checked;
}
