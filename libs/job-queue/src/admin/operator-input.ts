import { InvalidJobError } from '../errors/invalid-job.error.js';
import { JOB_STATUSES, type JobStatus } from '../base/job-status.js';

/** A cursor is the id of a page's last job: anything else was not made by listJobs. */
const CURSOR = /^[1-9][0-9]{0,18}$/;

/** Checks of the operator API's input: a refusal names the field and changes nothing. */
export function optionalType(value: unknown, spared: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length === 0) throw new InvalidJobError('type', 'must be a non-empty string when given', spared);
  return value;
}

export function requiredType(value: unknown, spared: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new InvalidJobError('type', `must be a non-empty string (got ${JSON.stringify(value) ?? String(value)})`, spared);
  return value;
}

export function optionalStatus(value: unknown, spared: string): JobStatus | null {
  if (value === undefined || value === null) return null;
  if (!(JOB_STATUSES as readonly unknown[]).includes(value)) {
    throw new InvalidJobError('status', `must be one of ${JOB_STATUSES.join(', ')} (got ${JSON.stringify(value) ?? String(value)})`, spared);
  }
  return value as JobStatus;
}

export function integerIn(field: string, value: unknown, fallback: number, min: number, max: number, spared: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidJobError(field, `must be an integer from ${min} to ${max} (got ${JSON.stringify(value) ?? String(value)})`, spared);
  }
  return value;
}

export function optionalCursor(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !CURSOR.test(value)) {
    throw new InvalidJobError('cursor', 'must be a nextCursor that listJobs returned', 'Nothing was read.');
  }
  return value;
}
