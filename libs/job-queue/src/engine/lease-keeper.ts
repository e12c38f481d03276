import type { JobStore, Lease } from '../persistence/job.store.js';
import type { JobStatus } from '../base/job-status.js';
import type { EngineLogger } from '../base/logger.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import { MAX_TIMER_MS } from './max-timer.js';

/** A lease the keeper renews, with the last time the database confirmed it. */
export interface HeldLease extends Lease {
  renewedAt: number;
}

export interface LeaseHolder {
  heldLeases(): HeldLease[];
  /** The lease is gone: `status` is the job's status now (`cancelled`, or null when unknown). */
  leaseGone(lease: Lease, status: JobStatus | null): void;
  /** Hands back claimed jobs still not started `waitedMs` after their claim; resolves to how many went. */
  handBackWaiting(waitedMs: number): Promise<number>;
}

/** A very short lease must not hand back jobs a healthy worker is about to run. */
const HAND_BACK_FLOOR_MS = 1_000;

/**
 * Renews every lease the worker holds, one statement per pass (every leaseMs/3), and reports those
 * the database no longer grants. While the database is unreachable, a lease not confirmed for a
 * whole leaseMs is presumed lost: the reaper may have taken it. After renewing, the holder hands
 * back jobs still not started leaseMs/3 (at least 1 s) after their claim: the buffer holds about
 * 100 ms of work, so such a wait means this worker cannot start them soon.
 */
export class LeaseKeeper {
  private readonly handBackAfterMs: number;

  constructor(
    private readonly store: JobStore,
    private readonly leaseMs: number,
    private readonly holder: LeaseHolder,
    private readonly logger: EngineLogger,
    private readonly now: () => number = monotonicNow,
  ) {
    this.handBackAfterMs = Math.max(HAND_BACK_FLOOR_MS, Math.floor(leaseMs / 3));
  }

  async runOnce(): Promise<{ renewed: number; lost: number; handedBack: number }> {
    const renewal = await this.renew();
    // Not while the database is away: the hand-back would fail too. The holder catches its own
    // failures, and a failed hand-back keeps its jobs, renewed, for the next pass.
    const handedBack = renewal.failed ? 0 : await this.holder.handBackWaiting(this.handBackAfterMs);
    return { renewed: renewal.renewed, lost: renewal.lost, handedBack };
  }

  private async renew(): Promise<{ renewed: number; lost: number; failed: boolean }> {
    const leases = this.holder.heldLeases();
    if (leases.length === 0) return { renewed: 0, lost: 0, failed: false };
    const startedAt = this.now();
    /** Reported gone while the renewal was out: its answer no longer concerns them. */
    const gone = new Set<HeldLease>();
    const stopWatching = this.presumeLostAsTheyExpire(leases, gone);
    try {
      const results = await this.store.renewLeases(leases, this.leaseMs);
      stopWatching();
      const byId = new Map(leases.map((lease) => [lease.id, lease]));
      let lost = gone.size;
      for (const result of results) {
        const lease = byId.get(result.id);
        if (!lease || gone.has(lease)) continue;
        if (result.held) {
          lease.renewedAt = startedAt;
        } else {
          lost++;
          this.holder.leaseGone(lease, result.status);
        }
      }
      return { renewed: results.length - lost, lost, failed: false };
    } catch (error) {
      stopWatching();
      this.logger.warn(`Lease renewal failed: ${(error as Error)?.message ?? error}`);
      for (const lease of leases) {
        if (!gone.has(lease) && this.now() - lease.renewedAt >= this.leaseMs) {
          gone.add(lease);
          this.holder.leaseGone(lease, null);
        }
      }
      return { renewed: 0, lost: gone.size, failed: true };
    }
  }

  /**
   * While a renewal is out, reports each of its leases gone once a whole leaseMs has passed since
   * the database last confirmed it (the reaper may have handed its job on by then), so a renewal
   * that hangs (the database unreachable, no free connection) cannot keep handlers running past
   * their leases. Returns the function that stops watching.
   */
  private presumeLostAsTheyExpire(leases: readonly HeldLease[], gone: Set<HeldLease>): () => void {
    let timer: ReturnType<typeof setTimeout> | null = null;
    const arm = () => {
      let soonest = Infinity;
      for (const lease of leases) if (!gone.has(lease)) soonest = Math.min(soonest, lease.renewedAt + this.leaseMs);
      if (soonest === Infinity) return;
      timer = setTimeout(check, Math.min(MAX_TIMER_MS, Math.max(0, soonest - this.now())));
      timer.unref?.();
    };
    const check = () => {
      timer = null;
      for (const lease of leases) {
        if (!gone.has(lease) && this.now() - lease.renewedAt >= this.leaseMs) {
          gone.add(lease);
          try {
            this.holder.leaseGone(lease, null);
          } catch (error) {
            // A timer's callback: a throw here would end the process.
            this.logger.error(`Could not stop the attempt of job ${lease.id} after its lease ran out: ${(error as Error)?.message ?? error}`);
          }
        }
      }
      arm();
    };
    arm();
    return () => {
      if (timer) clearTimeout(timer);
      timer = null;
    };
  }
}
