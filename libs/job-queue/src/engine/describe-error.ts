/**
 * A one-line reason for any thrown value, including non-Errors (a string, undefined). Never
 * throws, whatever the value does when read (a throwing getter, a revoked Proxy): the reason is
 * what the attempt's outcome is written with. NUL characters, which a PostgreSQL text column
 * refuses, become U+FFFD.
 */
export function describeError(error: unknown): string {
  let text: string;
  try {
    text = describe(error);
  } catch {
    text = 'thrown value that cannot be printed';
  }
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const name = typeof error.name === 'string' ? error.name : '';
    const message = (typeof error.message === 'string' ? error.message : '') || name || 'Error';
    return name && name !== 'Error' && !message.startsWith(name) ? `${name}: ${message}` : message;
  }
  if (typeof error === 'string') return error || 'thrown empty string';
  try {
    return `non-Error thrown: ${typeof error === 'object' && error !== null ? JSON.stringify(error) : String(error)}`;
  } catch {
    return `non-Error thrown: ${String(error)}`;
  }
}
