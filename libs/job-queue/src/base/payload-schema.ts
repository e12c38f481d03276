/** Anything with `parse(input): T` validates a payload; a zod schema fits. */
export interface PayloadSchema<T = unknown> {
  parse(input: unknown): T;
}
