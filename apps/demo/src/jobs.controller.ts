import { Controller, Get, HttpCode, HttpStatus, NotFoundException, Param, Post, Query } from '@nestjs/common';
import { JobQueueAdmin, type JobRecord, type JobStats } from '../../../src/index.js';

/** Read-only views of the queue, and a replay button for dead letters. */
@Controller()
export class JobsController {
  constructor(private readonly admin: JobQueueAdmin) {}

  @Get('jobs/:id')
  async job(@Param('id') id: string): Promise<JobRecord> {
    const job = await this.admin.getJob(id);
    if (!job) throw new NotFoundException(`No job with id "${id}".`);
    return job;
  }

  @Get('stats')
  stats(): Promise<JobStats> {
    return this.admin.stats();
  }

  /** `?type=email.welcome&limit=20`; a bad limit is an InvalidJobError, answered 400. */
  @Get('dead')
  dead(@Query('type') type?: string, @Query('limit') limit?: string): Promise<JobRecord[]> {
    return this.admin.listDead({ type, limit: limit === undefined ? undefined : Number(limit) });
  }

  /** Unknown id → 404, a job that is not dead → 409 (JobQueueErrorFilter). */
  @Post('dead/:id/retry')
  @HttpCode(HttpStatus.OK)
  retry(@Param('id') id: string): Promise<JobRecord> {
    return this.admin.retryDead(id);
  }
}
