import type { EngineLogger } from '../base/logger.js';
import type { OutcomeTally, TalliedOutcome } from '../base/outcome-tally.js';
import type { HandlerLookup, RegisteredHandler } from '../base/registered-handler.js';
import { createEngine, type EngineDependencies } from '../engine/create-engine.js';
import type { JobStore } from '../persistence/job.store.js';

/** What one drain ran: completions, failed attempts that will be retried, dead letters. */
export type DrainCounts = Record<TalliedOutcome, number>;

/** How often a drain looks whether work is left. */
const CHECK_EVERY_MS = 10;
/**
 * A drain ends once nothing ran for this long although jobs may be due: they are held back (an
 * ordering key behind a retry, a rate limit, an open circuit), and waiting for them could be forever.
 */
const STILL_FOR_MS = 250;

class CountingTally implements OutcomeTally {
  readonly counts: DrainCounts = { completed: 0, failed: 0, dead: 0 };
  count(_type: string, outcome: TalliedOutcome): void {
    this.counts[outcome]++;
  }
  get total(): number {
    return this.counts.completed + this.counts.failed + this.counts.dead;
  }
}

/**
 * `runWorker: 'manual'`: runs the due jobs of some types in this process until none is left,
 * through a real engine (claims, leases, outcomes) started for the drain and drained after it. Jobs
 * the handlers enqueue run too when they are due; retries wait for their delay, as always.
 */
export class ManualDrain {
  constructor(
    private readonly engineDependencies: Omit<EngineDependencies, 'handlers' | 'tally' | 'runSchedules'>,
    private readonly handlers: HandlerLookup,
    private readonly store: Pick<JobStore, 'countDue'>,
    private readonly logger: EngineLogger,
  ) {}

  async run(types: readonly string[]): Promise<DrainCounts> {
    const tally = new CountingTally();
    const { options } = this.engineDependencies;
    const engine = createEngine({
      ...this.engineDependencies,
      // Claims at once and starts what it claims: nothing waits in a buffer or for a poll.
      options: { ...options, runWorker: true, prefetch: 0, pollIntervalMs: Math.min(options.pollIntervalMs, CHECK_EVERY_MS) },
      handlers: only(this.handlers, types),
      tally,
      runSchedules: false,
    });
    engine.start();
    try {
      let lastTotal = -1;
      let stillSince = Date.now();
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, CHECK_EVERY_MS));
        const status = engine.status();
        // A claim on its way back has taken jobs that neither count nor countDue sees.
        if (tally.total !== lastTotal || status.inFlight > 0 || status.unstarted > 0 || status.claiming) {
          lastTotal = tally.total;
          stillSince = Date.now();
          continue;
        }
        if ((await this.store.countDue(types)) === 0) break;
        if (Date.now() - stillSince >= STILL_FOR_MS) {
          this.logger.log(`JobQueueTester.drain: jobs of ${types.join(', ')} are due but held back (ordering key, rate limit, circuit); stopping.`);
          break;
        }
      }
    } finally {
      await engine.drain();
    }
    return { ...tally.counts };
  }
}

function only(handlers: HandlerLookup, types: readonly string[]): HandlerLookup {
  const chosen = handlers.all().filter((handler) => types.includes(handler.type));
  const byType = new Map<string, RegisteredHandler>(chosen.map((handler) => [handler.type, handler]));
  return { get: (type) => byType.get(type), types: () => [...byType.keys()], all: () => chosen };
}
