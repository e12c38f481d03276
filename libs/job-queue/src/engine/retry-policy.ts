export interface BackoffSettings {
  baseDelayMs: number;
  maxDelayMs: number;
}

/**
 * Exponential backoff with "equal jitter": the capped delay for attempt n is base·2^(n-1); the
 * wait is half of it plus a random share of the other half. Delays still grow with each attempt,
 * and a thousand jobs failing together spread over the window instead of retrying together.
 */
export class RetryPolicy {
  constructor(private readonly random: () => number = Math.random) {}

  delayFor(attempt: number, settings: BackoffSettings): number {
    const exponent = Math.min(Math.max(attempt - 1, 0), 52);
    const capped = Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** exponent);
    const half = capped / 2;
    return Math.round(half + this.random() * half);
  }
}
