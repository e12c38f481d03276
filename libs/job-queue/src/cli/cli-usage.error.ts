/** Bad usage of the command line: the CLI prints the message and the usage text, and exits 2. */
export class CliUsageError extends Error {
  override readonly name = 'CliUsageError';
}
