import type { BenchProducer, QueueAdapter } from './adapters/queue-adapter.js';
import { type BenchDatabase, createBenchDatabase } from './bench-database.js';
import { launchWorkerProcess, type RunCounts, type WorkerProcess } from './workers/worker-launcher.js';
import type { WorkerProcessConfig } from './workers/worker-protocol.js';

/**
 * Everything one scenario run started (databases, producers, worker processes), so that it is
 * all stopped and dropped afterwards, also when the run fails or the benchmark is interrupted.
 */
export class RunScope {
  private readonly databases = new Set<BenchDatabase>();
  private readonly producers = new Set<BenchProducer>();
  private readonly running = new Set<WorkerProcess>();

  constructor(private readonly adminUrl: string) {}

  /** A fresh database with the adapter's tables installed. */
  async database(adapter: QueueAdapter): Promise<BenchDatabase> {
    const db = await createBenchDatabase(this.adminUrl);
    this.databases.add(db);
    await adapter.install(db.url);
    return db;
  }

  async dropDatabase(db: BenchDatabase): Promise<void> {
    this.databases.delete(db);
    await db.drop();
  }

  async producer(adapter: QueueAdapter, db: BenchDatabase): Promise<BenchProducer> {
    const producer = await adapter.openProducer(db.url);
    this.producers.add(producer);
    return producer;
  }

  async closeProducer(producer: BenchProducer): Promise<void> {
    this.producers.delete(producer);
    await producer.close();
  }

  /** Worker processes, started in parallel. */
  async workers(count: number, config: WorkerProcessConfig): Promise<WorkerProcess[]> {
    const started = await Promise.allSettled(Array.from({ length: count }, () => launchWorkerProcess(config)));
    for (const result of started) if (result.status === 'fulfilled') this.running.add(result.value);
    const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
    return started.map((result) => (result as PromiseFulfilledResult<WorkerProcess>).value);
  }

  /** Graceful stops; resolves with each process's final run counts. */
  async stopWorkers(workers: readonly WorkerProcess[]): Promise<RunCounts[]> {
    try {
      return await Promise.all(workers.map((worker) => worker.stop()));
    } finally {
      for (const worker of workers) this.running.delete(worker);
    }
  }

  /**
   * Kills these worker processes now (a run failed midway): in a scenario where the systems take
   * turns, they must not go on loading the machine through the other systems' turns.
   */
  killWorkers(workers: readonly WorkerProcess[]): void {
    for (const worker of workers) {
      worker.kill();
      this.running.delete(worker);
    }
  }

  /** Stops what is left: worker processes killed, producers closed, databases dropped. */
  async close(): Promise<void> {
    for (const worker of this.running) worker.kill();
    this.running.clear();
    // Producers first, then the databases: a drop WITH (FORCE) ends the connections still open.
    await Promise.allSettled([...this.producers].map((producer) => producer.close()));
    this.producers.clear();
    await Promise.allSettled([...this.databases].map((db) => db.drop()));
    this.databases.clear();
  }
}
