import { EventEmitter } from 'node:events';
import type { Pool } from 'pg';
import { describe, expect, it } from 'vitest';
import type { EngineLogger } from '../base/logger.js';
import { JobNotificationListener } from './job-notification.listener.js';

/** A pooled connection double: LISTEN answers as the test scripts it; releases are recorded. */
class FakeClient extends EventEmitter {
  released: Array<Error | boolean | undefined> = [];
  constructor(private readonly onListen: (client: FakeClient) => Promise<void>) {
    super();
  }
  query(text: string): Promise<void> {
    return text.startsWith('LISTEN') ? this.onListen(this) : Promise.resolve();
  }
  release(error?: Error | boolean): void {
    this.released.push(error);
  }
}

const quiet: EngineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };

function poolOf(clients: FakeClient[]): { pool: Pool; connects: () => number } {
  let connects = 0;
  const pool = { connect: async () => clients[connects++] } as unknown as Pool;
  return { pool, connects: () => connects };
}

describe('JobNotificationListener', () => {
  it('a connection that fails its LISTEN with an error event too is replaced once, not twice', async () => {
    const lost = new Error('Connection terminated unexpectedly');
    const failing = new FakeClient(async (client) => {
      client.emit('error', lost);
      throw lost;
    });
    const healthy = new FakeClient(async () => undefined);
    const spare = new FakeClient(async () => undefined);
    const { pool, connects } = poolOf([failing, healthy, spare]);
    const listener = new JobNotificationListener(pool, 'job_queue', () => undefined, quiet, 5);
    await listener.start();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(connects()).toBe(2);
    expect(failing.released).toEqual([lost]);
    // A late second error from the dead connection finds a listener (no crash) and changes nothing.
    failing.emit('error', new Error('again'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(connects()).toBe(2);
    await listener.stop();
    expect(healthy.released).toEqual([true]);
  });

  it('a connection that errors after stop() let it go is not released again, and nothing reconnects', async () => {
    const only = new FakeClient(async () => undefined);
    const { pool, connects } = poolOf([only]);
    const listener = new JobNotificationListener(pool, 'job_queue', () => undefined, quiet, 5);
    await listener.start();
    await listener.stop();
    only.emit('error', new Error('read ECONNRESET'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(only.released).toEqual([true]);
    expect(connects()).toBe(1);
  });

  it('a held connection that errors is released and replaced, and its notifications resume on the new one', async () => {
    const first = new FakeClient(async () => undefined);
    const second = new FakeClient(async () => undefined);
    const { pool, connects } = poolOf([first, second]);
    const heard: string[] = [];
    const listener = new JobNotificationListener(pool, 'job_queue', (n) => heard.push(n.kind), quiet, 5);
    await listener.start();
    first.emit('error', new Error('terminating connection due to administrator command'));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(connects()).toBe(2);
    second.emit('notification', { channel: 'auto_job_queue:job_queue', payload: 'new' });
    // 'new' after the reconnect (a catch-up wake-up), then the notification itself.
    expect(heard).toEqual(['new', 'new']);
    await listener.stop();
    expect(second.released).toEqual([true]);
  });
});
