// The one backoff of the product: its delays stay inside their bounds for every jitter, a Retry-After is
// honoured or capped as the policy says, and a Backoff value never changes once made.
import { describe, expect, test } from 'vitest';
import { Backoff, backoffDelay, retryDelay, type BackoffPolicy } from '../../src/backoff.js';

const policy: BackoffPolicy = { baseMs: 1_000, maxMs: 60_000 };
const draws = [0, 0.25, 0.5, 0.999_999];

describe('backoffDelay', () => {
  test('doubles per failure up to the cap; equal jitter keeps at least half the ceiling', () => {
    for (const [failures, ceiling] of [[1, 1_000], [2, 2_000], [3, 4_000], [7, 60_000], [100, 60_000]] as const) {
      for (const r of draws) {
        const delay = backoffDelay(policy, failures, () => r);
        expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
        expect(delay).toBeLessThanOrEqual(ceiling);
      }
    }
  });

  test('full jitter spans 0 to the ceiling; none is the ceiling itself', () => {
    expect(backoffDelay({ ...policy, jitter: 'full' }, 3, () => 0)).toBe(0);
    expect(backoffDelay({ ...policy, jitter: 'full' }, 3, () => 0.999_999)).toBeLessThan(4_000);
    expect(backoffDelay({ ...policy, jitter: 'none' }, 3, () => 0.5)).toBe(4_000);
    expect(backoffDelay({ ...policy, jitter: 'none' }, 0, () => 0.5)).toBe(1_000);
  });
});

describe('retryDelay', () => {
  test('honours a Retry-After past the cap by default, never below half the base; caps it when asked', () => {
    expect(retryDelay(policy, 1, () => 0.5, 120_000)).toBe(120_000);
    expect(retryDelay(policy, 1, () => 0.5, 0)).toBe(500);
    expect(retryDelay({ ...policy, retryAfter: 'cap' }, 1, () => 0.5, 120_000)).toBe(60_000);
    expect(retryDelay({ ...policy, retryAfter: 'cap' }, 1, () => 0.5, 0)).toBe(0);
  });

  test('an unusable Retry-After falls back to the backoff', () => {
    for (const bad of [Number.NaN, -1, Number.POSITIVE_INFINITY]) expect(retryDelay({ ...policy, jitter: 'none' }, 2, () => 0, bad)).toBe(2_000);
  });
});

describe('Backoff', () => {
  test('is a value: each failure makes a new one, and none can be changed in place', () => {
    const first = Backoff.none.failed(10_000, 1_000);
    const second = first.failed(20_000, 2_000);
    expect([Backoff.none.failures, Backoff.none.until]).toEqual([0, 0]);
    expect([first.failures, first.until]).toEqual([1, 11_000]);
    expect([second.failures, second.until]).toEqual([2, 22_000]);
    expect(first.ready(10_999)).toBe(false);
    expect(first.ready(11_000)).toBe(true);
    expect(second.waitUntil(5)).toMatchObject({ failures: 2, until: 5 });
    expect(() => {
      (first as { failures: number }).failures = 9;
    }).toThrow(TypeError);
    expect(first.failures).toBe(1);
  });

  test('nextDelay grows with the failures it holds', () => {
    const none = { ...policy, jitter: 'none' } as const;
    expect(Backoff.none.nextDelay(none, Math.random)).toBe(1_000);
    expect(Backoff.none.failed(0, 0).nextDelay(none, Math.random)).toBe(2_000);
    expect(Backoff.none.failed(0, 0).failed(0, 0).nextDelay(none, Math.random, 30_000)).toBe(30_000);
  });
});
