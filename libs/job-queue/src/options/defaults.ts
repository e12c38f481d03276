/** Documented defaults, in one place. */
export const DEFAULT_SCHEMA = 'job_queue';
export const DEFAULT_CONCURRENCY = 10;
/** The prefetch ceiling; the buffer itself adapts to about 100 ms of work. See docs/decisions/0005-adaptive-prefetch.md. */
export const DEFAULT_PREFETCH = 1_000;
export const DEFAULT_POLL_INTERVAL_MS = 1_000;
export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_DRAIN_TIMEOUT_MS = 25_000;
export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_BASE_DELAY_MS = 1_000;
export const DEFAULT_MAX_DELAY_MS = 3_600_000;
export const DEFAULT_DEAD_LETTER_ALERT_THRESHOLD = 1;
export const DEFAULT_MAINTENANCE_INTERVAL_MS = 1_000;
export const DEFAULT_DEPTH_REFRESH_MS = 1_000;
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000;
/** Claims wait for their WAL flush unless the application opts out (see the option). */
export const DEFAULT_SYNCHRONOUS_CLAIMS = true;
export const DEFAULT_RETENTION_COMPLETED_MS = 7 * 24 * 3_600_000;
export const DEFAULT_RETENTION_DEAD_MS = 30 * 24 * 3_600_000;
