import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PickupTrace } from './sql-trace.js';
import { WORKER_APPLICATION_NAME, WORKER_CONFIG_ENV, type FromWorker, type MemoryReading, type ToWorker, type WorkerProcessConfig } from './worker-protocol.js';

const ENTRY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'worker-process.js');
const BOOT_TIMEOUT_MS = 60_000;
const REPLY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 60_000;

export interface RunCounts {
  counts: Uint8Array;
  outOfRange: number;
  /** Monotonic time (ns) the first job started in this process; null when none ran. */
  firstStartAt: bigint | null;
}

export interface WorkerProcess {
  readonly pid: number;
  /** Memory right after boot, before any job. */
  readonly boot: MemoryReading;
  memory(): Promise<MemoryReading>;
  /** Handler runs so far (IPC only: the database is not asked). */
  runs(): Promise<number>;
  /** Pickup latencies since the last call, when started with pickupHistogram. */
  pickups(): Promise<Array<[number, number]>>;
  /**
   * Called with (seq, hrtime ns) as each job starts, when started with reportStarts (trace with
   * BENCH_TRACE_SQL=1); returns the function that removes the listener.
   */
  onStarted(listener: (seq: number, at: bigint, trace?: PickupTrace) => void): () => void;
  /**
   * Graceful stop (SIGKILL if it does not end in time); resolves with the runs per seq
   * (index = seq) and the runs whose seq was out of range, counted until the very end.
   */
  stop(): Promise<RunCounts>;
  /** Immediate SIGKILL, for cleanup after a failure. */
  kill(): void;
}

/** Forks bench/workers/worker-process.js and resolves once its worker runs. */
export async function launchWorkerProcess(config: WorkerProcessConfig): Promise<WorkerProcess> {
  const child = fork(ENTRY, [], {
    // BENCH_CPU_PROF=<dir>: a V8 CPU profile of each worker process, for finding where time goes;
    // BENCH_WORKER_NODE_ARGS: more Node/V8 flags for it (diagnostics NODE_OPTIONS refuses, such as --trace-opt).
    execArgv: [
      '--expose-gc',
      ...(process.env.BENCH_WORKER_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
      ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
    ],
    env: { ...process.env, [WORKER_CONFIG_ENV]: JSON.stringify(config), PGAPPNAME: WORKER_APPLICATION_NAME },
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-20_000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const describe = () => `${config.adapter} worker process ${child.pid}`;
  const startListeners: Array<(seq: number, at: bigint, trace?: PickupTrace) => void> = [];
  const waiting = new Map<FromWorker['kind'], Array<(message: FromWorker) => void>>();
  let failure: string | null = null;
  child.on('message', (message: FromWorker) => {
    if (message.kind === 'started') {
      for (const listener of startListeners) listener(message.seq, BigInt(message.at), message.trace);
      return;
    }
    if (message.kind === 'failed') failure = message.error;
    const queue = waiting.get(message.kind);
    queue?.shift()?.(message);
  });

  /** Waits that an exit must fail, each until it settles: one exit listener for all of them. */
  const onExit = new Set<(code: number | null, signal: NodeJS.Signals | null) => void>();
  void exited.then(({ code, signal }) => {
    for (const fail of onExit) fail(code, signal);
  });
  const expect = <K extends FromWorker['kind']>(kind: K, timeoutMs: number): Promise<Extract<FromWorker, { kind: K }>> =>
    new Promise((resolve, reject) => {
      const settle = () => {
        clearTimeout(timer);
        onExit.delete(fail);
      };
      const fail = (code: number | null, signal: NodeJS.Signals | null) => {
        settle();
        reject(new Error(`${describe()} exited (code ${code}, signal ${signal}) while waiting for '${kind}': ${failure ?? ''}\n${stderr}`));
      };
      const timer = setTimeout(() => {
        settle();
        reject(new Error(`${describe()}: no '${kind}' within ${timeoutMs} ms\n${stderr}`));
      }, timeoutMs);
      const resolver = (message: FromWorker) => {
        settle();
        resolve(message as Extract<FromWorker, { kind: K }>);
      };
      const queue = waiting.get(kind) ?? [];
      queue.push(resolver);
      waiting.set(kind, queue);
      // Exited already: the child's own status says so (exitCode or signalCode is set on exit).
      if (child.exitCode !== null || child.signalCode !== null) fail(child.exitCode, child.signalCode);
      else onExit.add(fail);
    });
  const ask = <K extends FromWorker['kind']>(request: ToWorker, kind: K) => {
    const reply = expect(kind, REPLY_TIMEOUT_MS);
    child.send(request);
    return reply;
  };
  const kill = (child: ChildProcess) => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };

  let boot: MemoryReading;
  try {
    const ready = await expect('ready', BOOT_TIMEOUT_MS);
    boot = memoryReading(ready);
  } catch (error) {
    kill(child);
    throw error;
  }
  return {
    pid: child.pid!,
    boot,
    async memory() {
      return memoryReading(await ask({ kind: 'memory' }, 'memory'));
    },
    async runs() {
      return (await ask({ kind: 'runs' }, 'runs')).total;
    },
    async pickups() {
      return (await ask({ kind: 'pickup' }, 'pickup')).buckets;
    },
    onStarted(listener) {
      startListeners.push(listener);
      return () => {
        const index = startListeners.indexOf(listener);
        if (index >= 0) startListeners.splice(index, 1);
      };
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${describe()} had already exited: ${failure ?? ''}\n${stderr}`);
      }
      const timer = setTimeout(() => kill(child), STOP_TIMEOUT_MS);
      const stopped = expect('stopped', STOP_TIMEOUT_MS + 5_000).catch((error: Error) => error);
      child.send({ kind: 'stop' } satisfies ToWorker);
      const { code, signal } = await exited;
      clearTimeout(timer);
      const reply = await stopped;
      if (code !== 0 || reply instanceof Error) {
        throw new Error(`${describe()} did not stop cleanly (code ${code}, signal ${signal}): ${failure ?? ''}\n${stderr}`);
      }
      return {
        counts: new Uint8Array(Buffer.from(reply.counts, 'base64')),
        outOfRange: reply.outOfRange,
        firstStartAt: reply.firstStartAt === null ? null : BigInt(reply.firstStartAt),
      };
    },
    kill: () => kill(child),
  };
}

function memoryReading({ rss, heapUsed, heapTotal, youngGeneration, external, rssFile, rssAnon }: MemoryReading): MemoryReading {
  return { rss, heapUsed, heapTotal, youngGeneration, external, rssFile, rssAnon };
}
