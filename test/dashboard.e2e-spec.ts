import { type CanActivate, type ExecutionContext, Injectable, type INestApplication, Module } from '@nestjs/common';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { JobHandler, JobProducer, JobQueueAdmin, JobQueueDashboardModule, JobQueueModule, PermanentJobError } from '../src/index.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/wait-for.js';

/**
 * The dashboard in a real browser (Debian's Chromium, headless, driven by playwright-core) against
 * a real app and PostgreSQL: counts that move as jobs run, a dead job retried by its button, the
 * guard, escaped payloads, a forged cross-site POST; and the JSON API on Express and Fastify.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const TOKEN = 'let-me-in';
const healed = new Set<string>();

@Injectable()
class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    return request.headers['x-dashboard-token'] === TOKEN;
  }
}

@Injectable()
class UiHandlers {
  @JobHandler('ui.quick')
  quick() {
    return { ok: true };
  }

  @JobHandler('ui.poison')
  poison(_payload: unknown, job: { id: string }) {
    if (!healed.has(job.id)) throw new PermanentJobError('the mail server refused it');
    return { ok: 'after the fix' };
  }

  @JobHandler('ui.parked')
  parked() {}
}

async function startApp(db: TestDatabase, fastify: boolean): Promise<{ app: INestApplication; base: string }> {
  @Module({
    imports: [
      JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: db.url }, pollIntervalMs: 100, heartbeatIntervalMs: 200, runWorker: !fastify }),
      JobQueueDashboardModule.forRoot({
        guards: [TokenGuard],
        // Viewers may retry; only admins may cancel, pause or purge.
        authorize: (action, request) => action === 'retry' || (request as { headers: Record<string, unknown> }).headers['x-role'] === 'admin',
      }),
    ],
    providers: [UiHandlers],
  })
  class DashboardApp {}
  const moduleRef = await Test.createTestingModule({ imports: [DashboardApp] }).compile();
  const app = fastify ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false }) : moduleRef.createNestApplication({ logger: false });
  await app.init();
  if (fastify) await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, base: `${url}/queue` };
}

describe('the dashboard', () => {
  let db: TestDatabase;
  let express: { app: INestApplication; base: string };
  let browser: Browser;

  beforeAll(async () => {
    db = await createTestDatabase(inject('adminUrl'));
    express = await startApp(db, false);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });

  afterAll(async () => {
    await browser?.close();
    await express?.app.close();
    await db?.drop();
  });

  it('shows the counts move as jobs run; a dead job is retried by its button and completes', async () => {
    const context = await browser.newContext({ extraHTTPHeaders: { 'x-dashboard-token': TOKEN } });
    const page = await context.newPage();
    const producer = express.app.get(JobProducer);
    await page.goto(express.base);
    const completedCard = page.locator('.stat.s-completed .n');
    const before = Number((await completedCard.textContent())!.replace(/,/g, ''));
    for (let i = 0; i < 3; i++) await producer.enqueue('ui.quick', { i });
    // The page reloads itself every 5 s while open.
    await page.waitForFunction(`Number(document.querySelector('.stat.s-completed .n').textContent.replace(/,/g, '')) >= ${before + 3}`, undefined, { timeout: 15_000 });
    expect(await page.locator('svg rect.bar-completed').count()).toBeGreaterThan(0);
    expect(await page.locator('text=Live workers').count()).toBe(1);

    const { id } = await producer.enqueue('ui.poison', { to: 'ada@example.com' });
    await waitFor(async () => (await express.app.get(JobQueueAdmin).getJob(id))?.status === 'dead', { message: 'the job dead' });
    await page.goto(`${express.base}/jobs?status=dead`);
    await page.click(`a[href$="/jobs/${id}"]`);
    await page.waitForURL(`**/queue/jobs/${id}`);
    expect(await page.locator('h1 .badge').textContent()).toBe('dead');
    expect(await page.locator('.err').first().textContent()).toContain('the mail server refused it');
    healed.add(id);
    await page.click('button[data-action$="/retry"]');
    await page.waitForFunction(`document.querySelector('h1 .badge')?.textContent === 'completed'`, undefined, { timeout: 15_000 });
    expect(await page.locator('pre.json').nth(1).textContent()).toContain('after the fix');
    await context.close();
  });

  it('renders a payload holding <script> as text, and takes no action a cross-site page forges', async () => {
    const context = await browser.newContext({ extraHTTPHeaders: { 'x-dashboard-token': TOKEN, 'x-role': 'admin' } });
    const page = await context.newPage();
    const producer = express.app.get(JobProducer);
    await express.app.get(JobQueueAdmin).pause('ui.parked');
    const { id } = await producer.enqueue('ui.parked', { note: '<script>window.pwned = true</script><img src=x onerror="window.pwned = true">' });
    await page.goto(`${express.base}/jobs/${id}`);
    expect(await page.locator('pre.json').first().textContent()).toContain('<script>window.pwned = true</script>');
    expect(await page.evaluate('typeof window.pwned')).toBe('undefined');

    // A page of another origin posts a form to the cancel action, with the user's credentials.
    const forged = await context.newPage();
    await forged.setContent(`<form method="post" action="${express.base}/api/jobs/${id}/cancel"></form><script>document.forms[0].submit()</script>`);
    await forged.waitForLoadState('load');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await express.app.get(JobQueueAdmin).getJob(id))?.status).toBe('pending');

    // The same action from the dashboard's own page goes through (the user is an admin).
    page.on('dialog', (dialog) => void dialog.accept());
    await page.click('button[data-action$="/cancel"]');
    await waitFor(async () => (await express.app.get(JobQueueAdmin).getJob(id))?.status === 'cancelled', { message: 'cancelled from the page' });
    await express.app.get(JobQueueAdmin).resume('ui.parked');
    await context.close();
  });

  it('shows what a blocked job waits for, linked, and its group, and cancels it from its page', async () => {
    const context = await browser.newContext({ extraHTTPHeaders: { 'x-dashboard-token': TOKEN, 'x-role': 'admin' } });
    const page = await context.newPage();
    const producer = express.app.get(JobProducer);
    const admin = express.app.get(JobQueueAdmin);
    await admin.pause('ui.parked');
    try {
      const first = await producer.enqueue('ui.parked', { n: 1 });
      const second = await producer.enqueue('ui.parked', { n: 2 });
      const { id } = await producer.enqueue('ui.report', {}, { dependsOn: [first.id, second.id], group: 'acme' });
      await page.goto(`${express.base}/jobs/${id}`);
      expect(await page.locator('h1 .badge').textContent()).toBe('blocked');
      expect(await page.locator('dt:text-is("Group") + dd').textContent()).toBe('acme');
      const card = page.locator('.card.dependencies');
      expect(await card.locator('h2').textContent()).toBe('Depends on (0 of 2 completed)');
      expect(await card.locator('.badge').allTextContents()).toEqual(['pending', 'pending']);
      const listed = (await (await fetch(`${express.base}/api/jobs/${id}/dependencies`, { headers: { 'x-dashboard-token': TOKEN } })).json()) as Array<{ id: string }>;
      expect(listed.map((d) => d.id)).toEqual([first.id, second.id]);

      page.on('dialog', (dialog) => void dialog.accept());
      await page.click('button[data-action$="/cancel"]');
      await page.waitForFunction(`document.querySelector('h1 .badge')?.textContent === 'cancelled'`, undefined, { timeout: 15_000 });
      expect((await admin.getJob(id))?.status).toBe('cancelled');
      await page.click(`.card.dependencies a[href$="/jobs/${first.id}"]`);
      await page.waitForURL(`**/queue/jobs/${first.id}`);
      await admin.cancel(first.id);
      await admin.cancel(second.id);
    } finally {
      await admin.resume('ui.parked');
      await context.close();
    }
  });

  it('refuses a browser without the guard’s credentials', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const response = await page.goto(express.base);
    expect(response?.status()).toBe(403);
    await context.close();
  });

  it.each([['express'], ['fastify']])('answers the JSON API on %s: 404, 400 naming the field, 403 for a refused or forged action', async (kind) => {
    const target = kind === 'express' ? express : await startApp(db, true);
    try {
      const headers = { 'x-dashboard-token': TOKEN };
      const action = { ...headers, 'content-type': 'application/json', 'x-job-queue-csrf': '1' };
      const stats = await fetch(`${target.base}/api/stats`, { headers });
      expect(stats.status).toBe(200);
      expect(await stats.json()).toMatchObject({ byType: expect.any(Object) });
      expect((await fetch(`${target.base}/api/jobs/987654`, { headers })).status).toBe(404);
      expect((await fetch(`${target.base}/jobs/987654`, { headers })).status).toBe(404);
      const bad = await fetch(`${target.base}/api/jobs?status=lost`, { headers });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ field: 'status' });
      expect((await fetch(`${target.base}/api/throughput?minutes=0`, { headers })).status).toBe(400);
      expect((await fetch(`${target.base}/api/stats`)).status).toBe(403);
      // A viewer may retry, not pause; a request without the dashboard's header changes nothing.
      expect((await fetch(`${target.base}/api/types/ui.quick/pause`, { method: 'POST', headers: action, body: '{}' })).status).toBe(403);
      expect((await fetch(`${target.base}/api/types/ui.quick/pause`, { method: 'POST', headers: { ...headers, 'x-role': 'admin' } })).status).toBe(403);
      const paused = await fetch(`${target.base}/api/types/ui.quick/pause`, { method: 'POST', headers: { ...action, 'x-role': 'admin' }, body: '{}' });
      expect(paused.status).toBe(200);
      expect(await paused.json()).toEqual({ paused: ['ui.quick'] });
      const resumed = await fetch(`${target.base}/api/types/ui.quick/resume`, { method: 'POST', headers: { ...action, 'x-role': 'admin' }, body: '{}' });
      expect(await resumed.json()).toEqual({ paused: [] });
      expect((await fetch(`${target.base}/api/purge?status=everything`, { method: 'POST', headers: { ...action, 'x-role': 'admin' }, body: '{}' })).status).toBe(400);
      expect((await fetch(`${target.base}/api/dead/retry`, { method: 'POST', headers: action, body: '{}' })).status).toBe(200);
      const html = await fetch(target.base, { headers });
      expect(html.headers.get('content-type')).toContain('text/html');
      expect(await html.text()).not.toMatch(/<(script|link)[^>]+(src|href)="https?:/);
    } finally {
      if (target !== express) await target.app.close();
    }
  });

  it('is read-only without guards, and says so at boot', async () => {
    @Module({ imports: [JobQueueModule.forRoot({ dataSource: { type: 'postgres', url: db.url }, runWorker: false }), JobQueueDashboardModule.forRoot({ path: 'ops/queue' })] })
    class OpenDashboard {}
    const moduleRef = await Test.createTestingModule({ imports: [OpenDashboard] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      const base = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/ops/queue`;
      expect((await fetch(base)).status).toBe(200);
      const page = await (await fetch(base)).text();
      expect(page).not.toMatch(/<button[^>]*data-action/);
      const refused = await fetch(`${base}/api/dead/retry`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-job-queue-csrf': '1' }, body: '{}' });
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { message: string }).message).toContain('read-only');
    } finally {
      await app.close();
    }
  });

  // Refreshes the manual's picture: AJQ_SCREENSHOT=docs/operations/dashboard.png npx vitest run test/dashboard.e2e-spec.ts
  it.runIf(process.env.AJQ_SCREENSHOT)('takes the screenshot for docs/operations/dashboard.md', async () => {
    const producer = express.app.get(JobProducer);
    const admin = express.app.get(JobQueueAdmin);
    for (let i = 0; i < 40; i++) await producer.enqueue('ui.quick', { i });
    for (let i = 0; i < 3; i++) await producer.enqueue('ui.poison', { to: `user${i}@example.com` });
    await admin.pause('ui.parked');
    const parked: string[] = [];
    for (let i = 0; i < 5; i++) parked.push((await producer.enqueue('ui.parked', { i })).id);
    // A report waiting for the parked jobs (blocked).
    for (let i = 0; i < 2; i++) await producer.enqueue('ui.report', { i }, { dependsOn: parked });
    await waitFor(async () => (await admin.stats()).dead >= 3, { message: 'dead letters' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const context = await browser.newContext({ extraHTTPHeaders: { 'x-dashboard-token': TOKEN, 'x-role': 'admin' }, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(express.base);
    await page.screenshot({ path: process.env.AJQ_SCREENSHOT!, fullPage: true });
    await context.close();
    await admin.resume('ui.parked');
  });
});
