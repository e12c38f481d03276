import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../build/test/fixtures/worker-app.js');

export interface ChildWorker {
  process: ChildProcess;
  pid: number;
  /** HTTP port when started with httpPort. */
  port: number;
  output(): string;
  /** Resolves with the exit code (or the signal name) once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): void;
  /** Sends SIGTERM and waits for the end; SIGKILL after the deadline. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts test/fixtures/worker-app.ts (compiled by `npm run build:apps`) as a real child process
 * and resolves once it printed READY.
 */
export async function spawnWorker(config: Record<string, unknown>, env: Record<string, string> = {}): Promise<ChildWorker> {
  const child = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, ...env, AJQ_FIXTURE: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start in time:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /READY (\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`worker exited before READY (code ${code}, signal ${signal}):\n${output}`));
    });
  });
  const worker: ChildWorker = {
    process: child,
    pid: child.pid!,
    port,
    output: () => output,
    exited,
    kill: (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    async stop(timeoutMs = 20_000) {
      worker.kill('SIGTERM');
      const timer = setTimeout(() => worker.kill('SIGKILL'), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
  return worker;
}
