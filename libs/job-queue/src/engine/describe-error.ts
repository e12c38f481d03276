/** A one-line reason for any thrown value, including non-Errors (a string, undefined). */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const message = error.message || error.name || 'Error';
    return error.name && error.name !== 'Error' && !message.startsWith(error.name) ? `${error.name}: ${message}` : message;
  }
  if (typeof error === 'string') return error || 'thrown empty string';
  try {
    return `non-Error thrown: ${typeof error === 'object' && error !== null ? JSON.stringify(error) : String(error)}`;
  } catch {
    return `non-Error thrown: ${String(error)}`;
  }
}
