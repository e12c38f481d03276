import { z } from 'zod';

/** The job type the sign-up endpoint enqueues and the welcome mailer handles. */
export const WELCOME_EMAIL = 'email.welcome';

/**
 * The payload of an `email.welcome` job. The controller checks requests with it, and the worker
 * parses every payload with it again before the handler runs (a payload it rejects is
 * dead-lettered at once instead of being retried).
 */
export const welcomeEmailSchema = z.object({
  email: z.email().max(254).toLowerCase(),
});

export type WelcomeEmail = z.infer<typeof welcomeEmailSchema>;
