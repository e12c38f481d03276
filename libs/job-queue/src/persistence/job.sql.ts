import { adminSql } from './admin.sql.js';
import { circuitSql } from './circuit.sql.js';
import { claimSql } from './claim.sql.js';
import { enqueueSql } from './enqueue.sql.js';
import { jobTables } from './job-tables.js';
import { maintenanceSql } from './maintenance.sql.js';
import { operatorSql } from './operator.sql.js';
import { scheduleSql } from './schedule.sql.js';
import { outcomeSql } from './outcome.sql.js';

/**
 * Every statement the store runs besides the claims themselves (claim-query.ts), one per operation,
 * for one schema; the files by concern hold them. Each comment there says why its statement is
 * safe when several workers run it at the same moment.
 */
export function jobSql(schema: string) {
  const tables = jobTables(schema);
  return {
    ...enqueueSql(tables),
    ...claimSql(tables),
    ...outcomeSql(tables),
    ...circuitSql(tables),
    ...maintenanceSql(tables),
    ...adminSql(tables),
    ...operatorSql(tables),
    ...scheduleSql(tables),
  };
}

export type JobSql = ReturnType<typeof jobSql>;
