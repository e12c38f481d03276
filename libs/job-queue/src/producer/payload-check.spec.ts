import { describe, expect, it } from 'vitest';
import { findUnserialisable } from './payload-check.js';

const check = (value: unknown) => findUnserialisable(value, 'payload');

describe('findUnserialisable', () => {
  it.each<[string, unknown]>([
    ['null', null],
    ['a string', 'hello'],
    ['an empty string', ''],
    ['a number', 42.5],
    ['a negative zero', -0],
    ['a boolean', false],
    ['an empty object', {}],
    ['an empty array', []],
    ['a nested plain structure', { a: [1, 'two', { three: [true, null] }], b: { c: { d: 'e' } } }],
    ['a Date', new Date('2025-01-01T00:00:00Z')],
    ['Dates nested in objects and arrays', { at: new Date(0), list: [new Date(1), { when: new Date(2) }] }],
    ['an object with toJSON', { amount: { toJSON: () => '12.50' } }],
    ['a class instance with toJSON', new (class Money { toJSON() { return { cents: 1250 }; } })()],
    ['a plain class instance', new (class Point { constructor(readonly x = 1, readonly y = 2) {} })()],
    ['an object without prototype', Object.assign(Object.create(null), { a: 1 })],
    ['an undefined object property', { a: 1, b: undefined }],
    ['a string with other control characters', 'tab\tnewline\n\u0001'],
    ['a unicode string', 'héllo ✓ 🚀'],
  ])('accepts %s', (_label, value) => {
    expect(check(value)).toBeNull();
  });

  it('accepts the same object referenced twice (shared, not circular)', () => {
    const shared = { id: 1 };
    expect(check({ a: shared, b: shared, list: [shared, shared] })).toBeNull();
  });

  it('rejects a NUL character in a string, naming where it is', () => {
    const problem = check({ user: { name: 'ad\u0000a' } });
    expect(problem).toContain('payload.user.name');
    expect(problem).toContain('NUL');
  });

  it('rejects a NUL character at the top level and inside arrays', () => {
    expect(check('\u0000')).toContain('payload contains a NUL');
    expect(check({ tags: ['ok', 'b\u0000d'] })).toContain('payload.tags[1]');
  });

  it('rejects a NUL character in an object key', () => {
    const problem = check({ nested: { ['k\u0000ey']: 1 } });
    expect(problem).toContain('payload.nested');
    expect(problem).toContain('NUL');
  });

  it.each<[string, unknown, string]>([
    ['NaN', { n: Number.NaN }, 'payload.n is NaN'],
    ['Infinity', { n: Infinity }, 'payload.n is Infinity'],
    ['-Infinity', [-Infinity], 'payload[0] is -Infinity'],
    ['a bigint', { id: 10n }, 'payload.id is a bigint'],
    ['a function', { fn: () => 1 }, 'payload.fn is a function'],
    ['a symbol', { s: Symbol('x') }, 'payload.s is a symbol'],
    ['undefined at the top level', undefined, 'payload is undefined'],
  ])('rejects %s, naming where it is', (_label, value, expected) => {
    expect(check(value)).toContain(expected);
  });

  it('rejects undefined inside an array (JSON would turn it into null)', () => {
    expect(check([1, undefined, 3])).toContain('payload[1] is undefined');
    expect(check({ a: { list: ['x', { y: [undefined] }] } })).toContain('payload.a.list[1].y[0] is undefined');
  });

  it('rejects a sparse array hole like undefined', () => {
    expect(check([1, , 3])).toContain('payload[1] is undefined');
  });

  it('rejects a Map and a Set, which JSON turns into {}', () => {
    const map = check({ lookup: new Map([['a', 1]]) });
    expect(map).toContain('payload.lookup is a Map');
    const set = check({ list: [new Set([1])] });
    expect(set).toContain('payload.list[0] is a Set');
    expect(check(new Map())).toContain('payload is a Map');
  });

  it('rejects a circular object and a circular array', () => {
    const node: Record<string, unknown> = { name: 'root' };
    node.self = { parent: node };
    expect(check(node)).toContain('payload.self.parent refers back to itself');
    const list: unknown[] = [1];
    list.push(list);
    expect(check(list)).toContain('payload[1] refers back to itself');
  });

  it('uses the path it is given as the prefix', () => {
    expect(findUnserialisable({ a: 1n }, 'jobs[2].payload')).toContain('jobs[2].payload.a is a bigint');
  });

  it('reports the first problem only', () => {
    expect(check({ a: 1n, b: Number.NaN })).toContain('payload.a');
  });
});
