import type { QueueAdapter } from '../adapters/queue-adapter.js';
import type { ScenarioContext } from './scenario.js';

/** One system's part in an interleaved scenario: its time so far, and its first failure. */
export interface SystemTurns {
  adapter: QueueAdapter;
  seconds: number;
  error?: string;
}

/**
 * Runs `work` for each system in turn, starting with another system each round (so none is
 * always the first to run), and logs one line per turn set. A system that fails is left out of
 * the later turns; what its failed run left (worker processes, databases) is stopped first, so it
 * does not load the next system's run.
 */
export async function takeTurns<S extends SystemTurns>(
  systems: readonly S[],
  round: number,
  context: ScenarioContext,
  title: string,
  work: (system: S) => Promise<string>,
): Promise<void> {
  const line: string[] = [];
  for (const system of systems.map((_, i) => systems[(i + round - 1) % systems.length])) {
    if (system.error) continue;
    const started = Date.now();
    try {
      line.push(`${system.adapter.name} ${await work(system)}`);
    } catch (error) {
      system.error = String((error as Error)?.stack ?? error);
      line.push(`${system.adapter.name} failed: ${system.error.split('\n')[0]}`);
      await context.scope.close();
    } finally {
      system.seconds += (Date.now() - started) / 1000;
    }
  }
  context.log(`    ${title}: ${line.join('; ')}`);
}
