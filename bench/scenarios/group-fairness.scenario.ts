import 'reflect-metadata';
import { type DynamicModule, Inject, Injectable, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JobHandler, JobProducer, JobQueueModule } from '../../src/index.js';
import type { BenchDatabase } from '../bench-database.js';
import { msBetween, now, pollUntil } from '../clock.js';
import { checkExactlyOnce } from '../exactly-once.js';
import type { Measurement, RunCheck, Scenario, ScenarioContext } from './scenario.js';

const CONCURRENCY = 10;
const SMALL_GROUPS = 50;
/** The throughput legs: this many jobs, spread over this many groups (grouped leg)… */
const DRAIN_GROUPS = 100;
/** … at these worker concurrencies. */
const DRAIN_CONCURRENCY = [10, 50];
const ENQUEUE_CHUNK = 10_000;
const GROUPED = 'bench.grouped';
const UNGROUPED = 'bench.ungrouped';
const ON_START = Symbol('bench:on-start');

interface Payload {
  seq: number;
}

type OnStart = (type: string, payload: Payload) => void;

@Injectable()
class GroupedBenchHandler {
  constructor(@Inject(ON_START) private readonly onStart: OnStart) {}

  // groupConcurrency at the worker's concurrency: turns without a cap of their own, so the
  // throughput leg measures the grouped claim, not a cap.
  @JobHandler(GROUPED, { groupConcurrency: CONCURRENCY })
  run(payload: Payload): void {
    this.onStart(GROUPED, payload);
  }
}

@Injectable()
class UngroupedBenchHandler {
  constructor(@Inject(ON_START) private readonly onStart: OnStart) {}

  @JobHandler(UNGROUPED)
  run(payload: Payload): void {
    this.onStart(UNGROUPED, payload);
  }
}

@Module({})
class GroupBenchModule {
  static worker(url: string, handler: Type, onStart: OnStart, concurrency = CONCURRENCY): DynamicModule {
    return {
      module: GroupBenchModule,
      imports: [JobQueueModule.forRoot({ concurrency, dataSource: { type: 'postgres', url } })],
      providers: [handler, { provide: ON_START, useValue: onStart }],
    };
  }

  static producer(url: string): DynamicModule {
    return { module: GroupBenchModule, imports: [JobQueueModule.forRoot({ runWorker: false, dataSource: { type: 'postgres', url } })] };
  }
}

/**
 * Tenant fairness (auto-job-queue only: the others here have no groups). One group's backlog of
 * `groupBacklog` jobs is enqueued first, then one job in each of 50 other groups; a worker of concurrency 10
 * whose handler sets `groupConcurrency` starts them. Reported: at which start the
 * last of the 50 began, and so after about how many claims (a claim takes at most the free slots).
 * Then the grouped claim's cost: the same number of jobs drained once spread over 100 groups by
 * the grouped type, once without groups by a type without `groupConcurrency` (the claim every
 * queue without groups uses, its statements unchanged by groups), at concurrency 10 and 50. The workers run in the benchmark process.
 */
export const groupFairnessScenario: Scenario = {
  name: 'group-fairness',
  describe: (sizes) =>
    `group fairness: ${sizes.groupBacklog.toLocaleString('en-US')} jobs of one group enqueued before one job in each of ` +
    `${SMALL_GROUPS} other groups, concurrency ${CONCURRENCY}, groupConcurrency ${CONCURRENCY}: the start at which the last of the ${SMALL_GROUPS} ` +
    `began; then ${sizes.groupDrainJobs.toLocaleString('en-US')} jobs drained over ${DRAIN_GROUPS} groups and without groups, at concurrency ` +
    DRAIN_CONCURRENCY.join(' and '),

  async run(adapter, context) {
    if (adapter.name !== 'auto-job-queue') {
      return { measurements: [], checks: [], details: { skipped: 'groups (group, groupConcurrency) are auto-job-queue options' } };
    }
    const { sizes, scope } = context;
    const measurements: Measurement[] = [];
    const checks: RunCheck[] = [];
    const details: Record<string, unknown> = {};

    // 1. Fairness: the noisy group's backlog first, then the small groups' jobs.
    const fairness = await scope.database(adapter);
    const backlog = sizes.groupBacklog;
    const expected = backlog + SMALL_GROUPS;
    await enqueue(fairness, context, (seq) => (seq < backlog ? 'acme' : `tenant-${String(seq - backlog).padStart(2, '0')}`), expected, GROUPED);
    const order: number[] = [];
    let smallStarted = 0;
    let lastSmallAt = -1;
    const worker = await NestFactory.createApplicationContext(
      GroupBenchModule.worker(fairness.url, GroupedBenchHandler, (_type, { seq }) => {
        order.push(seq);
        if (seq >= backlog && ++smallStarted === SMALL_GROUPS) lastSmallAt = order.length;
      }),
      { logger: ['error', 'warn'] },
    );
    try {
      await pollUntil(async () => smallStarted === SMALL_GROUPS, 5, 120_000, `the ${SMALL_GROUPS} small groups' jobs to start`);
    } finally {
      await worker.close();
    }
    measurements.push(
      { key: 'group.lastSmallStart', label: `last of ${SMALL_GROUPS} small groups started at start #`, unit: 'n', value: lastSmallAt, better: 'lower' },
      {
        key: 'group.claimsToLastSmall',
        label: `claims until the last of ${SMALL_GROUPS} (≈ starts ÷ ${CONCURRENCY})`,
        unit: 'n',
        value: Math.ceil(lastSmallAt / CONCURRENCY),
        better: 'lower',
      },
    );
    details.backlog = backlog;
    details.noisyStartedBeforeLastSmall = order.slice(0, lastSmallAt).filter((seq) => seq < backlog).length;
    await scope.dropDatabase(fairness);

    // 2. What turns cost: drains over 100 groups and without groups, at each concurrency.
    const jobs = sizes.groupDrainJobs;
    for (const concurrency of DRAIN_CONCURRENCY) {
      const rates: Record<string, number> = {};
      for (const [type, handler, groupOf] of [
        [GROUPED, GroupedBenchHandler, (seq: number) => `g${seq % DRAIN_GROUPS}`],
        [UNGROUPED, UngroupedBenchHandler, () => null],
      ] as const) {
        const db = await scope.database(adapter);
        await enqueue(db, context, groupOf, jobs, type);
        const counts = new Uint8Array(jobs);
        let outOfRange = 0;
        let runs = 0;
        const started = now();
        const app = await NestFactory.createApplicationContext(
          GroupBenchModule.worker(
            db.url,
            handler,
            (_type, { seq }) => {
              runs++;
              if (seq >= 0 && seq < jobs) counts[seq]++;
              else outOfRange++;
            },
            concurrency,
          ),
          { logger: ['error', 'warn'] },
        );
        try {
          await pollUntil(async () => runs >= jobs, 5, 600_000, `${jobs} ${type} jobs to run`);
          await pollUntil(
            async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE status <> 'completed'`))[0].n === 0,
            20,
            60_000,
            `${type} to finish every job`,
          );
        } finally {
          await app.close();
        }
        rates[type] = jobs / (msBetween(started, now()) / 1000);
        const [{ n: completed }] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_queue.jobs WHERE status = 'completed'`);
        checks.push({
          run: `${type} drain, concurrency ${concurrency}`,
          result: checkExactlyOnce(jobs, [{ counts, outOfRange }], completed === jobs ? null : `${completed} of ${jobs} completed`),
        });
        await scope.dropDatabase(db);
      }
      const c = `concurrency ${concurrency}`;
      measurements.push(
        { key: `group.drain.c${concurrency}.grouped`, label: `drain over ${DRAIN_GROUPS} groups, ${c}`, unit: 'jobs/s', value: rates[GROUPED], better: 'higher' },
        { key: `group.drain.c${concurrency}.ungrouped`, label: `drain without groups, ${c}`, unit: 'jobs/s', value: rates[UNGROUPED], better: 'higher' },
        { key: `group.drain.c${concurrency}.ratio`, label: `over groups ÷ without, ${c}`, unit: '×', value: rates[GROUPED] / rates[UNGROUPED], better: 'higher' },
      );
    }
    return { measurements, checks, details };
  },
};

/** Enqueues seq 0 … count-1 of `type` in bulk chunks, each with the group `groupOf(seq)` gives. */
async function enqueue(db: BenchDatabase, context: ScenarioContext, groupOf: (seq: number) => string | null, count: number, type: string): Promise<void> {
  const app = await NestFactory.createApplicationContext(GroupBenchModule.producer(db.url), { logger: ['error', 'warn'] });
  try {
    const producer = app.get(JobProducer);
    const started = now();
    for (let from = 0; from < count; from += ENQUEUE_CHUNK) {
      const size = Math.min(ENQUEUE_CHUNK, count - from);
      await producer.enqueueMany(
        Array.from({ length: size }, (_, i) => {
          const group = groupOf(from + i);
          return { type, payload: { seq: from + i }, ...(group === null ? {} : { options: { group } }) };
        }),
      );
    }
    await db.query('VACUUM ANALYZE job_queue.jobs');
    context.log(`    enqueued ${count.toLocaleString('en-US')} ${type} jobs in ${(msBetween(started, now()) / 1000).toFixed(1)} s`);
  } finally {
    await app.close();
  }
}
