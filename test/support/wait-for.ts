/** Polls `check` until it returns a truthy value or the deadline passes; never a bare sleep. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 15_000, intervalMs = 25, message = 'condition' }: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (error) {
      last = error;
    }
    if (performance.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${message} (last: ${last instanceof Error ? last.message : String(last)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
