// `auto-job-queue/testing`: the testing kit.
export { JobQueueTester, type DrainOptions } from '../libs/job-queue/src/testing/job-queue.tester.js';
export type { DrainCounts } from '../libs/job-queue/src/orchestrator/manual-drain.js';
export { createTestDatabase, type TestDatabase } from '../libs/job-queue/src/testing/create-test-database.js';
