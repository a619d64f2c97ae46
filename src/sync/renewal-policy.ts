// When a token is due for renewal, and what follows a renewal that failed: one policy for the daemon, `exec
// --watch` and the commands that take a kept token (`token`, `refresh`, the library's getAccessToken). Each
// caller's deliberate difference is a parameter of its own: the daemon's jitter and its forced renewals, exec's
// half of the remaining life for a token shorter than the margin, `refresh`'s taking of a renewal another process
// finished moments ago. Pure: the caller passes the time and its source of random draws; nothing here reads a
// clock, draws a number or does I/O.
import { retryDelay, type BackoffPolicy } from '../backoff.js';
import type { FailureKind } from '../errors.js';

/** A token as the policy judges it: its expiry and, when known, when the renewal that produced it finished. */
export interface PolicyToken {
  /** Epoch ms; undefined when no expiry is known, and such a token is due. */
  expiresAt: number | undefined;
  /**
   * Epoch ms. A clock that reads earlier than this has been stepped back, and what it says is left of the
   * token cannot be trusted (it would stretch the token's life past what Dropbox gave it): the token is due.
   */
  renewedAt?: number;
}

export interface RenewalRule {
  /** Renew once the token has this much life left or less. */
  marginMs: number;
  /** The daemon: this cycle's share of its jitter; the renewal starts this much before the margin. Default 0. */
  jitterMs?: number;
  /** The daemon: renew now whatever the expiry says (a new grant, a token Dropbox refused). */
  force?: boolean;
  /**
   * `refresh`, which promises a renewal made now: the token will do only as a renewal that finished at or after
   * `since` (when the caller began waiting) and less than `withinMs` ago, and is not expired; the margin is not
   * consulted then.
   */
  recent?: { since: number; withinMs: number };
}

export interface RenewAtRule extends RenewalRule {
  /**
   * `exec --watch`: a token with no more than the margin (and jitter) left when obtained (its whole life shorter
   * than the margin) is renewed at half its remaining life, rather than at once and again at every check.
   */
  halfLifeWhenShort?: boolean;
}

/**
 * When to renew `token`, judged at `at` (for `halfLifeWhenShort`, the time it was obtained): `at` itself when
 * it is due now, otherwise the first time it will be.
 */
export function renewAt(token: PolicyToken, rule: RenewAtRule, at: number): number {
  const { expiresAt, renewedAt } = token;
  if (rule.force || expiresAt === undefined) return at;
  if (renewedAt !== undefined && at < renewedAt) return at;
  if (rule.recent) {
    if (renewedAt === undefined || renewedAt < rule.recent.since) return at;
    return Math.max(at, Math.min(expiresAt, renewedAt + rule.recent.withinMs));
  }
  const jitterMs = rule.jitterMs ?? 0;
  if (rule.halfLifeWhenShort) {
    const left = expiresAt - at;
    if (!(left > rule.marginMs + jitterMs)) return at + Math.max(left, 0) / 2;
  }
  return Math.max(at, expiresAt - rule.marginMs - jitterMs);
}

/** Whether `token` should be renewed at `now`: its renewal time under `rule` has come. */
export function due(token: PolicyToken, rule: RenewalRule, now: number): boolean {
  return now >= renewAt(token, { ...rule, halfLifeWhenShort: false }, now);
}

/** A failed renewal as the policy reads it: what the failure means, and the wait the other side asked for. */
export interface RenewalFailure {
  kind: FailureKind;
  retryAfterMs?: number;
}

/** Why a profile stops trying until a person acts: its grant is gone, or a setting or stored file is wrong. */
export type ParkFor = 'reauthorization_needed' | 'configuration_error';

/** Try again after `retryInMs`; `cappedByExpiry` when a Retry-After was cut short so the token does not die waiting. */
export type AfterFailure = { retryInMs: number; cappedByExpiry?: boolean } | { park: ParkFor };

export interface AfterFailureOptions {
  backoff: BackoffPolicy;
  /** Uniform in [0, 1), for the backoff's jitter; called only when a delay is drawn. */
  random: () => number;
  /**
   * The daemon: a Retry-After is honoured, but never past the token's expiry less `safetyMs` (and never less
   * than the backoff's base): a token that dies waiting politely is worse than one request sent too soon.
   */
  expiry?: { expiresAt: number | undefined; safetyMs: number; now: number };
  /**
   * `exec --watch`, which has no one to park for: a failure only a person can cure is tried again this rarely,
   * rather than parked.
   */
  retryParkedEveryMs?: number;
}

/**
 * What follows the `attempt`-th failure in a row (1 for the first): a grant that is gone or a configuration
 * that is wrong parks; anything else is retried after the backoff's delay, or the Retry-After when given.
 */
export function afterFailure(
  failure: RenewalFailure,
  attempt: number,
  options: AfterFailureOptions & { retryParkedEveryMs: number },
): { retryInMs: number; cappedByExpiry?: boolean };
export function afterFailure(failure: RenewalFailure, attempt: number, options: AfterFailureOptions): AfterFailure;
export function afterFailure(failure: RenewalFailure, attempt: number, options: AfterFailureOptions): AfterFailure {
  if (failure.kind === 'terminal' || failure.kind === 'configuration') {
    if (options.retryParkedEveryMs !== undefined) return { retryInMs: options.retryParkedEveryMs };
    return { park: failure.kind === 'terminal' ? 'reauthorization_needed' : 'configuration_error' };
  }
  const waitMs = retryDelay(options.backoff, attempt, options.random, failure.retryAfterMs);
  const bound = options.expiry;
  if (failure.retryAfterMs === undefined || bound === undefined || bound.expiresAt === undefined) return { retryInMs: waitMs };
  const latest = Math.max(options.backoff.baseMs, latestWait({ ...bound, expiresAt: bound.expiresAt }));
  return waitMs <= latest ? { retryInMs: waitMs } : { retryInMs: latest, cappedByExpiry: true };
}

/** The longest a token may wait for a request's turn: until its expiry less the safety window. */
function latestWait(bound: { expiresAt: number; safetyMs: number; now: number }): number {
  return bound.expiresAt - bound.safetyMs - bound.now;
}

/**
 * When a profile paused with its Dropbox account (a 429 another profile met) renews: at a point drawn within
 * `spreadMs` after the pause (and within the pause's own length), so the account's profiles do not all call at
 * once; never later than its token's expiry less the safety window, as for any Retry-After. Undefined: not
 * paused at `now` (the pause has ended, or the token may wait no longer).
 */
export function resumeAfterPause(
  until: number,
  options: { now: number; spreadMs: number; random: () => number; expiresAt: number | undefined; safetyMs: number },
): number | undefined {
  const { now } = options;
  if (until <= now) return undefined;
  const resumeAt = until + options.random() * Math.min(options.spreadMs, until - now);
  const bounded = options.expiresAt === undefined ? resumeAt : Math.min(resumeAt, now + latestWait({ expiresAt: options.expiresAt, safetyMs: options.safetyMs, now }));
  return bounded > now ? bounded : undefined;
}

/**
 * The jitter of a token obtained at a moment the profile did not choose (its worker started, a failure or a pause
 * was over): a draw over its whole renewal window, from `now` to its expiry less the margin, rather than within
 * the usual jitter, so renewals a cold start or an outage bunched are spread at the next lifetime. Never less
 * than the usual draw `usual`.
 */
export function spreadJitter(expiresAt: number, options: { now: number; marginMs: number; usual: number; random: () => number }): number {
  return Math.max(options.usual, options.random() * (expiresAt - options.now - options.marginMs));
}
