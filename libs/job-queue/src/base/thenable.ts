/**
 * Whether a value is a promise (or any thenable): the engine awaits only what is one, so a step
 * that finished synchronously goes on without a promise turn.
 */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  return typeof (value as PromiseLike<T>).then === 'function';
}
