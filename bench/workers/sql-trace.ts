import pg from 'pg';

interface StatementStats {
  calls: number;
  totalMs: number;
}

/**
 * Diagnostic (BENCH_TRACE_SQL=1): counts every statement this process sends through node-postgres
 * (every system here uses it) with its client-side round-trip time, to show where a worker's time
 * goes per job. Not used for the benchmark's numbers.
 */
export interface SqlTrace {
  summary(jobs: number): string;
  /** When the last NOTIFY arrived, and the last statement that completed (for latency breakdowns). */
  lastEvents(): PickupTrace;
}

/** Monotonic ns as strings (JSON carries no bigint). */
export interface PickupTrace {
  notifiedAt: string | null;
  statement: string | null;
  statementSentAt: string | null;
  statementDoneAt: string | null;
}

export function traceSql(): SqlTrace {
  const stats = new Map<string, StatementStats>();
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown; emit: (...args: unknown[]) => boolean };
  const original = proto.query;
  const originalEmit = proto.emit;
  let notifiedAt: bigint | null = null;
  let last: { key: string; sentAt: bigint; doneAt: bigint } | null = null;
  proto.emit = function tracedEmit(this: unknown, event: unknown, ...args: unknown[]) {
    if (event === 'notification') notifiedAt = process.hrtime.bigint();
    return originalEmit.call(this, event, ...args);
  };
  const record = (key: string, started: bigint) => {
    const doneAt = process.hrtime.bigint();
    const entry = stats.get(key) ?? { calls: 0, totalMs: 0 };
    entry.calls++;
    entry.totalMs += Number(doneAt - started) / 1e6;
    stats.set(key, entry);
    last = { key, sentAt: started, doneAt };
  };
  proto.query = function tracedQuery(this: unknown, config: unknown, values?: unknown, callback?: unknown) {
    const key = statementKey(config);
    const started = process.hrtime.bigint();
    const done = () => record(key, started);
    if (typeof values === 'function') {
      const inner = values as (...a: unknown[]) => void;
      return original.call(this, config, (...a: unknown[]) => (done(), inner(...a)), callback);
    }
    if (typeof callback === 'function') {
      const inner = callback as (...a: unknown[]) => void;
      return original.call(this, config, values, (...a: unknown[]) => (done(), inner(...a)));
    }
    const submittable = config as { submit?: unknown; callback?: (...a: unknown[]) => void } | null;
    if (submittable && typeof submittable.submit === 'function' && typeof submittable.callback === 'function') {
      const inner = submittable.callback;
      submittable.callback = (...a: unknown[]) => (done(), inner(...a));
      return original.call(this, config, values, callback);
    }
    const result = original.call(this, config, values, callback) as { then?: (a: () => void, b: () => void) => unknown } | undefined;
    if (result && typeof result.then === 'function') result.then(done, done);
    return result;
  };
  return {
    lastEvents() {
      const l = last as { key: string; sentAt: bigint; doneAt: bigint } | null;
      return {
        notifiedAt: notifiedAt === null ? null : String(notifiedAt),
        statement: l ? l.key.slice(0, 60) : null,
        statementSentAt: l ? String(l.sentAt) : null,
        statementDoneAt: l ? String(l.doneAt) : null,
      };
    },
    summary(jobs) {
      const rows = [...stats.entries()].sort((a, b) => b[1].totalMs - a[1].totalMs);
      const lines = [`  ${'calls'.padStart(8)} ${'per job'.padStart(8)} ${'total ms'.padStart(10)} ${'mean ms'.padStart(8)}  statement`];
      for (const [key, { calls, totalMs }] of rows) {
        const perJob = (jobs ? calls / jobs : 0).toFixed(3);
        const mean = (totalMs / calls).toFixed(2);
        lines.push(`  ${String(calls).padStart(8)} ${perJob.padStart(8)} ${totalMs.toFixed(0).padStart(10)} ${mean.padStart(8)}  ${key}`);
      }
      return lines.join('\n');
    },
  };
}

function statementKey(config: unknown): string {
  const { text, name } =
    typeof config === 'string' ? { text: config, name: undefined } : ((config ?? {}) as { text?: string; name?: string });
  const flat = (text ?? '(no text)').replace(/\s+/g, ' ').trim();
  return `${name ? `[${name}] ` : ''}${flat.length > 110 ? `${flat.slice(0, 110)}…` : flat}`;
}
