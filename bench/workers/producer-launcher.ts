import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRODUCER_CONFIG_ENV, type FromProducer, type ProducerProcessConfig, type ToProducer } from './producer-protocol.js';

const ENTRY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'producer-process.js');
const REPLY_TIMEOUT_MS = 60_000;

export interface ProducerProcess {
  /** Starts enqueueing; resolves once the message is sent. */
  start(): void;
  progress(): Promise<{ enqueued: number; maxLagMs: number }>;
  /** Resolves when every job is enqueued. */
  readonly done: Promise<{ enqueued: number; seconds: number; maxLagMs: number }>;
  /** Closes its producer and waits for the process to end. */
  stop(): Promise<void>;
  kill(): void;
}

/** Forks bench/workers/producer-process.js and resolves once its producer is open. */
export async function launchProducerProcess(config: ProducerProcessConfig): Promise<ProducerProcess> {
  const child = fork(ENTRY, [], {
    env: { ...process.env, [PRODUCER_CONFIG_ENV]: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-20_000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // A message sent after the process has gone (an interrupted run) fails here, not as an unhandled event.
  child.on('error', () => undefined);
  const waiting = new Map<FromProducer['kind'], Array<(message: FromProducer) => void>>();
  let failure: ((error: Error) => void) | null = null;
  const failed = new Promise<never>((_, reject) => {
    failure = reject;
  });
  failed.catch(() => undefined);
  child.on('message', (message: FromProducer) => {
    if (message.kind === 'failed') failure?.(new Error(`producer process failed: ${message.error}`));
    waiting.get(message.kind)?.shift()?.(message);
  });
  void exited.then((code) => failure?.(new Error(`producer process exited (code ${code})\n${stderr}`)));
  const expect = <K extends FromProducer['kind']>(kind: K, timeoutMs: number | null): Promise<Extract<FromProducer, { kind: K }>> => {
    const reply = new Promise<Extract<FromProducer, { kind: K }>>((resolve, reject) => {
      const timer = timeoutMs === null ? null : setTimeout(() => reject(new Error(`producer process: no '${kind}' within ${timeoutMs} ms`)), timeoutMs);
      const queue = waiting.get(kind) ?? [];
      queue.push((message) => {
        if (timer) clearTimeout(timer);
        resolve(message as Extract<FromProducer, { kind: K }>);
      });
      waiting.set(kind, queue);
    });
    return Promise.race([reply, failed]);
  };
  const post = (message: ToProducer) => {
    if (child.connected) child.send(message);
  };
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  try {
    await expect('ready', REPLY_TIMEOUT_MS);
  } catch (error) {
    kill();
    throw error;
  }
  const done = expect('done', null);
  done.catch(() => undefined);
  return {
    start: () => post({ kind: 'start' }),
    async progress() {
      const reply = expect('progress', REPLY_TIMEOUT_MS);
      post({ kind: 'progress' });
      return reply;
    },
    done,
    async stop() {
      failure = null;
      post({ kind: 'stop' });
      await exited;
    },
    kill,
  };
}
