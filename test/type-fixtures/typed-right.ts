import type { JobContext, JobProducer } from 'auto-job-queue';
import './job-types.js';

// Right payloads compile, through the producer and a handler's context alike.
export async function right(jobs: JobProducer, job: JobContext): Promise<void> {
  await jobs.enqueue('email.welcome', { email: 'ada@example.com' });
  await jobs.enqueue('email.welcome', { email: 'ada@example.com', name: 'Ada' }, { delayMs: 1_000 });
  await job.enqueue('report.nightly', { day: '2026-12-03' });
  const result = await jobs.enqueueAndWait<{ sent: boolean }>('email.welcome', { email: 'ada@example.com' }, { timeoutMs: 1_000 });
  result.sent satisfies boolean;
  // A type nobody declared takes any JSON payload.
  await jobs.enqueue('audit.log', { anything: [1, 2, 3] });
  const type: string = 'dynamic.type';
  await jobs.enqueue(type, 42);
  // The explicit payload parameter of before still compiles.
  await jobs.enqueue<{ legacy: true }>('legacy.job', { legacy: true });

  // Wrong payloads for declared types do not: each line below must be an error.
  // @ts-expect-error: `mail` is not `email`.
  await jobs.enqueue('email.welcome', { mail: 'ada@example.com' });
  // @ts-expect-error: `email` must be a string.
  await jobs.enqueue('email.welcome', { email: 42 });
  // @ts-expect-error: the payload is required.
  await job.enqueue('report.nightly', {});
  // @ts-expect-error: enqueueAndWait checks it too.
  await jobs.enqueueAndWait('report.nightly', { date: 'today' }, { timeoutMs: 1_000 });
}
