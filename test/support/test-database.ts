import { createScratchDatabase, type ScratchDatabase } from '../../tools/scratch-database.js';

export type TestDatabase = ScratchDatabase;

/** A fresh database for one test file, dropped (with its connections) when the file is done. */
export function createTestDatabase(adminUrl: string): Promise<TestDatabase> {
  return createScratchDatabase(adminUrl, 'ajq_test');
}
