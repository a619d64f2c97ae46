// The renewal policy on its own: when a token is due (the margin, the daemon's jitter and forced renewals,
// `refresh`'s recent renewal, a clock stepped back), when to renew (exec's half of a short token's life), and
// what follows a failure (retry after the backoff or a Retry-After bounded by the expiry, or park).
import { describe, expect, test } from 'vitest';
import { afterFailure, due, renewAt, resumeAfterPause, spreadJitter, type PolicyToken } from '../../src/sync/renewal-policy.js';

const T0 = Date.UTC(2026, 0, 1);
const MIN = 60_000;
const margin = 15 * MIN;
/** A token renewed at T0 that lives 4 hours. */
const token: PolicyToken = { expiresAt: T0 + 240 * MIN, renewedAt: T0 };
const never = (): number => {
  throw new Error('no draw expected');
};

describe('due: the margin', () => {
  test('not due before the margin; due exactly at it, inside it, and once expired', () => {
    const at = (token.expiresAt as number) - margin;
    expect(due(token, { marginMs: margin }, T0)).toBe(false);
    expect(due(token, { marginMs: margin }, at - 1)).toBe(false);
    expect(due(token, { marginMs: margin }, at)).toBe(true);
    expect(due(token, { marginMs: margin }, at + 1)).toBe(true);
    expect(due(token, { marginMs: margin }, token.expiresAt as number)).toBe(true);
    expect(due(token, { marginMs: margin }, (token.expiresAt as number) + 10 * MIN)).toBe(true);
  });

  test('a token with no known expiry is due', () => {
    expect(due({ expiresAt: undefined }, { marginMs: margin }, T0)).toBe(true);
  });

  test('a clock that reads earlier than the renewal was stepped back: the token is due, however much it seems to have left', () => {
    expect(due(token, { marginMs: margin }, T0 - 1)).toBe(true);
    expect(due(token, { marginMs: margin }, T0 - 60 * MIN)).toBe(true);
    // Without a renewal time to compare (the daemon reads its expiry on two clocks itself), the expiry alone decides.
    expect(due({ expiresAt: token.expiresAt }, { marginMs: margin }, T0 - 60 * MIN)).toBe(false);
  });

  test('renewAt is the first time due() holds', () => {
    const when = renewAt(token, { marginMs: margin }, T0);
    expect(when).toBe((token.expiresAt as number) - margin);
    expect(due(token, { marginMs: margin }, when - 1)).toBe(false);
    expect(due(token, { marginMs: margin }, when)).toBe(true);
    // Once due, it is due now.
    expect(renewAt(token, { marginMs: margin }, when + 5 * MIN)).toBe(when + 5 * MIN);
    expect(renewAt({ expiresAt: undefined }, { marginMs: margin }, T0)).toBe(T0);
    expect(renewAt(token, { marginMs: margin }, T0 - 1)).toBe(T0 - 1);
  });
});

describe('due: the daemon’s jitter and forced renewals', () => {
  const jitter = 3 * MIN;

  test('the jitter starts the renewal that much before the margin, exactly at its boundary', () => {
    const at = (token.expiresAt as number) - margin - jitter;
    expect(due(token, { marginMs: margin, jitterMs: jitter }, at - 1)).toBe(false);
    expect(due(token, { marginMs: margin, jitterMs: jitter }, at)).toBe(true);
    // Without it, the same moment is still outside the margin.
    expect(due(token, { marginMs: margin }, at)).toBe(false);
    expect(renewAt(token, { marginMs: margin, jitterMs: jitter }, T0)).toBe(at);
  });

  test('a fractional share of jitter, as a draw gives it', () => {
    const share = 66_600.25;
    const expiry = token.expiresAt as number;
    expect(due(token, { marginMs: margin, jitterMs: share }, expiry - margin - share)).toBe(true);
    expect(due(token, { marginMs: margin, jitterMs: share }, Math.floor(expiry - margin - share))).toBe(false);
  });

  test('force makes any token due, however fresh', () => {
    expect(due(token, { marginMs: margin, force: true }, T0)).toBe(true);
    expect(renewAt(token, { marginMs: margin, force: true }, T0 + 1)).toBe(T0 + 1);
    expect(due(token, { marginMs: margin, force: false }, T0)).toBe(false);
  });
});

describe('due: refresh’s reuse of a recent renewal', () => {
  const within = 10_000;
  const waiting = T0 - 2_000;
  const recent = { since: waiting, withinMs: within };

  test('a renewal finished since the caller began waiting, less than withinMs ago, will do', () => {
    expect(due(token, { marginMs: margin, recent }, T0)).toBe(false);
    expect(due(token, { marginMs: margin, recent }, T0 + within - 1)).toBe(false);
    expect(due(token, { marginMs: margin, recent }, T0 + within)).toBe(true);
    expect(renewAt(token, { marginMs: margin, recent }, T0)).toBe(T0 + within);
  });

  test('a renewal that finished exactly when the caller began waiting counts; one before it never does, however new', () => {
    expect(due(token, { marginMs: margin, recent: { since: T0, withinMs: within } }, T0 + 1)).toBe(false);
    expect(due(token, { marginMs: margin, recent: { since: T0 + 1, withinMs: within } }, T0 + 1)).toBe(true);
    expect(due(token, { marginMs: margin, recent: { since: Infinity, withinMs: within } }, T0)).toBe(true);
    expect(due({ expiresAt: token.expiresAt }, { marginMs: margin, recent }, T0)).toBe(true);
  });

  test('the margin is not consulted: a recent renewal of a token shorter than the margin will do until it expires', () => {
    const short: PolicyToken = { expiresAt: T0 + 5_000, renewedAt: T0 };
    expect(due(short, { marginMs: margin }, T0)).toBe(true);
    expect(due(short, { marginMs: margin, recent }, T0 + 4_999)).toBe(false);
    expect(due(short, { marginMs: margin, recent }, T0 + 5_000)).toBe(true);
  });

  test('a clock stepped back to before the renewal makes it due', () => {
    expect(due(token, { marginMs: margin, recent: { since: T0 - 5_000, withinMs: within } }, T0 - 1)).toBe(true);
  });
});

describe('renewAt: exec’s half of a short token’s remaining life', () => {
  const rule = { marginMs: margin, halfLifeWhenShort: true };

  test('a token with more than the margin left is renewed at the margin', () => {
    expect(renewAt(token, rule, T0)).toBe((token.expiresAt as number) - margin);
  });

  test('one with exactly the margin left, or less, at half what it has left', () => {
    const expiry = token.expiresAt as number;
    expect(renewAt(token, rule, expiry - margin)).toBe(expiry - margin + margin / 2);
    expect(renewAt(token, rule, expiry - margin + 1)).toBe(expiry - margin + 1 + (margin - 1) / 2);
    const short: PolicyToken = { expiresAt: T0 + 6_000 };
    expect(renewAt(short, { marginMs: 10_000, halfLifeWhenShort: true }, T0)).toBe(T0 + 3_000);
    // Without it, the same token is due at once.
    expect(renewAt(short, { marginMs: 10_000 }, T0)).toBe(T0);
  });

  test('an expired token at once', () => {
    const expiry = token.expiresAt as number;
    expect(renewAt(token, rule, expiry)).toBe(expiry);
    expect(renewAt(token, rule, expiry + MIN)).toBe(expiry + MIN);
  });

  test('due() does not halve: a short token is due as the margin says', () => {
    const short: PolicyToken = { expiresAt: T0 + 6_000 };
    expect(due(short, rule, T0)).toBe(true);
  });
});

describe('afterFailure', () => {
  const backoff = { baseMs: 1_000, maxMs: 60_000 };

  test('a grant that is gone parks for re-authorization, a wrong configuration for a person to fix; nothing is drawn', () => {
    expect(afterFailure({ kind: 'terminal' }, 1, { backoff, random: never })).toEqual({ park: 'reauthorization_needed' });
    expect(afterFailure({ kind: 'configuration' }, 3, { backoff, random: never })).toEqual({ park: 'configuration_error' });
  });

  test('retryParkedEveryMs: what would park is tried again that rarely instead', () => {
    expect(afterFailure({ kind: 'terminal' }, 1, { backoff, random: never, retryParkedEveryMs: 300_000 })).toEqual({ retryInMs: 300_000 });
    expect(afterFailure({ kind: 'configuration' }, 1, { backoff, random: never, retryParkedEveryMs: 300_000 })).toEqual({ retryInMs: 300_000 });
    expect(afterFailure({ kind: 'transient' }, 2, { backoff: { ...backoff, jitter: 'none' }, random: never, retryParkedEveryMs: 300_000 })).toEqual({ retryInMs: 2_000 });
  });

  test('anything else is retried after the backoff of the attempt, with the caller’s draw', () => {
    for (const kind of ['transient', 'rate_limited', 'coordinator'] as const) {
      expect(afterFailure({ kind }, 1, { backoff, random: () => 0 })).toEqual({ retryInMs: 500 });
      expect(afterFailure({ kind }, 3, { backoff, random: () => 0.5 })).toEqual({ retryInMs: 3_000 });
      expect(afterFailure({ kind }, 30, { backoff: { ...backoff, jitter: 'none' }, random: never })).toEqual({ retryInMs: 60_000 });
    }
  });

  test('a Retry-After is honoured, without a draw', () => {
    expect(afterFailure({ kind: 'rate_limited', retryAfterMs: 120_000 }, 1, { backoff, random: never })).toEqual({ retryInMs: 120_000 });
  });

  test('with the daemon’s expiry bound, a Retry-After past the expiry less the safety window is cut to it, never below the base', () => {
    const now = T0;
    const expiry = { expiresAt: T0 + 5 * MIN, safetyMs: MIN, now };
    // Exactly at the bound: honoured as asked.
    expect(afterFailure({ kind: 'rate_limited', retryAfterMs: 4 * MIN }, 1, { backoff, random: never, expiry })).toEqual({ retryInMs: 4 * MIN });
    expect(afterFailure({ kind: 'rate_limited', retryAfterMs: 4 * MIN + 1 }, 1, { backoff, random: never, expiry })).toEqual({ retryInMs: 4 * MIN, cappedByExpiry: true });
    // An expired token (or a clock past its expiry): the base, not a negative wait.
    const expired = { expiresAt: T0 - MIN, safetyMs: MIN, now };
    expect(afterFailure({ kind: 'transient', retryAfterMs: 30_000 }, 1, { backoff, random: never, expiry: expired })).toEqual({ retryInMs: 1_000, cappedByExpiry: true });
    // No Retry-After, or no known expiry: the backoff alone.
    expect(afterFailure({ kind: 'transient' }, 10, { backoff: { ...backoff, jitter: 'none' }, random: never, expiry: expired })).toEqual({ retryInMs: 60_000 });
    expect(afterFailure({ kind: 'rate_limited', retryAfterMs: 10 * MIN }, 1, { backoff, random: never, expiry: { ...expiry, expiresAt: undefined } })).toEqual({ retryInMs: 10 * MIN });
  });
});

describe('resumeAfterPause: an account paused by a 429', () => {
  const base = { now: 1_000_000, spreadMs: 60_000, safetyMs: 60_000 };

  test('resumes within the spread after the pause, never within it', () => {
    expect(resumeAfterPause(1_300_000, { ...base, random: () => 0, expiresAt: undefined })).toBe(1_300_000);
    expect(resumeAfterPause(1_300_000, { ...base, random: () => 0.5, expiresAt: undefined })).toBe(1_330_000);
  });

  test('spreads no wider than the pause is long', () => {
    expect(resumeAfterPause(1_010_000, { ...base, random: () => 0.5, expiresAt: undefined })).toBe(1_015_000);
  });

  test('never past the token’s expiry less the safety window; not paused when that has come', () => {
    expect(resumeAfterPause(1_300_000, { ...base, random: () => 0, expiresAt: 1_200_000 })).toBe(1_140_000);
    expect(resumeAfterPause(1_300_000, { ...base, random: () => 0, expiresAt: 1_060_000 })).toBeUndefined();
  });

  test('not paused once the pause has ended', () => {
    expect(resumeAfterPause(1_000_000, { ...base, random: () => 0, expiresAt: undefined })).toBeUndefined();
  });
});

describe('spreadJitter: a token obtained at a moment the profile did not choose', () => {
  test('draws over the whole window from now to its expiry less the margin', () => {
    expect(spreadJitter(1_000_000 + 4 * 3_600_000, { now: 1_000_000, marginMs: 900_000, usual: 0, random: () => 0.5 })).toBe((4 * 3_600_000 - 900_000) / 2);
  });

  test('never less than the usual draw', () => {
    expect(spreadJitter(1_000_000 + 4 * 3_600_000, { now: 1_000_000, marginMs: 900_000, usual: 120_000, random: () => 0 })).toBe(120_000);
  });
});
