// The application's declaration, as the README shows it.
import 'auto-job-queue';

declare module 'auto-job-queue' {
  interface JobTypes {
    'email.welcome': { email: string; name?: string };
    'report.nightly': { day: string };
  }
}
