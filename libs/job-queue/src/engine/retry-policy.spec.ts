import { describe, expect, it } from 'vitest';
import { RetryPolicy } from './retry-policy.js';

const settings = { baseDelayMs: 1_000, maxDelayMs: 60_000 };
const fixed = (value: number) => new RetryPolicy(() => value);

describe('RetryPolicy', () => {
  it('gives exactly half the capped delay when the random draw is 0', () => {
    expect(fixed(0).delayFor(1, settings)).toBe(500);
    expect(fixed(0).delayFor(3, settings)).toBe(2_000);
  });

  it('gives three quarters of the capped delay when the random draw is 0.5', () => {
    expect(fixed(0.5).delayFor(1, settings)).toBe(750);
    expect(fixed(0.5).delayFor(3, settings)).toBe(3_000);
  });

  it('gives the full capped delay when the random draw is 1', () => {
    expect(fixed(1).delayFor(1, settings)).toBe(1_000);
    expect(fixed(1).delayFor(3, settings)).toBe(4_000);
  });

  it('keeps Math.random draws inside [capped/2, capped]', () => {
    const policy = new RetryPolicy();
    for (let i = 0; i < 200; i++) {
      const delay = policy.delayFor(4, settings);
      expect(delay).toBeGreaterThanOrEqual(4_000);
      expect(delay).toBeLessThanOrEqual(8_000);
    }
  });

  it('doubles the delay with each attempt until the cap', () => {
    for (const random of [0, 0.5, 1]) {
      const policy = fixed(random);
      const delays = Array.from({ length: 8 }, (_, i) => policy.delayFor(i + 1, settings));
      // 1 s, 2 s, 4 s, 8 s, 16 s, 32 s, then capped at 60 s.
      for (let i = 1; i < 6; i++) expect(delays[i]).toBe(delays[i - 1] * 2);
      for (let i = 1; i < delays.length; i++) expect(delays[i]).toBeGreaterThanOrEqual(delays[i - 1]);
    }
  });

  it('caps the delay at maxDelayMs', () => {
    expect(fixed(1).delayFor(7, settings)).toBe(60_000);
    expect(fixed(1).delayFor(30, settings)).toBe(60_000);
    expect(fixed(0).delayFor(30, settings)).toBe(30_000);
    expect(fixed(1).delayFor(3, { baseDelayMs: 1_000, maxDelayMs: 2_500 })).toBe(2_500);
  });

  it('never overflows to Infinity or NaN for huge attempt numbers', () => {
    const big = { baseDelayMs: 3_600_000, maxDelayMs: 86_400_000 };
    for (const attempt of [53, 54, 1_024, 1_025, 1e6, 2 ** 31, Number.MAX_SAFE_INTEGER, Number.MAX_VALUE, Infinity]) {
      for (const random of [0, 0.5, 1]) {
        const delay = fixed(random).delayFor(attempt, big);
        expect(Number.isFinite(delay)).toBe(true);
        expect(delay).toBeGreaterThanOrEqual(big.maxDelayMs / 2);
        expect(delay).toBeLessThanOrEqual(big.maxDelayMs);
      }
    }
  });

  it('treats attempt 0 or below like the first attempt', () => {
    expect(fixed(1).delayFor(0, settings)).toBe(1_000);
    expect(fixed(1).delayFor(-5, settings)).toBe(1_000);
  });

  it('returns 0 for every attempt when baseDelayMs is 0', () => {
    for (const random of [0, 0.5, 1]) {
      for (const attempt of [1, 2, 10, 1_000]) {
        expect(fixed(random).delayFor(attempt, { baseDelayMs: 0, maxDelayMs: 0 })).toBe(0);
        expect(fixed(random).delayFor(attempt, { baseDelayMs: 0, maxDelayMs: 60_000 })).toBe(0);
      }
    }
  });

  it('returns whole milliseconds', () => {
    const delay = fixed(0.3333).delayFor(2, { baseDelayMs: 7, maxDelayMs: 1_000 });
    expect(Number.isInteger(delay)).toBe(true);
  });
});
