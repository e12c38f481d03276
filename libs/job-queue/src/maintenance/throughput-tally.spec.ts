import { describe, expect, it } from 'vitest';
import { ThroughputTally } from './throughput-tally.js';

describe('ThroughputTally', () => {
  it('counts outcomes per minute and type, and hands them over once, sorted by minute then type', () => {
    let now = 10 * 60_000 + 5_000;
    const tally = new ThroughputTally(() => now);
    tally.count('b', 'completed');
    tally.count('a', 'completed');
    tally.count('a', 'failed');
    now += 60_000;
    tally.count('a', 'dead');
    tally.count('a', 'completed');
    expect(tally.take()).toEqual([
      { minute: 10, type: 'a', completed: 1, failed: 1, dead: 0 },
      { minute: 10, type: 'b', completed: 1, failed: 0, dead: 0 },
      { minute: 11, type: 'a', completed: 1, failed: 0, dead: 1 },
    ]);
    expect(tally.take()).toEqual([]);
  });

  it('keeps the rows of a failed write for the next take, merged with what came since', () => {
    const tally = new ThroughputTally(() => 5 * 60_000);
    tally.count('a', 'completed');
    const rows = tally.take();
    tally.putBack(rows);
    tally.count('a', 'completed');
    tally.count('a', 'failed');
    expect(tally.take()).toEqual([{ minute: 5, type: 'a', completed: 2, failed: 1, dead: 0 }]);
  });
});
