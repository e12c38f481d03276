/** What the producer and the engine ask of tracing (OpenTelemetry, when the app has it). */
export interface JobTracing {
  /**
   * Runs `insert` in a `send <type>` span per type (kind PRODUCER), handing it each job's
   * propagation context to store (null where there is none); `ids` names the jobs once inserted.
   */
  traceEnqueue<R>(types: readonly string[], insert: (contexts: Array<string | null>) => Promise<R>, ids: (result: R) => string[]): Promise<R>;
  /**
   * Runs an attempt in a `process <type>` span (kind CONSUMER) that continues the job's stored
   * context; `failure` reads the attempt's error from its outcome, to record on the span.
   */
  traceAttempt<O>(
    job: { id: string; type: string; attempt: number; traceContext?: string | null },
    run: () => O | PromiseLike<O>,
    failure: (outcome: O) => string | null,
  ): O | PromiseLike<O>;
}
