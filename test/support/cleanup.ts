/**
 * What a test file started, stopped in reverse order by `run()` (in afterAll or afterEach): every
 * stop runs even when one before it throws, and the first error is rethrown at the end.
 */
export class Cleanup {
  private readonly stops: Array<{ name: string; stop: () => unknown }> = [];

  /** Registers `stop` for `value` and returns the value, so a start and its stop sit on one line. */
  add<T>(name: string, value: T, stop: (value: T) => unknown): T {
    this.stops.push({ name, stop: () => stop(value) });
    return value;
  }

  async run(): Promise<void> {
    const errors: unknown[] = [];
    while (this.stops.length > 0) {
      const { name, stop } = this.stops.pop()!;
      try {
        await stop();
      } catch (error) {
        errors.push(new Error(`stopping ${name} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error }));
      }
    }
    if (errors.length > 0) throw errors[0];
  }
}
