import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { adapterNamed } from '../adapters/index.js';
import { nowUs } from '../pickup-histogram.js';
import { PRODUCER_CONFIG_ENV, type FromProducer, type ProducerProcessConfig, type ToProducer } from './producer-protocol.js';

/**
 * A benchmark producer process (an API pod): enqueues jobs seq 0 … count-1 at a steady rate
 * through the system's bulk API, each call stamped with its start time (payload `t`), and
 * answers the harness over IPC. Started by producer-launcher.ts.
 */
const config: ProducerProcessConfig = JSON.parse(process.env[PRODUCER_CONFIG_ENV] ?? 'null');
/** Calls carry at most this many jobs, so a call that ran late does not turn into one huge insert. */
const MAX_BATCH = 2_000;
let enqueued = 0;
let maxLagMs = 0;

function send(message: FromProducer): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, undefined, () => resolve());
  });
}

async function produce(enqueueMany: (seqs: number[], stampedAt: number) => Promise<void>): Promise<number> {
  const startedUs = nowUs();
  const perJobUs = 1e6 / config.ratePerSecond;
  while (enqueued < config.count) {
    const elapsedUs = nowUs() - startedUs;
    const due = Math.min(config.count, Math.floor(elapsedUs / perJobUs) + 1);
    if (due > enqueued) {
      // Behind schedule by the age of the oldest job in this call.
      maxLagMs = Math.max(maxLagMs, (elapsedUs - enqueued * perJobUs) / 1000);
      const to = Math.min(due, enqueued + MAX_BATCH);
      const seqs = Array.from({ length: to - enqueued }, (_, i) => enqueued + i);
      await enqueueMany(seqs, nowUs());
      enqueued = to;
    } else {
      await sleep(config.tickMs);
    }
  }
  return (nowUs() - startedUs) / 1e6;
}

async function main(): Promise<void> {
  const producer = await adapterNamed(config.adapter).openProducer(config.url);
  process.on('message', (message: ToProducer) => {
    if (message.kind === 'progress') void send({ kind: 'progress', enqueued, maxLagMs });
    else if (message.kind === 'start') {
      produce((seqs, stampedAt) => producer.enqueueMany(seqs, stampedAt)).then(
        (seconds) => send({ kind: 'done', enqueued, seconds, maxLagMs }),
        (error) => send({ kind: 'failed', error: String(error?.stack ?? error) }).then(() => process.exit(1)),
      );
    } else if (message.kind === 'stop') {
      void producer.close().then(() => process.exit(0), () => process.exit(1));
    }
  });
  process.on('disconnect', () => process.exit(2));
  await send({ kind: 'ready' });
}

main().catch(async (error) => {
  await send({ kind: 'failed', error: String(error?.stack ?? error) });
  process.exit(1);
});
