import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { JobStore, Lease, RenewalResult } from '../persistence/job.store.js';
import type { JobStatus } from '../base/job-status.js';
import type { EngineLogger } from '../base/logger.js';
import { LeaseKeeper, type HeldLease, type LeaseHolder } from './lease-keeper.js';

const LEASE_MS = 30_000;

/** In-memory stand-in for renewLeases: a lease is held while its row is processing under the same token. */
class FakeStore {
  readonly rows = new Map<string, { status: JobStatus; leaseToken: string | null }>();
  readonly renewals: Array<{ ids: string[]; leaseMs: number }> = [];
  error: Error | null = null;
  /** Runs while the statement is "in flight", e.g. to move the clock. */
  during: () => void = () => undefined;
  /** Set: the statement answers only once this settles (a hung connection). */
  hang: Promise<void> | null = null;

  async renewLeases(leases: readonly Lease[], leaseMs: number): Promise<RenewalResult[]> {
    this.renewals.push({ ids: leases.map((lease) => lease.id), leaseMs });
    this.during();
    if (this.hang) await this.hang;
    if (this.error) throw this.error;
    return leases.map((lease) => {
      const row = this.rows.get(lease.id);
      const held = row?.status === 'processing' && row.leaseToken === lease.leaseToken;
      return { id: lease.id, held, status: held ? null : (row?.status ?? null) };
    });
  }
}

let now: number;
let store: FakeStore;
let leases: HeldLease[];
let gone: Array<{ id: string; status: JobStatus | null }>;
let warnings: string[];
let keeper: LeaseKeeper;
/** What the holder was asked to hand back, and in which order against the renewals. */
let handBacks: Array<{ waitedMs: number; afterRenewals: number }>;

beforeEach(() => {
  now = 1_000_000;
  store = new FakeStore();
  leases = [];
  gone = [];
  warnings = [];
  handBacks = [];
  const holder: LeaseHolder = {
    handBackWaiting: async (waitedMs) => {
      handBacks.push({ waitedMs, afterRenewals: store.renewals.length });
      return 0;
    },
    heldLeases: () => leases,
    leaseGone: (lease, status) => {
      // The holder is told which lease (token included) is gone, not only which job.
      expect(leases).toContain(lease);
      gone.push({ id: lease.id, status });
    },
  };
  const logger: EngineLogger = { log: () => undefined, warn: (m) => warnings.push(m), error: () => undefined };
  keeper = new LeaseKeeper(store as unknown as JobStore, LEASE_MS, holder, logger, () => now);
});

function hold(id: string, renewedAt: number, row: { status: JobStatus; leaseToken: string | null } = { status: 'processing', leaseToken: `t-${id}` }) {
  leases.push({ id, leaseToken: `t-${id}`, renewedAt });
  store.rows.set(id, row);
}

describe('LeaseKeeper', () => {
  it('does nothing when no lease is held', async () => {
    expect(await keeper.runOnce()).toEqual({ renewed: 0, lost: 0, handedBack: 0 });
    expect(store.renewals).toEqual([]);
  });

  it('renews every held lease in one call, with leaseMs', async () => {
    hold('1', now - 10_000);
    hold('2', now - 20_000);
    expect(await keeper.runOnce()).toEqual({ renewed: 2, lost: 0, handedBack: 0 });
    expect(store.renewals).toEqual([{ ids: ['1', '2'], leaseMs: LEASE_MS }]);
    expect(gone).toEqual([]);
  });

  it('stamps renewed leases with the time the renewal started, not when it answered', async () => {
    hold('1', now - 10_000);
    const startedAt = now;
    store.during = () => (now += 5_000);
    await keeper.runOnce();
    expect(leases[0].renewedAt).toBe(startedAt);
  });

  it('reports leases the database no longer grants, with the job’s status', async () => {
    hold('1', now - 1_000);
    hold('2', now - 1_000, { status: 'processing', leaseToken: 'another-worker' });
    hold('3', now - 1_000, { status: 'pending', leaseToken: null });
    expect(await keeper.runOnce()).toEqual({ renewed: 1, lost: 2, handedBack: 0 });
    expect(gone).toEqual([
      { id: '2', status: 'processing' },
      { id: '3', status: 'pending' },
    ]);
    expect(leases.find((lease) => lease.id === '2')?.renewedAt).toBe(now - 1_000);
  });

  it('reports a cancelled job with status cancelled, so its handler can be told why', async () => {
    hold('1', now - 1_000, { status: 'cancelled', leaseToken: null });
    expect(await keeper.runOnce()).toEqual({ renewed: 0, lost: 1, handedBack: 0 });
    expect(gone).toEqual([{ id: '1', status: 'cancelled' }]);
  });

  describe('when the store fails', () => {
    beforeEach(() => {
      store.error = new Error('connection refused');
    });

    it('presumes lost only leases not confirmed for a whole leaseMs, with an unknown status', async () => {
      hold('fresh', now - 1_000);
      hold('almost', now - LEASE_MS + 1);
      hold('exactly', now - LEASE_MS);
      hold('stale', now - 2 * LEASE_MS);
      expect(await keeper.runOnce()).toEqual({ renewed: 0, lost: 2, handedBack: 0 });
      expect(gone).toEqual([
        { id: 'exactly', status: null },
        { id: 'stale', status: null },
      ]);
      expect(warnings.some((message) => message.includes('connection refused'))).toBe(true);
    });

    it('does not throw and keeps the old renewal times', async () => {
      hold('1', now - 1_000);
      await expect(keeper.runOnce()).resolves.toEqual({ renewed: 0, lost: 0, handedBack: 0 });
      expect(leases[0].renewedAt).toBe(now - 1_000);
    });

    it('measures staleness at the time the failure is seen', async () => {
      hold('1', now - 20_000);
      store.during = () => (now += 15_000); // the failing call itself took 15 s
      expect(await keeper.runOnce()).toEqual({ renewed: 0, lost: 1, handedBack: 0 });
      expect(gone).toEqual([{ id: '1', status: null }]);
    });

    it('by its default clock, presumes nothing lost when the wall clock steps forward', async () => {
      // Only the wall clock is faked (Date), from before the keeper exists, so a step can be made.
      vi.useFakeTimers({ toFake: ['Date'] });
      try {
        const holder: LeaseHolder = {
          handBackWaiting: async () => 0,
          heldLeases: () => leases,
          leaseGone: (lease, status) => gone.push({ id: lease.id, status }),
        };
        const logger: EngineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };
        const realKeeper = new LeaseKeeper(store as unknown as JobStore, LEASE_MS, holder, logger);
        store.error = null;
        hold('1', 0);
        expect(await realKeeper.runOnce()).toEqual({ renewed: 1, lost: 0, handedBack: 0 });
        // The database goes away, and the wall clock jumps two leases ahead (NTP, a resumed VM).
        store.error = new Error('connection refused');
        vi.setSystemTime(Date.now() + 2 * LEASE_MS);
        expect(await realKeeper.runOnce()).toEqual({ renewed: 0, lost: 0, handedBack: 0 });
        expect(gone).toEqual([]);
      } finally {
        vi.useRealTimers();
      }
    });

    it('recovers on the next pass once the store answers again', async () => {
      hold('1', now - 1_000);
      await keeper.runOnce();
      store.error = null;
      now += 5_000;
      expect(await keeper.runOnce()).toEqual({ renewed: 1, lost: 0, handedBack: 0 });
      expect(leases[0].renewedAt).toBe(now);
    });
  });

  describe('when a renewal hangs', () => {
    /**
     * Two leases, one 20 ms from running out, renewed in a pass whose statement answers (or fails)
     * only when the test says so; the hand clock is then moved past the first one's end, and the
     * keeper's timer fires on its own (20 ms of real time).
     */
    async function passWithHungRenewal() {
      const soonRenewedAt = now - LEASE_MS + 20;
      hold('soon', soonRenewedAt);
      hold('later', now - 1_000);
      let answer!: () => void;
      store.hang = new Promise<void>((resolve) => (answer = resolve));
      const startedAt = now;
      const pass = keeper.runOnce();
      now += 20;
      await vi.waitFor(() => expect(gone).toEqual([{ id: 'soon', status: null }]));
      return { answer, pass, soonRenewedAt, startedAt };
    }

    it('presumes each of its leases lost as its leaseMs runs out, without waiting for the answer', async () => {
      const { answer, pass, soonRenewedAt, startedAt } = await passWithHungRenewal();
      // The answer comes at last: the other lease is renewed, and the one reported stays reported, once.
      answer();
      expect(await pass).toEqual({ renewed: 1, lost: 1, handedBack: 0 });
      expect(gone).toEqual([{ id: 'soon', status: null }]);
      expect(leases.find((lease) => lease.id === 'soon')?.renewedAt).toBe(soonRenewedAt);
      expect(leases.find((lease) => lease.id === 'later')?.renewedAt).toBe(startedAt);
    });

    it('reports no lease twice when the renewal fails in the end', async () => {
      const { answer, pass } = await passWithHungRenewal();
      store.error = new Error('connection reset');
      answer();
      expect(await pass).toEqual({ renewed: 0, lost: 1, handedBack: 0 });
      expect(gone).toEqual([{ id: 'soon', status: null }]);
    });
  });

  describe('handing back unstarted jobs', () => {
    it('after renewing, asks the holder to hand back what waited leaseMs / 3 since its claim', async () => {
      hold('1', now - 1_000);
      await keeper.runOnce();
      expect(handBacks).toEqual([{ waitedMs: LEASE_MS / 3, afterRenewals: 1 }]);
    });

    it('asks even with nothing to renew, reporting how many went back, but not while renewals fail', async () => {
      const holder: LeaseHolder = { heldLeases: () => leases, leaseGone: () => undefined, handBackWaiting: async () => 3 };
      const counting = new LeaseKeeper(store as unknown as JobStore, LEASE_MS, holder, { log() {}, warn() {}, error() {} }, () => now);
      expect(await counting.runOnce()).toEqual({ renewed: 0, lost: 0, handedBack: 3 });
      hold('1', now - 1_000);
      store.error = new Error('connection refused');
      expect(await counting.runOnce()).toEqual({ renewed: 0, lost: 0, handedBack: 0 });
    });

    it('waits at least a second, however short the lease', async () => {
      let asked: number | null = null;
      const holder: LeaseHolder = {
        heldLeases: () => leases,
        leaseGone: () => undefined,
        handBackWaiting: async (waitedMs) => ((asked = waitedMs), 0),
      };
      await new LeaseKeeper(store as unknown as JobStore, 600, holder, { log() {}, warn() {}, error() {} }, () => now).runOnce();
      expect(asked).toBe(1_000);
    });
  });
});
