import type { EngineLogger } from './logger.js';

/**
 * Runs `runOnce` every `intervalMs`, never overlapping itself; a failing pass is logged and the
 * next one runs on schedule. Tests call `runOnce` on the component directly instead.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly runOnce: () => Promise<unknown>,
    private readonly logger: EngineLogger,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.runOnce()
        .then(() => undefined)
        .catch((error) => this.logger.warn(`${this.name} failed: ${(error as Error)?.message ?? error}`))
        .finally(() => {
          this.running = null;
          this.schedule();
        });
    }, this.intervalMs);
    this.timer.unref?.();
  }
}
