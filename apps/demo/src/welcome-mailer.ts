import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Logger } from '@nestjs/common';
import { JobHandler, type JobContext } from '../../../src/index.js';
import { WELCOME_EMAIL, type WelcomeEmail, welcomeEmailSchema } from './welcome-email.js';

/** Share of calls the simulated e-mail provider fails. */
const FAILURE_RATE = 0.3;

/**
 * Sends welcome e-mails through a simulated provider that is slow (50–300 ms) and fails about
 * 30% of calls. A failed attempt is retried by the queue with backoff, up to 4 attempts in all.
 */
@Injectable()
export class WelcomeMailer {
  private readonly logger = new Logger(WelcomeMailer.name);

  @JobHandler(WELCOME_EMAIL, { maxAttempts: 4, schema: welcomeEmailSchema })
  async sendWelcome(payload: WelcomeEmail, job: JobContext): Promise<{ messageId: string }> {
    // Passing job.signal ends the wait early on a shutdown that runs out of drain time.
    await sleep(50 + Math.random() * 250, undefined, { signal: job.signal });
    if (Math.random() < FAILURE_RATE) {
      throw new Error('mail provider answered 503 (simulated outage)');
    }
    const messageId = randomUUID();
    this.logger.log(
      `Sent welcome e-mail to ${payload.email} (job ${job.id}, attempt ${job.attempt}/${job.maxAttempts}, message ${messageId})`,
    );
    return { messageId };
  }
}
