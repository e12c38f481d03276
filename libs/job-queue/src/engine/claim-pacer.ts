import { monotonicNow } from '../base/monotonic-clock.js';
import type { ClaimedJob, ClaimRequest } from '../persistence/job.store.js';
import type { ClaimBuffer } from './claim-buffer.js';
import type { ClaimPlanner, WorkerLoad } from './claim-planner.js';
import type { PrefetchSizer } from './prefetch-sizer.js';
import type { SlotLedger } from './slot-ledger.js';

export interface PacerSettings {
  readonly concurrency: number;
  readonly prefetch: number;
  readonly pollIntervalMs: number;
}

/** A full worker tops its buffer up once it is down to this share of its size. */
const LOW_WATER = 0.1;
/** A claim sent ahead is planned as if the buffer had already run. */
const NOTHING_BUFFERED: ReadonlyMap<string, number> = new Map();

/**
 * When the worker claims, and (through the planner) how much: for a free slot, or to top up a
 * buffer down to its low-water mark; not while outcomes fall behind, nor while the last claim
 * said the queue is empty. See docs/decisions/0021-claim-pacing.md.
 */
export class ClaimPacer {
  /** Outcomes still being written, at most, before claims pause: a backlog must not outlive its leases. */
  readonly recordingLimit: number;
  private readonly lowWater: number;
  // Monotonic, not the worker's `now`: it pairs with the poll's real timer.
  private lastClaimAt = -Infinity;
  private queueLooksEmpty = false;
  /**
   * Types whose last claim came back full. A claim for several types can come back short for one
   * while another, held to a few slots by its concurrency, has plenty: its freed slot claims at once.
   */
  private readonly typesWithMore = new Set<string>();
  /**
   * Types whose claims count their running jobs (globalConcurrency, groupConcurrency): a claim
   * comes back short while some of them are still counted, so a recorded outcome may make room.
   */
  private readonly countedTypes = new Set<string>();
  /** Outcomes of counted types recorded so far, and how many when the last claim was planned. */
  private countedOutcomes = 0;
  private countedOutcomesAtPlan = 0;

  constructor(
    private readonly settings: PacerSettings,
    private readonly slots: SlotLedger,
    private readonly buffer: ClaimBuffer,
    private readonly sizer: PrefetchSizer,
    private readonly planner: ClaimPlanner,
  ) {
    this.recordingLimit = 2 * Math.max(settings.concurrency, settings.prefetch);
    this.lowWater = settings.prefetch * LOW_WATER;
  }

  /** The last claim found less than it asked for, and nothing since says otherwise. */
  get looksEmpty(): boolean {
    return this.queueLooksEmpty;
  }

  /** The claim to send now, if any; `recording`: outcomes still being written. */
  plan(recording: number): ClaimRequest | null {
    if (!this.wantsToClaim(recording)) return null;
    this.countedOutcomesAtPlan = this.countedOutcomes;
    return this.planner.plan(this.load());
  }

  /**
   * The claim to send before the batch just claimed runs, planned as if it had run (attempts being
   * handed back keep their room): only once the rate meter has seen short jobs, and not while
   * outcomes fall behind.
   */
  planAhead(recording: number): ClaimRequest | null {
    if (this.sizer.total() <= this.settings.concurrency || recording >= this.recordingLimit) return null;
    const request = this.planner.plan({ ...this.load(), buffered: this.buffer.returningCount, bufferedByType: NOTHING_BUFFERED });
    // Its jobs land behind the batch just claimed, in the buffer: each is charged as it starts.
    return request && { ...request, startNow: 0 };
  }

  /**
   * Whether to claim now; `recording`: outcomes still being written. Every slot taken, it claims
   * only while jobs finish, so a worker whose handlers all hang claims nothing it could not start.
   */
  wantsToClaim(recording: number): boolean {
    const slotsFree = this.slots.hasFreeSlot;
    // Cheapest tests first: this runs each time a job finishes.
    if ((!slotsFree && this.buffer.size > this.lowWater) || recording >= this.recordingLimit) return false;
    if (this.queueLooksEmpty && monotonicNow() - this.lastClaimAt < this.settings.pollIntervalMs) return false;
    if (slotsFree) return true;
    const target = this.sizer.total();
    return target > 0 && this.buffer.size <= target * LOW_WATER;
  }

  /** A notification, or the poll ran out: there may be work. */
  mayHaveWork(): void {
    this.queueLooksEmpty = false;
  }

  /** An attempt's outcome is written: for a type whose running jobs are counted, there is room again. */
  outcomeRecorded(type: string): void {
    if (this.countedTypes.size === 0 || !this.countedTypes.has(type)) return;
    this.countedOutcomes++;
    this.queueLooksEmpty = false;
  }

  slotFreed(type: string): void {
    if (this.typesWithMore.size > 0 && this.typesWithMore.has(type)) this.queueLooksEmpty = false;
  }

  /** A claim came back; returns whether it came back full. `nudged`: a notification came while it was out. */
  claimAnswered(request: ClaimRequest, claimed: readonly ClaimedJob[], nudged: boolean): boolean {
    this.lastClaimAt = monotonicNow();
    this.noteTypesWithMore(request, claimed);
    for (const t of request.perType) if (t.globalMax != null || t.groupMax != null) this.countedTypes.add(t.type);
    const asked = Math.min(request.limit, request.perType.reduce((sum, t) => sum + t.limit, 0));
    // A grouped claim comes back short whenever its groups are few or full (ClaimQuery.groupedText):
    // only one that found nothing says the queue is empty.
    const grouped = request.perType.some((t) => t.groupMax != null);
    // An outcome of a counted type recorded while the claim was out: its count came too early.
    const raced = this.countedOutcomes !== this.countedOutcomesAtPlan;
    this.queueLooksEmpty = (grouped ? claimed.length === 0 : claimed.length < asked) && !nudged && !raced;
    return claimed.length >= asked;
  }

  private load(): WorkerLoad {
    const { slots, buffer, sizer } = this;
    return {
      running: slots.running,
      runningByType: slots.runningByType,
      runningTransactional: slots.runningTransactional,
      buffered: buffer.size,
      bufferedByType: buffer.byType,
      prefetch: sizer.total(),
      prefetchByType: sizer.perType(),
    };
  }

  private noteTypesWithMore(request: ClaimRequest, claimed: readonly ClaimedJob[]): void {
    const note = (type: string, count: number, limit: number) =>
      count >= Math.min(limit, request.limit) ? this.typesWithMore.add(type) : this.typesWithMore.delete(type);
    if (request.perType.length === 1) {
      note(request.perType[0].type, claimed.length, request.perType[0].limit);
      return;
    }
    const counts = new Map<string, number>();
    for (const job of claimed) counts.set(job.type, (counts.get(job.type) ?? 0) + 1);
    for (const { type, limit } of request.perType) note(type, counts.get(type) ?? 0, limit);
  }
}
