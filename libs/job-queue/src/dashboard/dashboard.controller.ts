import {
  Controller,
  ForbiddenException,
  Get,
  Header,
  HttpCode,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  type Type,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import { JobQueueAdmin } from '../admin/job-queue.admin.js';
import { JobQueueErrorFilter } from '../http/job-queue-error.filter.js';
import type { JobStatus } from '../base/job-status.js';
import { jobPage, jobsPage, overviewPage } from './dashboard-pages.js';
import { DASHBOARD_ACTIONS, type DashboardAction, type JobQueueDashboardOptions } from './dashboard-options.js';

const HTML = 'text/html; charset=utf-8';

interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
}

/** The value of a query parameter given once, or undefined. */
const one = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);

/**
 * The dashboard's pages and JSON API, as a controller class made for one set of options: its path
 * and guards are decorators, so they are applied here, once, when the module is configured.
 */
export function dashboardController(options: JobQueueDashboardOptions): Type<unknown> {
  const path = (options.path ?? 'queue').replace(/^\/+|\/+$/g, '');
  const guards = options.guards ?? [];
  const readOnly = options.readOnly === true || guards.length === 0;

  @Controller(path)
  @UseGuards(...guards)
  @UseFilters(JobQueueErrorFilter)
  class JobQueueDashboardController {
    constructor(private readonly admin: JobQueueAdmin) {}

    @Get()
    @Header('content-type', HTML)
    async overview(@Req() request: RequestLike): Promise<string> {
      const [stats, throughput, workers, paused, circuits, schedules, oldestWaiting] = await Promise.all([
        this.admin.stats(),
        this.admin.throughput({ minutes: 60 }),
        this.admin.workers(),
        this.admin.paused(),
        this.admin.circuits(),
        this.admin.schedules(),
        this.admin.oldestWaiting(),
      ]);
      return overviewPage(base(request, path), { stats, throughput, workers, paused, circuits, schedules, oldestWaiting }, await this.allowed(request));
    }

    @Get('jobs')
    @Header('content-type', HTML)
    async jobs(@Req() request: RequestLike, @Query() query: Record<string, unknown>): Promise<string> {
      const filter = { status: one(query.status) ?? null, type: one(query.type) ?? null };
      const listing = await this.admin.listJobs({ status: (filter.status ?? undefined) as JobStatus | undefined, type: filter.type ?? undefined, cursor: one(query.cursor) });
      return jobsPage(base(request, path), listing, filter, await this.allowed(request));
    }

    @Get('jobs/:id')
    @Header('content-type', HTML)
    async job(@Req() request: RequestLike, @Param('id') id: string): Promise<string> {
      const job = await this.admin.getJob(id);
      if (!job) throw new NotFoundException(`No job with id ${id}.`);
      return jobPage(base(request, path), job, await this.allowed(request), await this.admin.dependencies(job.id));
    }

    @Get('api/stats')
    stats() {
      return this.admin.stats();
    }

    @Get('api/jobs')
    listJobs(@Query() query: Record<string, unknown>) {
      const limit = one(query.limit);
      return this.admin.listJobs({
        status: one(query.status) as JobStatus | undefined,
        type: one(query.type),
        limit: limit === undefined ? undefined : Number(limit),
        cursor: one(query.cursor),
      });
    }

    @Get('api/jobs/:id')
    async getJob(@Param('id') id: string) {
      const job = await this.admin.getJob(id);
      if (!job) throw new NotFoundException(`No job with id ${id}.`);
      return job;
    }

    @Get('api/jobs/:id/dependencies')
    async dependencies(@Param('id') id: string) {
      const job = await this.admin.getJob(id);
      if (!job) throw new NotFoundException(`No job with id ${id}.`);
      return this.admin.dependencies(job.id);
    }

    @Get('api/workers')
    workers() {
      return this.admin.workers();
    }

    @Get('api/throughput')
    throughput(@Query() query: Record<string, unknown>) {
      const minutes = one(query.minutes);
      return this.admin.throughput({ minutes: minutes === undefined ? undefined : Number(minutes), type: one(query.type) });
    }

    @Get('api/schedules')
    schedules() {
      return this.admin.schedules();
    }

    @Get('api/paused')
    paused() {
      return this.admin.paused();
    }

    @Post('api/jobs/:id/retry')
    @HttpCode(200)
    async retry(@Req() request: RequestLike, @Param('id') id: string) {
      await this.permit('retry', request);
      return this.admin.retryDead(id);
    }

    @Post('api/jobs/:id/cancel')
    @HttpCode(200)
    async cancel(@Req() request: RequestLike, @Param('id') id: string) {
      await this.permit('cancel', request);
      return this.admin.cancel(id);
    }

    @Post('api/dead/retry')
    @HttpCode(200)
    async retryDead(@Req() request: RequestLike, @Query() query: Record<string, unknown>) {
      await this.permit('retry', request);
      return { retried: await this.admin.retryDeadMany({ type: one(query.type) }) };
    }

    @Post('api/purge')
    @HttpCode(200)
    async purge(@Req() request: RequestLike, @Query() query: Record<string, unknown>) {
      await this.permit('purge', request);
      const olderThanMs = one(query.olderThanMs);
      const deleted = await this.admin.purge({
        status: one(query.status) as 'completed' | 'dead' | 'cancelled',
        type: one(query.type),
        olderThanMs: olderThanMs === undefined ? undefined : Number(olderThanMs),
      });
      return { deleted };
    }

    @Post('api/types/:type/pause')
    @HttpCode(200)
    async pause(@Req() request: RequestLike, @Param('type') type: string) {
      await this.permit('pause', request);
      await this.admin.pause(type);
      return { paused: await this.admin.paused() };
    }

    @Post('api/types/:type/resume')
    @HttpCode(200)
    async resume(@Req() request: RequestLike, @Param('type') type: string) {
      await this.permit('resume', request);
      await this.admin.resume(type);
      return { paused: await this.admin.paused() };
    }

    /** The actions this request may take: none read-only; else those `authorize` allows. */
    private async allowed(request: RequestLike): Promise<Set<DashboardAction>> {
      if (readOnly) return new Set();
      const allowed = new Set<DashboardAction>();
      for (const action of DASHBOARD_ACTIONS) if (!options.authorize || (await options.authorize(action, request))) allowed.add(action);
      return allowed;
    }

    /**
     * A state-changing request must come from the dashboard's own pages: its script sends a custom
     * header, which a cross-site form cannot and a cross-site fetch may not without CORS; a browser's
     * Sec-Fetch-Site, when sent, must say same-origin. Then the action must be allowed.
     */
    private async permit(action: DashboardAction, request: RequestLike): Promise<void> {
      if (readOnly) {
        throw new ForbiddenException('The dashboard is read-only: give JobQueueDashboardModule.forRoot({ guards }) to allow actions.');
      }
      const site = request.headers['sec-fetch-site'];
      if (request.headers['x-job-queue-csrf'] !== '1' || (site !== undefined && site !== 'same-origin' && site !== 'none')) {
        throw new ForbiddenException('Refused: dashboard actions are sent by its own pages (a cross-site request changes nothing).');
      }
      if (options.authorize && !(await options.authorize(action, request))) {
        throw new ForbiddenException(`You may not ${action} here.`);
      }
    }
  }
  return JobQueueDashboardController;
}

/** The dashboard's own URL path as the browser sees it (any global prefix included). */
function base(request: RequestLike & { url?: string; originalUrl?: string }, path: string): string {
  const url = request.originalUrl ?? request.url ?? `/${path}`;
  const at = url.indexOf(`/${path}`);
  return at >= 0 ? url.slice(0, at + path.length + 1) : `/${path}`;
}
