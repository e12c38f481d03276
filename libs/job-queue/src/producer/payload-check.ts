/**
 * Finds the first part of a payload that JSON (and PostgreSQL jsonb) cannot carry faithfully,
 * and says where it is; null when the whole value is fine.
 */
export function findUnserialisable(value: unknown, path: string, seen = new Set<object>()): string | null {
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
        const problem = findUnserialisable(object[i], `${path}[${i}]`, seen);
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
      const problem = findUnserialisable(child, `${path}.${key}`, seen);
      if (problem) return problem;
    }
    return null;
  } finally {
    seen.delete(object);
  }
}
