/** Base class of every error this library throws; `code` is stable for programmatic checks. */
export abstract class JobQueueError extends Error {
  abstract readonly code: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
