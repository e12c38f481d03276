import type { Pool, PoolClient } from 'pg';
import type { EngineLogger } from '../base/logger.js';
import type { JobNotification } from '../base/job-notification.js';
import { channelOf } from './job-tables.js';

/**
 * One LISTEN connection per process, held out of the DataSource's pool. It reconnects after a
 * connection loss; while it is down, workers fall back to polling, so nothing is missed.
 */
export class JobNotificationListener {
  /** The listening connection, with the one way to let it go (whichever comes first: loss or stop). */
  private held: { client: PoolClient; release: (error?: unknown) => boolean } | null = null;
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
    this.channel = channelOf(schema);
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const held = this.held;
    this.held = null;
    if (!held) return;
    held.client.removeAllListeners('notification');
    // Ending the session ends its LISTEN too, with no round trip that a dead connection could hang.
    held.release();
  }

  private async connect(): Promise<void> {
    let client: PoolClient | null = null;
    let released = false;
    // A connection can report its end more than once (an 'error' event, then the LISTEN that
    // fails with it; an error after stop() let it go): it is released once, and replaced once.
    // The handler stays on the client, so a later 'error' finds a listener rather than crashing
    // the process.
    const release = (error?: unknown): boolean => {
      if (released || !client) return false;
      released = true;
      client.release(error instanceof Error ? error : true);
      return true;
    };
    const end = (error: unknown) => {
      if (client && this.held?.client === client) this.held = null;
      if (release(error) || !client) this.scheduleReconnect(error);
    };
    try {
      client = await this.pool.connect();
      client.on('notification', (message) => {
        if (message.channel !== this.channel) return;
        const payload = message.payload ?? '';
        if (payload.startsWith('cancel:')) this.onNotification({ kind: 'cancel', jobId: payload.slice(7) });
        else if (payload.startsWith('finished:')) this.onNotification({ kind: 'finished', jobId: payload.slice(9) });
        else if (payload.startsWith('due:')) this.onNotification({ kind: 'due', inMs: Number(payload.slice(4)) });
        else if (payload === 'paused') this.onNotification({ kind: 'paused' });
        else if (payload === 'schedules') this.onNotification({ kind: 'schedules' });
        else this.onNotification({ kind: 'new' });
      });
      client.on('error', end);
      await client.query(`LISTEN "${this.channel}"`);
      if (released) return;
      if (this.stopped) {
        release();
        return;
      }
      this.held = { client, release };
    } catch (error) {
      end(error);
    }
  }

  private scheduleReconnect(error: unknown): void {
    if (this.stopped) return;
    this.logger.warn(`LISTEN connection lost (${(error as Error)?.message ?? error}); polling until it is back.`);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.connect().then(() => this.onNotification({ kind: 'new' })), this.reconnectDelayMs);
    this.retryTimer.unref?.();
  }
}
