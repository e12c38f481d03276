export type Interruption = 'lease-lost' | 'cancelled' | 'drain';

/**
 * The levers over one running attempt: its AbortSignal, and an interruption that ends the
 * attempt for the worker at once even if the handler ignores the signal. The AbortController is
 * made only when someone reads the signal: most handlers never do, and it is the costliest
 * object of an attempt.
 */
export class AttemptControl {
  private controller: AbortController | null = null;
  private aborted = false;
  private abortReason: unknown;
  private reason: Interruption | null = null;
  private listener: ((reason: Interruption) => void) | null = null;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  get interruption(): Interruption | null {
    return this.reason;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }

  interrupt(reason: Interruption, abortReason: unknown): void {
    if (this.reason) return;
    this.reason = reason;
    this.abort(abortReason);
    this.listener?.(reason);
  }

  /** Calls `listener` once the attempt is interrupted (at once if it already is). One listener. */
  onInterrupt(listener: (reason: Interruption) => void): void {
    this.listener = listener;
    if (this.reason) listener(this.reason);
  }
}
