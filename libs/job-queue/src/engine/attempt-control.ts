export type Interruption = 'lease-lost' | 'cancelled' | 'drain';

/**
 * The levers over one running attempt: its AbortSignal, and an interruption that ends the
 * attempt for the worker at once even if the handler ignores the signal.
 */
export class AttemptControl {
  private readonly controller = new AbortController();
  private settle!: (reason: Interruption) => void;
  readonly interrupted: Promise<Interruption> = new Promise((resolve) => (this.settle = resolve));
  private reason: Interruption | null = null;

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get interruption(): Interruption | null {
    return this.reason;
  }

  abort(reason: unknown): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
  }

  interrupt(reason: Interruption, abortReason: unknown): void {
    if (this.reason) return;
    this.reason = reason;
    this.abort(abortReason);
    this.settle(reason);
  }
}
