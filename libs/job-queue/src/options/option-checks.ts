import { JobQueueConfigError } from '../errors/job-queue-config.error.js';

/** Boot-time checks shared by module and handler options; each names the option it rejects. */
export function positiveInteger(name: string, value: unknown, min = 1): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new JobQueueConfigError(`${name} must be an integer of at least ${min} (got ${describe(value)}).`);
  }
  return value;
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}
