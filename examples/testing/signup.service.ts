import { Injectable } from '@nestjs/common';
import { JobProducer } from 'auto-job-queue';

/** Signs a user up and asks for a welcome mail, which a job sends. */
@Injectable()
export class SignupService {
  constructor(private readonly jobs: JobProducer) {}

  async signUp(email: string): Promise<void> {
    // …the user's row is written here…
    await this.jobs.enqueue('email.welcome', { email });
  }
}
