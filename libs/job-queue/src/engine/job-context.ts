/** What a handler learns about the job it runs. */
export interface JobContext {
  readonly id: string;
  readonly type: string;
  /** 1 on the first run. */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  /** Aborted on timeout, on lease loss, on cancel, and when a shutdown drain times out. */
  readonly signal: AbortSignal;
}
