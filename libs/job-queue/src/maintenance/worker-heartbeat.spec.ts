import { describe, expect, it } from 'vitest';
import { ThroughputTally } from './throughput-tally.js';
import { WorkerHeartbeat } from './worker-heartbeat.js';

describe('WorkerHeartbeat', () => {
  it('removes the worker only after a beat still in flight has landed, so the row is not written back', async () => {
    const writes: string[] = [];
    let landSlowBeat: () => void = () => undefined;
    const store = {
      heartbeat: (beat: { draining: boolean } | null) => {
        if (beat?.draining) {
          return new Promise<void>((resolve) => (landSlowBeat = () => (writes.push('draining beat'), resolve())));
        }
        writes.push(beat ? 'beat' : 'last tally');
        return Promise.resolve();
      },
      removeWorker: async () => void writes.push('removed'),
    };
    const self = { id: 'w1', types: ['a'], concurrency: 1, status: () => ({ inFlight: 0, draining: true }) };
    const heartbeat = new WorkerHeartbeat(store, new ThroughputTally(), self, 1_000, { log() {}, warn() {}, error() {} });
    void heartbeat.runOnce();
    const stopped = heartbeat.stop();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(writes).toEqual([]);
    landSlowBeat();
    await stopped;
    expect(writes).toEqual(['draining beat', 'last tally', 'removed']);
  });
});
