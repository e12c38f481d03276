import type { OutcomeTally, TalliedOutcome } from '../base/outcome-tally.js';
import type { OutcomeTallyRow } from '../persistence/job.store.js';

const MINUTE_MS = 60_000;

type Counts = Record<TalliedOutcome, number>;

/**
 * Outcomes per minute and type, counted in memory as they happen and taken by the heartbeat,
 * which adds them to the database's rollup in one statement: the hot path gains a map update, not
 * a write. A process killed between two heartbeats loses the counts of that interval.
 */
export class ThroughputTally implements OutcomeTally {
  private minute = -1;
  private current = new Map<string, Counts>();
  /** Counts of minutes that ended since the last take. */
  private earlier: OutcomeTallyRow[] = [];

  constructor(private readonly clock: () => number = Date.now) {}

  count(type: string, outcome: TalliedOutcome): void {
    const minute = Math.floor(this.clock() / MINUTE_MS);
    if (minute !== this.minute) this.closeMinute(minute);
    let counts = this.current.get(type);
    if (!counts) this.current.set(type, (counts = { completed: 0, failed: 0, dead: 0 }));
    counts[outcome]++;
  }

  /** Everything counted so far, in (minute, type) order, and forgotten here. */
  take(): OutcomeTallyRow[] {
    this.closeMinute(this.minute);
    const rows = this.earlier;
    this.earlier = [];
    return merged(rows);
  }

  /** Rows a failed write did not store: counted again with the next take. */
  putBack(rows: readonly OutcomeTallyRow[]): void {
    this.earlier.push(...rows);
  }

  private closeMinute(next: number): void {
    for (const [type, counts] of this.current) this.earlier.push({ minute: this.minute, type, ...counts });
    this.current = new Map();
    this.minute = next;
  }
}

/** One row per (minute, type), sorted: every process locks the rollup's rows in the same order. */
function merged(rows: readonly OutcomeTallyRow[]): OutcomeTallyRow[] {
  const byKey = new Map<string, OutcomeTallyRow>();
  for (const row of rows) {
    const key = `${row.minute}\u0000${row.type}`;
    const seen = byKey.get(key);
    if (seen) {
      seen.completed += row.completed;
      seen.failed += row.failed;
      seen.dead += row.dead;
    } else {
      byKey.set(key, { ...row });
    }
  }
  return [...byKey.values()].sort((a, b) => a.minute - b.minute || (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}
