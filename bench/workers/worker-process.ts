import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import { adapterFor } from '../adapters/index.js';
import { nowUs, PickupHistogram } from '../pickup-histogram.js';
import type { BenchPayload, BenchWorker } from '../adapters/queue-adapter.js';
import { traceSql } from './sql-trace.js';
import { WORKER_CONFIG_ENV, type FromWorker, type MemoryReading, type ToWorker, type WorkerProcessConfig } from './worker-protocol.js';

/**
 * A benchmark worker process: boots one system's worker with a no-op handler that counts runs
 * per job, and answers the harness over IPC. Started by worker-launcher.ts with --expose-gc.
 */
const config: WorkerProcessConfig = JSON.parse(process.env[WORKER_CONFIG_ENV] ?? 'null');
const counts = new Uint8Array(config.expectedJobs);
/** Diagnostic: BENCH_TRACE_SQL=1 prints this process's statements per job when it stops. */
const sqlTrace = process.env.BENCH_TRACE_SQL === '1' ? traceSql() : null;
let outOfRange = 0;
/** Handler runs so far, whatever their seq. */
let runs = 0;
/** When the first job started (hrtime ns), so a drain's clock can start no later than that. */
let firstStartAt: bigint | null = null;
const pickups = config.pickupHistogram ? new PickupHistogram() : null;

function send(message: FromWorker): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, undefined, () => resolve());
  });
}

function memory(): MemoryReading {
  (globalThis as { gc?: () => void }).gc?.();
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
  const youngGeneration = v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0;
  return { rss, heapUsed, heapTotal, youngGeneration, external, rssFile: statusKb('RssFile'), rssAnon: statusKb('RssAnon') };
}

/** A size from /proc/self/status, in bytes; null where there is no such file (not Linux). */
function statusKb(field: string): number | null {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

function onJob(payload: BenchPayload): void {
  const at = config.reportStarts ? process.hrtime.bigint() : 0n;
  firstStartAt ??= at || process.hrtime.bigint();
  runs++;
  if (pickups && typeof payload?.t === 'number') pickups.record(nowUs() - payload.t);
  const seq = payload?.seq;
  if (Number.isInteger(seq) && seq >= 0 && seq < counts.length) {
    if (counts[seq] < 255) counts[seq]++;
  } else {
    outOfRange++;
  }
  if (config.reportStarts) void send({ kind: 'started', seq, at: at.toString(), ...(sqlTrace ? { trace: sqlTrace.lastEvents() } : {}) });
}

async function main(): Promise<void> {
  const adapter = adapterFor(config.adapter, config.retentionMs);
  const worker: BenchWorker = await adapter.startWorker(config.url, config.concurrency, onJob);
  let stopping = false;
  process.on('message', (message: ToWorker) => {
    if (message.kind === 'memory') void send({ kind: 'memory', ...memory() });
    else if (message.kind === 'runs') void send({ kind: 'runs', total: runs });
    else if (message.kind === 'pickup') void send({ kind: 'pickup', buckets: pickups?.take() ?? [] });
    else if (message.kind === 'stop' && !stopping) {
      stopping = true;
      worker.stop().then(
        () => {
          if (sqlTrace) {
            const jobs = counts.reduce((sum, n) => sum + n, 0);
            const title = `SQL trace, ${config.adapter} worker ${process.pid}, ${jobs} jobs at concurrency ${config.concurrency}`;
            process.stdout.write(`${title}:\n${sqlTrace.summary(jobs)}\n`);
          }
          return send({
            kind: 'stopped',
            counts: Buffer.from(counts).toString('base64'),
            outOfRange,
            firstStartAt: firstStartAt?.toString() ?? null,
          }).then(() => process.exit(0));
        },
        (error) => send({ kind: 'failed', error: String(error?.stack ?? error) }).then(() => process.exit(1)),
      );
    }
  });
  // The harness going away must not leave this process running.
  process.on('disconnect', () => {
    if (!stopping) process.exit(2);
  });
  await send({ kind: 'ready', ...memory() });
}

main().catch(async (error) => {
  await send({ kind: 'failed', error: String(error?.stack ?? error) });
  process.exit(1);
});
