// How a profile looks from outside: ready or not and why, for /readyz, status() and the profiles gauge.
import type { ProfileHealth } from './metrics.js';
import type { ProfileRuntime } from './runtime.js';
import type { ProfileStatus } from './types.js';
import { reauthorizeCommand } from '../profile/name.js';

/**
 * Ready means: not parked, and a token known to be unexpired (held here, or renewed by another process or
 * replica); when this process publishes the token, it must hold it itself. A renewal failing while the token
 * is still valid keeps the profile ready, in backoff.
 */
/** What readiness asks of a profile: to hold a token of its own (it publishes one, or runs as a replica), and whether consumers read it from files. */
export interface ReadinessRule {
  needsOwnToken: boolean;
  publishes: boolean;
}

export function healthOf(rt: ProfileRuntime, at: number, rule: ReadinessRule): { health: ProfileHealth; ready: boolean; reason?: string } {
  const { needsOwnToken } = rule;
  if (rt.parked) {
    const { reason, code, message } = rt.parked;
    if (reason === 'reauthorization_needed') {
      return { health: reason, ready: false, reason: `re-authorization needed (${code}): run \`${reauthorizeCommand(rt.name)}\`` };
    }
    if (reason === 'unavailable') return { health: reason, ready: false, reason: `could not be loaded (${code}): ${message}` };
    return { health: reason, ready: false, reason: `configuration error (${code}): ${message}` };
  }
  const waiting: ProfileHealth = rt.inBackoff() ? 'backoff' : 'pending';
  const expiry = rt.expiry(at);
  if (expiry === undefined) return { health: waiting, ready: false, reason: 'no access token yet' };
  if (at >= expiry) return { health: waiting, ready: false, reason: 'the access token expired' };
  if (needsOwnToken && !rt.holdsToken(at)) return { health: waiting, ready: false, reason: 'no access token to publish yet' };
  // Ready only while the files consumers read hold a live token: never while they hold none or an expired one.
  // During a renewal they hold the one before the new token until its write ends; that one is still good, and a
  // probe arriving in between must not see the profile flap to not ready at every renewal.
  if (rule.publishes && !rt.publishedLive(at)) return { health: waiting, ready: false, reason: 'publishing the access token' };
  return { health: rt.inBackoff() ? 'backoff' : 'ready', ready: true };
}

export function profileStatus(rt: ProfileRuntime, at: number, rule: ReadinessRule): ProfileStatus {
  const health = healthOf(rt, at, rule);
  const iso = (ms: number): string => new Date(ms).toISOString();
  const expiresAt = rt.expiry(at);
  return {
    name: rt.name,
    ...(expiresAt !== undefined ? { expiresAt: iso(expiresAt) } : {}),
    holdsToken: rt.holdsToken(at),
    ...(rt.lastRenewal ? { lastRenewal: { at: iso(rt.lastRenewal.at), outcome: rt.lastRenewal.outcome } } : {}),
    ...(rt.lastSuccessAt !== undefined ? { lastSuccessAt: iso(rt.lastSuccessAt) } : {}),
    ...(rt.inBackoff() ? { backoffUntil: iso(rt.wallTimeOf(rt.backoff.until, at)) } : {}),
    ...(rt.parked ? { terminal: { reason: rt.parked.reason, code: rt.parked.code, message: rt.parked.message } } : {}),
    ...(rt.connectorId ? { connectorId: rt.connectorId } : {}),
    ...(rt.config?.reconcile
      ? {
          reconcile: {
            pending: rt.reconcile.pending,
            ...(rt.reconcile.lastOutcome ? { lastOutcome: rt.reconcile.lastOutcome } : {}),
            ...(rt.reconcile.pending ? { retryAt: iso(rt.wallTimeOf(rt.reconcile.backoff.until, at)) } : {}),
          },
        }
      : {}),
    ...(rt.check.at !== undefined || rt.check.off !== undefined
      ? { check: { ...(rt.check.at !== undefined ? { at: iso(rt.check.at) } : {}), ...(rt.check.outcome ? { outcome: rt.check.outcome } : {}), ...(rt.check.off !== undefined ? { off: rt.check.off } : {}) } }
      : {}),
    ready: health.ready,
    ...(health.reason ? { reason: health.reason } : {}),
  };
}
