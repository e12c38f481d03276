import { Test, TestingModule } from '@nestjs/testing';
import { JobQueueModule } from 'auto-job-queue';
import { createTestDatabase, JobQueueTester, TestDatabase } from 'auto-job-queue/testing';
import { SignupService } from './signup.service';
import { sentMails, WelcomeMailer } from './welcome.mailer';

describe('signing up', () => {
  let db: TestDatabase;
  let app: TestingModule;
  let tester: JobQueueTester;

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await Test.createTestingModule({
      imports: [JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: db.url }, runWorker: 'manual' })],
      providers: [SignupService, WelcomeMailer],
    }).compile();
    await app.init();
    tester = app.get(JobQueueTester);
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  beforeEach(() => {
    sentMails.length = 0;
  });

  it('enqueues a welcome mail, which the handler sends', async () => {
    await app.get(SignupService).signUp('ada@example.com');

    const [job] = await tester.enqueued({ type: 'email.welcome' });
    expect(job.payload).toEqual({ email: 'ada@example.com' });
    expect(sentMails).toEqual([]);

    expect(await tester.drain()).toEqual({ completed: 1, failed: 0, dead: 0 });
    expect(sentMails).toEqual(['ada@example.com']);
  });

  it('the handler returns where it sent the mail, and refuses what is not an address', async () => {
    expect(await tester.perform('email.welcome', { email: 'grace@example.com' })).toEqual({ sentTo: 'grace@example.com' });
    await expect(tester.perform('email.welcome', { email: 'nobody' })).rejects.toThrow('not an address: nobody');
  });
});
