/**
 * Finds the first part of a payload that JSON (and PostgreSQL jsonb) cannot carry faithfully,
 * and says where it is; null when the whole value is fine.
 */
export function findUnserialisable(value: unknown, path: string): string | null {
  // Nearly every payload is plain data: a walk that builds no paths clears it; only a payload it
  // does not clear is walked again, naming where the problem is.
  return isPlainJsonValue(value) ? null : locateProblem(value, path, new Set<object>());
}

/** The fast check alone: true when findUnserialisable would find nothing, without naming a path. */
export function isPlainJsonValue(value: unknown): boolean {
  return isPlainJson(value, 0);
}

/** Deeper than this, the plain walk gives up and the careful one (which detects cycles) decides. */
const PLAIN_DEPTH_LIMIT = 64;

/** True when `value` is plain JSON data (no toJSON, Map, Set, cycle, NUL, non-finite number…). */
function isPlainJson(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
      return !value.includes('\u0000');
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (depth >= PLAIN_DEPTH_LIMIT) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!isPlainJson(value[i], depth + 1)) return false;
    return true;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  for (const key in value) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
    const child = (value as Record<string, unknown>)[key];
    if (child === undefined) continue;
    if (key.includes('\u0000') || !isPlainJson(child, depth + 1)) return false;
  }
  return true;
}

function locateProblem(value: unknown, path: string, seen: Set<object>): string | null {
  switch (typeof value) {
    case 'string':
      return value.includes('\u0000') ? `${path} contains a NUL character (\\u0000), which PostgreSQL jsonb cannot store` : null;
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : `${path} is ${value}, which JSON cannot represent`;
    case 'bigint':
      return `${path} is a bigint, which JSON cannot represent (send it as a string)`;
    case 'undefined':
      return `${path} is undefined, which JSON cannot represent (use null or leave the key out)`;
    case 'function':
    case 'symbol':
      return `${path} is a ${typeof value}, which JSON cannot represent`;
  }
  if (value === null) return null;
  const object = value as object;
  if (typeof (object as { toJSON?: unknown }).toJSON === 'function') return null; // Date and friends
  if (seen.has(object)) return `${path} refers back to itself (a circular structure)`;
  seen.add(object);
  try {
    if (Array.isArray(object)) {
      for (let i = 0; i < object.length; i++) {
        const problem = locateProblem(object[i], `${path}[${i}]`, seen);
        if (problem) return problem;
      }
      return null;
    }
    const prototype = Object.getPrototypeOf(object);
    if (prototype !== Object.prototype && prototype !== null) {
      const name = (object as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      if (object instanceof Map || object instanceof Set) {
        return `${path} is a ${name}, which JSON turns into {} (convert it to an array or plain object)`;
      }
    }
    for (const [key, child] of Object.entries(object)) {
      if (child === undefined) continue; // JSON drops undefined properties, as callers expect
      if (key.includes('\u0000')) return `${path} has a key with a NUL character, which PostgreSQL jsonb cannot store`;
      const problem = locateProblem(child, `${path}.${key}`, seen);
      if (problem) return problem;
    }
    return null;
  } finally {
    seen.delete(object);
  }
}
