import { describe, expect, it } from 'vitest';
import { ThroughputMeter } from './throughput-meter.js';

describe('ThroughputMeter', () => {
  const meterAt = (start: number) => {
    let now = start;
    const meter = new ThroughputMeter(() => now);
    return { meter, at: (ms: number) => (now = start + ms) };
  };

  it('reads a steady rate over the last quarter second', () => {
    const { meter, at } = meterAt(1_000_000);
    // 1,000 jobs/s for two seconds: one per millisecond.
    for (let ms = 0; ms < 2_000; ms++) {
      at(ms);
      meter.record();
    }
    at(2_000);
    expect(meter.perSecond()).toBeGreaterThanOrEqual(950);
    expect(meter.perSecond()).toBeLessThanOrEqual(1_050);
  });

  it('measures a fresh burst over its own age, not the whole window', () => {
    const { meter, at } = meterAt(1_000_000);
    // 40 jobs/ms for 60 ms after an idle start: 40,000 jobs/s.
    for (let ms = 0; ms < 60; ms++) {
      at(ms);
      for (let i = 0; i < 40; i++) meter.record();
    }
    at(60);
    expect(meter.perSecond()).toBeGreaterThanOrEqual(38_000);
    expect(meter.perSecond()).toBeLessThanOrEqual(42_000);
  });

  it('never divides by less than one bucket, so the first jobs do not read as a huge rate', () => {
    const { meter, at } = meterAt(1_000_000);
    at(0);
    for (let i = 0; i < 10; i++) meter.record();
    at(1);
    expect(meter.perSecond()).toBe(200);
  });

  it('forgets a burst once it leaves the window, and measures the next one from its own start', () => {
    const { meter, at } = meterAt(1_000_000);
    for (let ms = 0; ms < 100; ms++) {
      at(ms);
      for (let i = 0; i < 10; i++) meter.record();
    }
    at(1_000);
    expect(meter.perSecond()).toBe(0);
    // The next burst: 2 jobs/ms for 100 ms.
    for (let ms = 1_000; ms < 1_100; ms++) {
      at(ms);
      meter.record();
      meter.record();
    }
    at(1_100);
    expect(meter.perSecond()).toBeGreaterThanOrEqual(1_900);
    expect(meter.perSecond()).toBeLessThanOrEqual(2_100);
  });
});
