import { autoJobQueueAdapter, autoJobQueueAsyncClaimsAdapter } from './auto-job-queue.adapter.js';
import { graphileWorkerAdapter } from './graphile-worker.adapter.js';
import { pgBossAdapter } from './pg-boss.adapter.js';
import type { AdapterName, QueueAdapter } from './queue-adapter.js';
import { referenceAdapter } from './reference.adapter.js';

const ADAPTERS: Record<AdapterName, QueueAdapter> = {
  'auto-job-queue': autoJobQueueAdapter,
  'ajq-async-claims': autoJobQueueAsyncClaimsAdapter,
  reference: referenceAdapter,
  'graphile-worker': graphileWorkerAdapter,
  'pg-boss': pgBossAdapter,
};

/** The subject first (and its variant), then the reference every ratio divides by, then the peers. */
export const ADAPTER_ORDER: readonly AdapterName[] = ['auto-job-queue', 'ajq-async-claims', 'reference', 'graphile-worker', 'pg-boss'];

/** What `--compare` runs: the variant only when named in `--systems`. */
export const COMPARED: readonly AdapterName[] = ['auto-job-queue', 'reference', 'graphile-worker', 'pg-boss'];

export function adapterNamed(name: string): QueueAdapter {
  const adapter = ADAPTERS[name as AdapterName];
  if (!adapter) throw new Error(`unknown queue adapter "${name}" (known: ${ADAPTER_ORDER.join(', ')})`);
  return adapter;
}
