// When a sweep's visit of a profile next has work of the profile's own to do, read from its runtime state: the
// renewal (the renewal policy's time, after any backoff or Retry-After), the token's expiry, the reconcile owed
// or its retry, and the look at a shared reconcile record. Anything this cannot place in time (parked, forced,
// a spell a notice watches, a file to publish, work in flight, a reconcile held for the coordinator) is due at
// once. What other processes write to the profile store is seen only at a visit: a caller that drives the sweeps
// itself (the soak, with `schedule: false`) may skip visits before this time only where nothing else writes the
// store. The daemon's own schedule does not use it: it sweeps every minute.
import { renewAt } from '../sync/renewal-policy.js';
import type { ProfileRuntime } from './runtime.js';

export interface VisitDueRule {
  marginMs: number;
  /** The process publishes the token: its own token's expiry is judged, as renewalDue does. */
  needsOwnToken: boolean;
  /** Every visit checks the published files. */
  publishes: boolean;
  /** A visit or a reconcile of the profile is running. */
  busy: boolean;
}

/** The earliest wall-clock time at or after `at` at which a visit may have work to do; `at` when it may now. */
export function visitDueAt(rt: ProfileRuntime, rule: VisitDueRule, at: number): number {
  if (!rt.config || rt.removed || rt.parked || rt.notices || rule.publishes || rule.busy) return at;
  if (rt.renewSoon !== undefined || rt.forceRenewal || rt.reconcile.awaitsCoordinator) return at;
  const expiresAt = rule.needsOwnToken ? rt.tokenExpiry(at) : rt.expiry(at);
  const renewal = renewAt({ expiresAt }, { marginMs: rule.marginMs, jitterMs: rt.jitterMs }, at);
  let next = rt.inBackoff() ? Math.max(renewal, rt.wallTimeOf(rt.backoff.until, at)) : renewal;
  const held = rt.token ? rt.tokenExpiry(at) : undefined;
  if (held !== undefined) next = Math.min(next, held);
  if (rt.config.reconcile) {
    if (rt.reconcile.pending) next = Math.min(next, rt.wallTimeOf(rt.reconcile.backoff.until, at));
    if (rt.watchSharedAt !== undefined) next = Math.min(next, rt.wallTimeOf(rt.watchSharedAt, at));
  }
  return Math.max(at, next);
}
