import { describe, expect, it } from 'vitest';
import { ClaimPlanner, type TypeCapacity } from './claim-planner.js';

const types: TypeCapacity[] = [
  { type: 'email.send', concurrency: 2, maxAttempts: 3 },
  { type: 'report.build', concurrency: 10, maxAttempts: 5 },
  { type: 'image.resize', concurrency: 4, maxAttempts: 1 },
];
const planner = new ClaimPlanner(5, types, 'worker-a', 30_000);
const inFlight = (entries: Record<string, number> = {}) => new Map(Object.entries(entries));

describe('ClaimPlanner', () => {
  it('asks for the free capacity when nothing runs, each type limited by its own concurrency', () => {
    expect(planner.plan(0, inFlight())).toEqual({
      workerId: 'worker-a',
      leaseMs: 30_000,
      limit: 5,
      perType: [
        { type: 'email.send', limit: 2, maxAttempts: 3 },
        { type: 'report.build', limit: 5, maxAttempts: 5 },
        { type: 'image.resize', limit: 4, maxAttempts: 1 },
      ],
    });
  });

  it('subtracts what is in flight, overall and per type', () => {
    const plan = planner.plan(3, inFlight({ 'email.send': 1, 'image.resize': 2 }));
    expect(plan?.limit).toBe(2);
    expect(plan?.perType).toEqual([
      { type: 'email.send', limit: 1, maxAttempts: 3 },
      { type: 'report.build', limit: 2, maxAttempts: 5 },
      { type: 'image.resize', limit: 2, maxAttempts: 1 },
    ]);
  });

  it('never asks a type for more than the global free capacity', () => {
    const plan = planner.plan(4, inFlight({ 'report.build': 4 }));
    expect(plan?.limit).toBe(1);
    for (const entry of plan!.perType) expect(entry.limit).toBeLessThanOrEqual(1);
  });

  it('omits types already at their capacity', () => {
    const plan = planner.plan(4, inFlight({ 'email.send': 2, 'image.resize': 2 }));
    expect(plan?.perType.map((entry) => entry.type)).toEqual(['report.build', 'image.resize']);
    const none = planner.plan(4, inFlight({ 'email.send': 2, 'report.build': 0, 'image.resize': 4 }));
    expect(none?.perType).toEqual([{ type: 'report.build', limit: 1, maxAttempts: 5 }]);
  });

  it('omits a type that is over its capacity (never a negative limit)', () => {
    const plan = planner.plan(3, inFlight({ 'email.send': 3 }));
    expect(plan?.perType.find((entry) => entry.type === 'email.send')).toBeUndefined();
  });

  it('returns null when the worker is full', () => {
    expect(planner.plan(5, inFlight({ 'report.build': 5 }))).toBeNull();
    expect(planner.plan(6, inFlight({ 'report.build': 6 }))).toBeNull();
  });

  it('returns null when every type is at capacity although slots are free', () => {
    const small = new ClaimPlanner(10, [{ type: 'email.send', concurrency: 2, maxAttempts: 3 }], 'worker-a', 30_000);
    expect(small.plan(2, inFlight({ 'email.send': 2 }))).toBeNull();
  });

  it('returns null when there are no handler types', () => {
    expect(new ClaimPlanner(10, [], 'worker-a', 30_000).plan(0, inFlight())).toBeNull();
  });
});
