import type { JobTables } from './job-tables.js';

/** The job_types rows: one per type, holding its circuit breaker. */
export function circuitSql({ types }: JobTables) {
  return {
    /** Idempotent: one row per job type, made by any worker that handles the type. */
    registerTypes: `INSERT INTO ${types} (type) SELECT unnest($1::text[]) ON CONFLICT (type) DO NOTHING`,

    /**
     * A failed attempt of a type with a circuit breaker. The row lock serialises concurrent
     * failures, so the count is exact and only one of them opens the circuit.
     */
    recordCircuitFailure: `
      WITH previous AS (SELECT circuit_state FROM ${types} WHERE type = $1 FOR UPDATE)
      UPDATE ${types} t
      SET consecutive_failures = t.consecutive_failures + 1, cooldown_ms = $3::int,
          circuit_state = CASE WHEN t.circuit_state = 'half-open' OR t.consecutive_failures + 1 >= $2::int THEN 'open' ELSE t.circuit_state END,
          opened_at = CASE WHEN t.circuit_state <> 'open' AND (t.circuit_state = 'half-open' OR t.consecutive_failures + 1 >= $2::int)
                           THEN now() ELSE t.opened_at END,
          reopen_at = CASE WHEN t.circuit_state <> 'open' AND (t.circuit_state = 'half-open' OR t.consecutive_failures + 1 >= $2::int)
                           THEN now() + $3::int * interval '1 millisecond' ELSE t.reopen_at END
      FROM previous WHERE t.type = $1
      RETURNING previous.circuit_state AS previous_state, t.circuit_state AS state`,

    /**
     * A success resets the failure count, and closes a half-open circuit (the probe's success, or
     * that of a job claimed before the circuit opened: the downstream works either way). An open
     * circuit stays open through its cool-down, whatever succeeds meanwhile; a failure opening it
     * concurrently holds the row lock, and the recheck of the locked row then finds it open. Only a row that is not already
     * closed-and-clean is updated (and locked), so successes on a healthy type write nothing and
     * never queue on the row.
     */
    recordCircuitSuccess: `
      UPDATE ${types} t
      SET consecutive_failures = 0, circuit_state = 'closed', opened_at = NULL, reopen_at = NULL
      WHERE t.type = $1 AND t.circuit_state <> 'open' AND (t.consecutive_failures > 0 OR t.circuit_state <> 'closed')
      RETURNING (SELECT circuit_state FROM ${types} WHERE type = $1) AS previous_state`,

    /** Read-only: the circuits not closed, as the admin API lists them. */
    openCircuits: `
      SELECT type, circuit_state, consecutive_failures, opened_at, reopen_at FROM ${types}
      WHERE circuit_state <> 'closed' ORDER BY type`,
  };
}

export type CircuitSql = ReturnType<typeof circuitSql>;
