const WIDTH = 30;

/**
 * Bulk work's progress (retry-dead, purge) on one terminal line: a bar when the total is known,
 * a count otherwise. A no-op when stderr is not a terminal, so scripts and CI logs get only the result.
 */
export class ProgressBar {
  private shown = false;

  constructor(
    private readonly label: string,
    private readonly total: number | null,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {}

  update(done: number): void {
    if (!this.stream.isTTY) return;
    this.shown = true;
    const count = done.toLocaleString('en-US');
    if (this.total && this.total > 0) {
      const filled = Math.min(WIDTH, Math.round((done / this.total) * WIDTH));
      this.stream.write(`\r${this.label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${count} / ${this.total.toLocaleString('en-US')}`);
    } else {
      this.stream.write(`\r${this.label}: ${count}`);
    }
  }

  end(): void {
    if (this.shown) this.stream.write('\n');
  }
}
