import type { JobTables } from './job-tables.js';

/** What a claim reads or locks besides the claim statements themselves (ClaimQuery). */
export function claimSql({ jobs, types }: JobTables) {
  return {
    /**
     * Taken in the claim's transaction before it, for types with a rate limit or global
     * concurrency: claims of one such type are serialised across workers, so the counts the claim
     * reads are not raced. Ordered by type, so two workers never deadlock.
     */
    claimLimitedLock: `SELECT type FROM ${types} WHERE type = ANY($1::text[]) ORDER BY type FOR UPDATE`,

    /**
     * claimLimitedLock for a claim with grouped types, which also turns JIT off for the rest of
     * the claim's transaction: the grouped claim's LIMITs come from its parameters and its CTEs,
     * which the planner cannot see, so on a long backlog its estimate passes `jit_above_cost` and
     * PostgreSQL would spend about 100 ms compiling each claim that runs in a few.
     */
    claimGroupedLock: `
      SELECT t.type FROM ${types} t CROSS JOIN (SELECT set_config('jit', 'off', true)) AS jit_off
      WHERE t.type = ANY($1::text[]) ORDER BY t.type FOR UPDATE OF t`,

    /**
     * The jobs table's size in pages, which decides the form of one-type claims, and the memory
     * PostgreSQL gives a hash (OneTypeClaimPlans). It reads the file's length under a brief share
     * lock: no scan, and nothing it could race with.
     */
    jobsTableSize: `
      SELECT (pg_relation_size('${jobs}') / current_setting('block_size')::bigint)::int AS pages,
             pg_size_bytes(current_setting('work_mem')) * COALESCE(current_setting('hash_mem_multiplier', true), '1')::float8 / 1024 AS "hashMemKb"`,
  };
}

export type ClaimSql = ReturnType<typeof claimSql>;
