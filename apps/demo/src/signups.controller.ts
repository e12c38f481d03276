import { BadRequestException, Body, Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import { JobProducer } from '../../../src/index.js';
import { WELCOME_EMAIL, welcomeEmailSchema } from './welcome-email.js';

/** A sign-up enqueues a welcome e-mail; the same address twice yields the same job. */
@Controller('signups')
export class SignupsController {
  constructor(private readonly jobs: JobProducer) {}

  @Post()
  @HttpCode(HttpStatus.ACCEPTED)
  async signUp(@Body() body: unknown): Promise<{ jobId: string; deduplicated: boolean }> {
    const parsed = welcomeEmailSchema.safeParse(body);
    if (!parsed.success) {
      throw new BadRequestException('Send a JSON body like {"email": "ada@example.com"}: email must be an e-mail address.');
    }
    const { email } = parsed.data;
    // InvalidJobError and QueueSaturatedError are answered by JobQueueErrorFilter (400, 503).
    const { id, deduplicated } = await this.jobs.enqueue(WELCOME_EMAIL, { email }, { idempotencyKey: email });
    return { jobId: id, deduplicated };
  }
}
