import { autoJobQueueAdapter, autoJobQueueAsyncClaimsAdapter, autoJobQueueDeleteAdapter, autoJobQueueWith } from './auto-job-queue.adapter.js';
import { graphileWorkerAdapter } from './graphile-worker.adapter.js';
import { pgBossAdapter } from './pg-boss.adapter.js';
import type { AdapterName, QueueAdapter } from './queue-adapter.js';
import { referenceAdapter, referenceDeleteAdapter } from './reference.adapter.js';

const ADAPTERS: Record<AdapterName, QueueAdapter> = {
  'auto-job-queue': autoJobQueueAdapter,
  'ajq-async-claims': autoJobQueueAsyncClaimsAdapter,
  'ajq-delete': autoJobQueueDeleteAdapter,
  reference: referenceAdapter,
  'reference-delete': referenceDeleteAdapter,
  'graphile-worker': graphileWorkerAdapter,
  'pg-boss': pgBossAdapter,
};

/** The subject first (and its variants), then the references every ratio divides by, then the peers. */
export const ADAPTER_ORDER: readonly AdapterName[] = [
  'auto-job-queue',
  'ajq-async-claims',
  'ajq-delete',
  'reference',
  'reference-delete',
  'graphile-worker',
  'pg-boss',
];

/** What `--compare` runs: the variants only when named in `--systems`. */
export const COMPARED: readonly AdapterName[] = ['auto-job-queue', 'reference', 'graphile-worker', 'pg-boss'];

export function adapterNamed(name: string): QueueAdapter {
  const adapter = ADAPTERS[name as AdapterName];
  if (!adapter) throw new Error(`unknown queue adapter "${name}" (known: ${ADAPTER_ORDER.join(', ')})`);
  return adapter;
}

/**
 * The adapter a worker process runs: the named one, or for the soak an auto-job-queue adapter
 * with its `retention.completedMs` (0: ajq-delete).
 */
export function adapterFor(name: string, retentionMs?: number): QueueAdapter {
  if (retentionMs === undefined) return adapterNamed(name);
  if (name !== 'auto-job-queue' && name !== 'ajq-delete') throw new Error(`a retention for ${name}: only auto-job-queue takes one`);
  return autoJobQueueWith(name, { retention: { completedMs: retentionMs } });
}
