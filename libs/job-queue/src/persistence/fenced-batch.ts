import type { Lease } from './job.store.js';

/*
 * The parameters of the fenced batch statements (completeMany, renewLeases, release): which jobs,
 * and the lease token each write must match.
 */

/** A bigint[] literal of the leases' ids: decimal strings from the database, nothing to escape. */
export function idArray(leases: readonly Lease[]): string {
  return `{${leases.map((l) => l.id).join(',')}}`;
}

/**
 * The tokens of a batch as the fenced batch statements take them: the usual token, and a map
 * `{"<id>": "<token>", …}` of the leases holding another one. A claim gives all its jobs one token,
 * so a batch holds one or two tokens and the map is usually empty or small. The usual token is the
 * majority one when there is one (found in one pass, nothing counted per token); with two tokens
 * that is always the more common.
 */
export function leaseTokens(leases: readonly Lease[]): [others: string, usual: string] {
  let usual = leases[0].leaseToken;
  let lead = 0;
  for (let i = 0; i < leases.length; i++) {
    const token = leases[i].leaseToken;
    if (lead === 0) {
      usual = token;
      lead = 1;
    } else {
      lead += token === usual ? 1 : -1;
    }
  }
  // Ids are decimal strings and tokens UUIDs (both from the database): nothing to escape.
  let others = '';
  for (let i = 0; i < leases.length; i++) {
    const { id, leaseToken } = leases[i];
    if (leaseToken !== usual) others += `${others === '' ? '' : ','}"${id}":"${leaseToken}"`;
  }
  return [`{${others}}`, usual];
}

/**
 * `{"<id>": <result>, …}`: each result is already JSON text. Jobs that returned nothing are left
 * out, so their result column stays NULL and the statement carries only real results.
 */
export function resultsById(completions: ReadonlyArray<{ lease: Lease; resultJson: string }>): string {
  const results: string[] = [];
  for (const { lease, resultJson } of completions) if (resultJson !== 'null') results.push(`"${lease.id}":${resultJson}`);
  return `{${results.join(',')}}`;
}
