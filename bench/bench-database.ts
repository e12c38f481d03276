import { createScratchDatabase, type ScratchDatabase } from '../tools/scratch-database.js';

export type BenchDatabase = ScratchDatabase;

/** A fresh database for one scenario run of one system, so runs never see each other's rows. */
export function createBenchDatabase(adminUrl: string): Promise<BenchDatabase> {
  return createScratchDatabase(adminUrl, 'ajq_bench');
}
