import type { TestProject } from 'vitest/node';
import { startLocalPostgres } from '../../tools/local-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Server URL on which each test file creates its own database. */
    adminUrl: string;
  }
}

/** One PostgreSQL server for the run: DATABASE_URL's, or an embedded one. */
export default async function setup(project: TestProject) {
  const server = await startLocalPostgres((line) => console.log(line));
  project.provide('adminUrl', server.url);
  return async () => server.stop();
}
