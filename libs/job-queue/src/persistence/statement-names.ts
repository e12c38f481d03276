import { createHash } from 'node:crypto';
import type { JobSql } from './job.sql.js';

export type StatementName = keyof JobSql | 'claimPlain' | 'claimFlow' | 'claimGrouped' | 'claimOneType' | 'claimOneTypeSmall';

/** The name a named prepared statement takes on every connection. */
export type StatementNamer = (statement: StatementName) => string;

/**
 * Statement names are per connection and must stay under PostgreSQL's 63-byte identifiers. The tag
 * covers what shapes the texts, so stores set up differently never share a name.
 */
export function statementNamer(schema: string, synchronousClaims: boolean): StatementNamer {
  const shape = synchronousClaims ? schema : `${schema}:claims without flush`;
  const tag = createHash('sha1').update(shape).digest('hex').slice(0, 8);
  return (statement) => `ajq_${tag}_${statement}`;
}
