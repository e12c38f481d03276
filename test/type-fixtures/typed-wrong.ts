import type { JobProducer } from 'auto-job-queue';
import './job-types.js';

// Must not compile: the declared payload of email.welcome has `email`, not `mail`.
export async function wrong(jobs: JobProducer): Promise<void> {
  await jobs.enqueue('email.welcome', { mail: 'ada@example.com' });
}
