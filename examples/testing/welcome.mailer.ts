import { Injectable } from '@nestjs/common';
import { JobHandler, PermanentJobError, type JobContext } from 'auto-job-queue';

/** Stands in for a mail client: what was sent. */
export const sentMails: string[] = [];

@Injectable()
export class WelcomeMailer {
  @JobHandler('email.welcome', { maxAttempts: 3 })
  async send(payload: { email: string }, job: JobContext): Promise<{ sentTo: string }> {
    if (!payload.email.includes('@')) throw new PermanentJobError(`not an address: ${payload.email}`);
    job.log(`sending the welcome mail to ${payload.email}`);
    sentMails.push(payload.email);
    return { sentTo: payload.email };
  }
}
