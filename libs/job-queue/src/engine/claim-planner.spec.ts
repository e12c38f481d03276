import { describe, expect, it } from 'vitest';
import type { ClaimRequest } from '../persistence/job.store.js';
import { ClaimPlanner, rateWindowMs, type TypeCapacity, type WorkerLoad } from './claim-planner.js';
import { PausedTypes } from './paused-types.js';

/** A planner as the worker makes one: no transactional limit and no prefetch unless given. */
function plannerOf(concurrency: number, types: readonly TypeCapacity[], workerId: string, leaseMs: number, transactionalCapacity = Infinity, prefetch = 0) {
  return new ClaimPlanner({ workerId, leaseMs, concurrency, transactionalCapacity, prefetch }, types);
}

/** The running-only load the planner saw before prefetch existed. */
function load(running: number, runningByType: ReadonlyMap<string, number>, runningTransactional = 0): WorkerLoad {
  return { running, runningByType, runningTransactional, buffered: 0, bufferedByType: new Map() };
}

const types: TypeCapacity[] = [
  { type: 'email.send', concurrency: 2, maxAttempts: 3 },
  { type: 'report.build', concurrency: 10, maxAttempts: 5 },
  { type: 'image.resize', concurrency: 4, maxAttempts: 1 },
];
const inFlight = (entries: Record<string, number> = {}) => new Map(Object.entries(entries));
const planner = () => plannerOf(5, types, 'worker-a', 30_000);

/** The per-type requests keyed by type; the planner may order them as it likes. */
function limits(plan: ClaimRequest | null): Record<string, number> {
  return Object.fromEntries((plan?.perType ?? []).map((entry) => [entry.type, entry.limit]));
}

describe('ClaimPlanner', () => {
  it('says how many of the claimed jobs start at once: the free slots, not the buffer’s room', () => {
    const prefetching = plannerOf(5, types, 'worker-a', 30_000, Infinity, 100);
    expect(prefetching.plan(load(2, inFlight({ 'report.build': 2 })))).toMatchObject({ limit: 103, startNow: 3 });
    expect(prefetching.plan(load(5, inFlight({ 'report.build': 5 })))).toMatchObject({ startNow: 0 });
  });

  it('asks for the free capacity when nothing runs, each type limited by its own concurrency', () => {
    const plan = planner().plan(load(0, inFlight()));
    expect(plan).toMatchObject({ workerId: 'worker-a', leaseMs: 30_000, limit: 5 });
    expect(plan?.perType).toHaveLength(3);
    expect(plan?.perType).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'email.send', limit: 2, maxAttempts: 3 }),
        expect.objectContaining({ type: 'report.build', limit: 5, maxAttempts: 5 }),
        expect.objectContaining({ type: 'image.resize', limit: 4, maxAttempts: 1 }),
      ]),
    );
  });

  it('subtracts what is in flight, overall and per type', () => {
    const plan = planner().plan(load(3, inFlight({ 'email.send': 1, 'image.resize': 2 })));
    expect(plan?.limit).toBe(2);
    expect(limits(plan)).toEqual({ 'email.send': 1, 'report.build': 2, 'image.resize': 2 });
  });

  it('never asks a type for more than the global free capacity', () => {
    const plan = planner().plan(load(4, inFlight({ 'report.build': 4 })));
    expect(plan?.limit).toBe(1);
    expect(limits(plan)).toEqual({ 'email.send': 1, 'report.build': 1, 'image.resize': 1 });
  });

  it('omits types already at their capacity', () => {
    expect(limits(planner().plan(load(4, inFlight({ 'email.send': 2, 'image.resize': 2 }))))).toEqual({
      'report.build': 1,
      'image.resize': 1,
    });
    expect(limits(planner().plan(load(4, inFlight({ 'email.send': 2, 'report.build': 0, 'image.resize': 4 }))))).toEqual({
      'report.build': 1,
    });
  });

  it('omits a type that is over its capacity (never a zero or negative limit)', () => {
    const plan = planner().plan(load(3, inFlight({ 'email.send': 3 })));
    expect(limits(plan)).not.toHaveProperty('email.send');
    for (const entry of plan!.perType) expect(entry.limit).toBeGreaterThan(0);
  });

  it('returns null when the worker is full', () => {
    expect(planner().plan(load(5, inFlight({ 'report.build': 5 })))).toBeNull();
    expect(planner().plan(load(6, inFlight({ 'report.build': 6 })))).toBeNull();
  });

  it('returns null when every type is at capacity although slots are free', () => {
    const small = plannerOf(10, [{ type: 'email.send', concurrency: 2, maxAttempts: 3 }], 'worker-a', 30_000);
    expect(small.plan(load(2, inFlight({ 'email.send': 2 })))).toBeNull();
  });

  it('claims no paused type, and all of them again once resumed', () => {
    const paused = new PausedTypes();
    const pausing = new ClaimPlanner({ workerId: 'w', leaseMs: 30_000, concurrency: 5, transactionalCapacity: Infinity, prefetch: 0 }, types, paused);
    expect(paused.replace(['email.send', 'image.resize'])).toEqual({ paused: ['email.send', 'image.resize'], resumed: [] });
    expect(limits(pausing.plan(load(0, inFlight())))).toEqual({ 'report.build': 5 });
    paused.replace(['email.send', 'image.resize', 'report.build']);
    expect(pausing.plan(load(0, inFlight()))).toBeNull();
    expect(paused.replace([])).toEqual({ paused: [], resumed: ['email.send', 'image.resize', 'report.build'] });
    expect(limits(pausing.plan(load(0, inFlight())))).toEqual({ 'email.send': 2, 'report.build': 5, 'image.resize': 4 });
  });

  it('returns null when there are no handler types', () => {
    expect(plannerOf(10, [], 'worker-a', 30_000).plan(load(0, inFlight()))).toBeNull();
  });

  describe('transactional types', () => {
    const mixed: TypeCapacity[] = [
      { type: 'ledger.post', concurrency: 5, maxAttempts: 3, transactional: true },
      { type: 'stock.move', concurrency: 5, maxAttempts: 3, transactional: true },
      { type: 'email.send', concurrency: 5, maxAttempts: 3 },
    ];

    it('share the transactional capacity between them; other types are unaffected', () => {
      const plan = plannerOf(10, mixed, 'worker-a', 30_000, 3).plan(load(0, inFlight(), 0));
      const byType = limits(plan);
      expect((byType['ledger.post'] ?? 0) + (byType['stock.move'] ?? 0)).toBe(3);
      expect(byType['email.send']).toBe(5);
    });

    it('are omitted while the transactional capacity is used up', () => {
      const plan = plannerOf(10, mixed, 'worker-a', 30_000, 3).plan(load(3, inFlight({ 'ledger.post': 3 }), 3));
      expect(limits(plan)).toEqual({ 'email.send': 5 });
    });

    it('take turns for a scarce capacity, so no transactional type starves', () => {
      const scarce = plannerOf(10, mixed, 'worker-a', 30_000, 1);
      const served = new Set<string>();
      for (let i = 0; i < mixed.length; i++) {
        const plan = scarce.plan(load(0, inFlight(), 0));
        const transactional = plan!.perType.filter((entry) => entry.type !== 'email.send');
        expect(transactional.reduce((sum, entry) => sum + entry.limit, 0)).toBe(1);
        for (const entry of transactional) served.add(entry.type);
      }
      expect(served).toEqual(new Set(['ledger.post', 'stock.move']));
    });

    it('have no extra limit by default', () => {
      const plan = plannerOf(10, mixed, 'worker-a', 30_000).plan(load(0, inFlight()));
      expect(limits(plan)).toEqual({ 'ledger.post': 5, 'stock.move': 5, 'email.send': 5 });
    });
  });
});

describe('ClaimPlanner flow limits', () => {
  it('passes rate limits (with the safety margin) and global concurrency through to the claim', () => {
    const planner = plannerOf(
      10,
      [
        { type: 'partner.call', concurrency: 10, maxAttempts: 3, rateLimit: { max: 20, perMs: 1000 }, globalConcurrency: 2 },
        { type: 'plain', concurrency: 10, maxAttempts: 3 },
      ],
      'w',
      30_000,
    );
    const plan = planner.plan(load(0, new Map()));
    const byType = Object.fromEntries(plan!.perType.map((t) => [t.type, t]));
    expect(byType['partner.call']).toMatchObject({ rateMax: 20, rateWindowMs: 1250, globalMax: 2 });
    expect(byType.plain).toMatchObject({ rateMax: null, rateWindowMs: null, globalMax: null });
  });

  it('passes groupConcurrency through as the group cap, only for the types that set it', () => {
    const planner = plannerOf(
      10,
      [
        { type: 'tenant.report', concurrency: 10, maxAttempts: 3, groupConcurrency: 2 },
        { type: 'plain', concurrency: 10, maxAttempts: 3 },
      ],
      'w',
      30_000,
    );
    const plan = planner.plan(load(0, new Map()));
    const byType = Object.fromEntries(plan!.perType.map((t) => [t.type, t]));
    expect(byType['tenant.report']).toMatchObject({ groupMax: 2 });
    expect(byType.plain.groupMax).toBeUndefined();
    expect(plan!.flowControl).toBe(true);
  });

  it('widens rate windows by a quarter, and by at most a second', () => {
    expect(rateWindowMs(100)).toBe(125);
    expect(rateWindowMs(1_000)).toBe(1_250);
    expect(rateWindowMs(60_000)).toBe(61_000);
  });
});

describe('ClaimPlanner with prefetch', () => {
  const twoTypes: TypeCapacity[] = [
    { type: 'a', concurrency: 10, maxAttempts: 3 },
    { type: 'b', concurrency: 5, maxAttempts: 3 },
  ];
  const planner = (concurrency = 10, types = twoTypes) => plannerOf(concurrency, types, 'w', 30_000, Infinity, 20);
  const loaded = (running: Record<string, number>, buffered: Record<string, number>): WorkerLoad => ({
    running: Object.values(running).reduce((a, b) => a + b, 0),
    runningByType: new Map(Object.entries(running)),
    runningTransactional: 0,
    buffered: Object.values(buffered).reduce((a, b) => a + b, 0),
    bufferedByType: new Map(Object.entries(buffered)),
  });

  it('asks for free slots plus the free part of the buffer, each type in proportion to its concurrency', () => {
    const plan = planner().plan(loaded({}, {}));
    expect(plan?.limit).toBe(30);
    expect(Object.fromEntries(plan!.perType.map((t) => [t.type, t.limit]))).toEqual({ a: 30, b: 15 });
  });

  it('counts buffered jobs against their type and the total', () => {
    const plan = planner().plan(loaded({ a: 10 }, { a: 20 }));
    expect(plan).toBeNull();
  });

  it('still serves a type whose share is free while another fills the buffer', () => {
    const plan = planner().plan(loaded({ a: 8 }, { a: 12 }));
    expect(plan?.limit).toBe(10);
    expect(Object.fromEntries(plan!.perType.map((t) => [t.type, t.limit]))).toEqual({ a: 10, b: 10 });
  });

  it('claims other types for free slots while the buffer holds more held-back jobs than the prefetch left', () => {
    const limited = planner(4, [
      { type: 'x', concurrency: 1, maxAttempts: 3 },
      { type: 'y', concurrency: 4, maxAttempts: 3 },
    ]);
    // One x runs and seven wait behind it; nothing finished lately, so the prefetch is down to none.
    const plan = limited.plan({ ...loaded({ x: 1 }, { x: 7 }), prefetch: 0 });
    expect(plan?.limit).toBe(3);
    expect(plan!.perType.map((t) => [t.type, t.limit])).toEqual([['y', 3]]);
  });

  it('caps each type’s share by its own rate, so a slow type keeps none waiting behind its running jobs', () => {
    const mixed = planner(10, [
      { type: 'a', concurrency: 9, maxAttempts: 3 },
      { type: 'b', concurrency: 1, maxAttempts: 3 },
    ]);
    const busy = (bPrefetch: number) =>
      mixed.plan({ ...loaded({ a: 9, b: 1 }, {}), prefetch: 20, prefetchByType: new Map([['a', 20], ['b', bPrefetch]]) });
    // The worker finishes 200 jobs/s (a prefetch of 20), all of them a's; b's one slot is taken by
    // a job that runs for seconds. b's share of the prefetch would be 2.
    const slow = busy(0);
    expect(slow?.limit).toBe(20);
    expect(slow!.perType.map((t) => [t.type, t.limit])).toEqual([['a', 18]]);
    // b finishing 10 jobs/s: about 100 ms of its work is one job.
    expect(Object.fromEntries(busy(1)!.perType.map((t) => [t.type, t.limit]))).toEqual({ a: 18, b: 1 });
  });

  it('keeps transactional jobs within the spare connections plus the prefetch, buffered ones included', () => {
    const types: TypeCapacity[] = [
      { type: 'ledger.post', concurrency: 10, maxAttempts: 3, transactional: true },
      { type: 'stock.move', concurrency: 10, maxAttempts: 3, transactional: true },
      { type: 'email.send', concurrency: 10, maxAttempts: 3 },
    ];
    const withConnections = plannerOf(10, types, 'w', 30_000, 7, 20);
    const load = (prefetch: number, buffered: Record<string, number>): WorkerLoad => ({
      ...loaded({ 'ledger.post': 7 }, buffered),
      runningTransactional: 7,
      prefetch,
    });
    // All seven connections in use and nothing finishing: the three free slots go to email only.
    const idle = withConnections.plan(load(0, {}));
    expect(idle?.limit).toBe(3);
    expect(idle!.perType.map((t) => t.type)).toEqual(['email.send']);
    // Jobs finishing: up to the prefetch may wait for a connection, those already waiting included.
    const busy = withConnections.plan(load(5, { 'stock.move': 2 }));
    const transactional = busy!.perType.filter((t) => t.type !== 'email.send');
    expect(transactional.reduce((sum, t) => sum + t.limit, 0)).toBe(3);
  });
});
