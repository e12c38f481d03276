/** The demo's settings, read once from the environment at start-up. */
export interface DemoConfig {
  /** HTTP port. `PORT`, default 3000. */
  port: number;
  /** `DEMO_RUN_WORKER=false` makes a producer-only process (it enqueues, never claims). Default true. */
  runWorker: boolean;
  /** `DEMO_MAX_QUEUE_DEPTH`: waiting jobs at which POST /signups answers 503. Default unbounded. */
  maxQueueDepth: number | undefined;
}

export function readDemoConfig(env: NodeJS.ProcessEnv = process.env): DemoConfig {
  return {
    port: integer(env, 'PORT', 0, 65_535) ?? 3000,
    runWorker: boolean(env, 'DEMO_RUN_WORKER') ?? true,
    maxQueueDepth: integer(env, 'DEMO_MAX_QUEUE_DEPTH', 1, Number.MAX_SAFE_INTEGER),
  };
}

function integer(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max} (got "${raw}").`);
  }
  return value;
}

function boolean(env: NodeJS.ProcessEnv, name: string): boolean | undefined {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return undefined;
  if (['true', '1', 'yes'].includes(raw)) return true;
  if (['false', '0', 'no'].includes(raw)) return false;
  throw new Error(`${name} must be true or false (got "${env[name]}").`);
}
