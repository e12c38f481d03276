/**
 * Lets the worker loop sleep until there may be work: a notification, a freed slot, or the poll
 * interval. A wake that arrives while nobody waits is kept, so no wake-up is lost.
 */
export class WakeSignal {
  private pending = false;
  private resolve: (() => void) | null = null;

  notify(): void {
    if (this.resolve) {
      const resolve = this.resolve;
      this.resolve = null;
      resolve();
    } else {
      this.pending = true;
    }
  }

  /** Resolves true when notified (or a wake was kept), false when `timeoutMs` ran out first. */
  wait(timeoutMs: number): Promise<boolean> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.resolve = null;
        resolve(false);
      }, timeoutMs);
      this.resolve = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }
}
