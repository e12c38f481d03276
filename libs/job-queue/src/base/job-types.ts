/**
 * The application's job types and their payloads, declared by declaration merging:
 *
 * ```ts
 * declare module 'auto-job-queue' {
 *   interface JobTypes {
 *     'email.welcome': { email: string };
 *   }
 * }
 * ```
 *
 * `enqueue('email.welcome', payload)` then checks `payload` at compile time. Types not declared
 * here still take any JSON payload. Empty until the application declares some.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-interface, @typescript-eslint/no-empty-object-type
export interface JobTypes {}

/** The payload `enqueue` takes for `type`: the declared one, or anything for an undeclared type. */
export type JobPayload<T extends string> = T extends keyof JobTypes ? JobTypes[T] : unknown;

/**
 * The payload parameter of `enqueue<P>`: an explicit `P` (the form before JobTypes existed) is
 * taken as it is; otherwise the declared payload of `T`.
 */
export type EnqueuedPayload<P, T extends string> = [NoInfer<P>] extends [never] ? JobPayload<T> : NoInfer<P>;
