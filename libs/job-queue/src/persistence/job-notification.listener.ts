import type { Pool, PoolClient } from 'pg';
import type { EngineLogger } from '../engine/engine-logger.js';

import type { JobNotification } from '../notifications/job-notification.js';

/**
 * One LISTEN connection per process, held out of the DataSource's pool. It reconnects after a
 * connection loss; while it is down, workers fall back to polling, so nothing is missed.
 */
export class JobNotificationListener {
  private client: PoolClient | null = null;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly channel: string;

  constructor(
    private readonly pool: Pool,
    schema: string,
    private readonly onNotification: (notification: JobNotification) => void,
    private readonly logger: EngineLogger,
    private readonly reconnectDelayMs = 1_000,
  ) {
    this.channel = `auto_job_queue:${schema}`;
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = null;
    if (!client) return;
    client.removeAllListeners('notification');
    try {
      await client.query(`UNLISTEN "${this.channel}"`);
      client.release();
    } catch (error) {
      client.release(error as Error);
    }
  }

  private async connect(): Promise<void> {
    let client: PoolClient | null = null;
    try {
      client = await this.pool.connect();
      client.on('notification', (message) => {
        if (message.channel !== this.channel) return;
        const payload = message.payload ?? '';
        if (payload.startsWith('cancel:')) this.onNotification({ kind: 'cancel', jobId: payload.slice(7) });
        else if (payload.startsWith('finished:')) this.onNotification({ kind: 'finished', jobId: payload.slice(9) });
        else if (payload.startsWith('due:')) this.onNotification({ kind: 'due', inMs: Number(payload.slice(4)) });
        else this.onNotification({ kind: 'new' });
      });
      client.once('error', (error) => this.lost(error));
      await client.query(`LISTEN "${this.channel}"`);
      if (this.stopped) {
        client.release();
        return;
      }
      this.client = client;
    } catch (error) {
      client?.release(error as Error);
      this.scheduleReconnect(error);
    }
  }

  private lost(error: Error): void {
    const client = this.client;
    this.client = null;
    client?.release(error);
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error: unknown): void {
    if (this.stopped) return;
    this.logger.warn(`LISTEN connection lost (${(error as Error)?.message ?? error}); polling until it is back.`);
    this.retryTimer = setTimeout(() => void this.connect().then(() => this.onNotification({ kind: 'new' })), this.reconnectDelayMs);
    this.retryTimer.unref?.();
  }
}
