import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { REFERENCE_CHANNEL, REFERENCE_SQL } from './reference.sql.js';

export interface ReferenceWorkerSettings {
  url: string;
  type: string;
  /** Handlers running at once, at most. */
  concurrency: number;
  /** Jobs claimed ahead into a local buffer, at most (claimed and leased, not yet running). */
  prefetch: number;
  poolSize: number;
  pollIntervalMs: number;
  /** Completions delete their jobs instead of marking them completed. */
  deleteOnComplete?: boolean;
}

interface Claimed {
  id: string;
  payload: unknown;
}

/**
 * The reference claim loop, the two batching techniques Postgres queues use and nothing else:
 * - claims in batches: one UPDATE … SKIP LOCKED fills a local buffer (up to `prefetch` jobs plus
 *   the free slots), and handlers are started from the buffer without a round trip each;
 * - group commit of completions: a completion is written at once when no write is in flight;
 *   those that finish meanwhile go together in the next fenced UPDATE. A slot frees once the
 *   handler has returned; the job counts as done when its completion is committed.
 * It sleeps until a NOTIFY, a finished job or the poll interval. No retries, no lease renewal,
 * no flow control.
 */
export class ReferenceWorker {
  private readonly pool: pg.Pool;
  private readonly listener: pg.Client;
  private readonly id = `ref-${process.pid}-${randomUUID().slice(0, 8)}`;
  private readonly buffer: Claimed[] = [];
  private running = 0;
  private stopping = false;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private loop: Promise<void> = Promise.resolve();
  private readonly inFlight = new Set<Promise<void>>();
  private finished: Array<{ id: string; done: () => void; failed: (error: unknown) => void }> = [];
  private writing = false;
  private readonly completeSql: string;

  constructor(
    private readonly settings: ReferenceWorkerSettings,
    private readonly handler: (payload: unknown) => unknown,
  ) {
    this.pool = new pg.Pool({ connectionString: settings.url, max: settings.poolSize });
    this.listener = new pg.Client({ connectionString: settings.url });
    this.completeSql = settings.deleteOnComplete ? REFERENCE_SQL.completeDeleting : REFERENCE_SQL.complete;
  }

  async start(): Promise<void> {
    await this.listener.connect();
    this.listener.on('notification', () => this.wake());
    await this.listener.query(`LISTEN ${REFERENCE_CHANNEL}`);
    this.loop = this.claimLoop();
  }

  /** Stops claiming, runs what is already claimed, waits for every completion to be written. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loop;
    while (this.buffer.length > 0 || this.inFlight.size > 0) {
      this.startBuffered();
      await Promise.race(this.inFlight);
    }
    await this.listener.end();
    await this.pool.end();
  }

  private wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async claimLoop(): Promise<void> {
    while (!this.stopping) {
      this.woken = false;
      this.startBuffered();
      const room = this.settings.prefetch + (this.settings.concurrency - this.running) - this.buffer.length;
      // Top up once the buffer runs low, so one claim serves many starts.
      if (this.buffer.length <= this.settings.concurrency && room > 0) {
        const { rows } = await this.pool.query<Claimed>(REFERENCE_SQL.claim, [this.settings.type, this.id, room]);
        this.buffer.push(...rows);
        this.startBuffered();
        if (rows.length === room) continue;
      }
      if (this.woken || this.stopping) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.settings.pollIntervalMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = null;
    }
  }

  private startBuffered(): void {
    while (this.running < this.settings.concurrency && this.buffer.length > 0) {
      const job = this.buffer.shift()!;
      this.running++;
      const done = this.execute(job).finally(() => this.inFlight.delete(done));
      this.inFlight.add(done);
    }
  }

  private async execute(job: Claimed): Promise<void> {
    try {
      await this.handler(job.payload);
    } finally {
      this.running--;
      this.startBuffered();
      this.wake();
    }
    await new Promise<void>((done, failed) => {
      this.finished.push({ id: job.id, done, failed });
      if (!this.writing) void this.writeCompletions();
    });
  }

  private async writeCompletions(): Promise<void> {
    this.writing = true;
    while (this.finished.length > 0) {
      const batch = this.finished;
      this.finished = [];
      try {
        await this.pool.query(this.completeSql, [batch.map((job) => job.id), this.id]);
        for (const job of batch) job.done();
      } catch (error) {
        for (const job of batch) job.failed(error);
      }
    }
    this.writing = false;
  }
}
