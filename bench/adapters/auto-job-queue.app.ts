import 'reflect-metadata';
import { type DynamicModule, Inject, Injectable, Module } from '@nestjs/common';
import { JobHandler, JobQueueModule, type JobQueueOptions } from '../../src/index.js';
import { BENCH_JOB_TYPE, type BenchPayload } from './queue-adapter.js';

export const BENCH_ON_JOB = Symbol('bench:on-job');

/** The benchmark's no-op handler: it only reports that the job started. */
@Injectable()
export class BenchNoopHandler {
  constructor(@Inject(BENCH_ON_JOB) private readonly onJob: (payload: BenchPayload) => void) {}

  @JobHandler(BENCH_JOB_TYPE)
  run(payload: BenchPayload): void {
    this.onJob(payload);
  }
}

/** A Nest application around JobQueueModule, as a user would write one. */
@Module({})
export class BenchQueueAppModule {
  /** A worker process: the no-op handler plus the module's worker. */
  static worker(options: Omit<JobQueueOptions, 'dataSource'>, url: string, onJob: (payload: BenchPayload) => void): DynamicModule {
    return {
      module: BenchQueueAppModule,
      imports: [JobQueueModule.forRoot({ ...options, dataSource: { type: 'postgres', url } })],
      providers: [BenchNoopHandler, { provide: BENCH_ON_JOB, useValue: onJob }],
    };
  }

  /** A producer-only process (an API pod): it enqueues, it never claims. */
  static producer(url: string): DynamicModule {
    return {
      module: BenchQueueAppModule,
      imports: [JobQueueModule.forRoot({ runWorker: false, dataSource: { type: 'postgres', url } })],
    };
  }
}
