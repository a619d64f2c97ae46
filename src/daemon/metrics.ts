// The daemon's Prometheus metrics, in a registry of its own so that several daemons in one process (tests,
// embedding) never mix their series. Gauges that follow the clock are computed when scraped.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { ReconcileOutcome, RenewalOutcome } from './types.js';

export type ProfileHealth = 'ready' | 'pending' | 'backoff' | 'reauthorization_needed' | 'configuration_error' | 'unavailable';

export const PROFILE_HEALTH_STATES: readonly ProfileHealth[] = [
  'ready', 'pending', 'backoff', 'reauthorization_needed', 'configuration_error', 'unavailable',
];

export interface MetricsView {
  now(): number;
  /** The renewal margin, in milliseconds: alerts compare a token's remaining life with it. */
  marginMs: number;
  profiles(): { name: string; expiresAt: number | undefined; health: ProfileHealth }[];
  /** Whether the replicas' coordinator answers; undefined when the daemon runs without one. */
  coordinatorUp?: () => boolean;
}

/** Reconcile outcomes that gave the connector a fresh token. */
const RECONCILED: ReadonlySet<ReconcileOutcome> = new Set(['created', 'adopted', 'updated', 'recreated', 'replaced']);

export class DaemonMetrics {
  readonly registry = new Registry();
  readonly #renewals: Counter<'profile' | 'outcome'>;
  readonly #reconciles: Counter<'profile' | 'outcome'>;
  readonly #lastSuccess: Gauge<'profile'>;
  readonly #expiry: Gauge<'profile'>;
  readonly #skipped: Counter<'profile'>;
  readonly #reconcileOk: Gauge<'profile'>;
  readonly #reconcileAt: Gauge<'profile'>;
  readonly #lastSweep: Gauge;
  readonly #reauthorization: Gauge<'profile'>;
  /** Outcome labels used per profile, so that a profile's series can be dropped when it goes. */
  readonly #used = new Map<string, { renewals: Set<string>; reconciles: Set<string> }>();

  constructor(view: MetricsView) {
    const registers = [this.registry];
    this.#renewals = new Counter({
      name: 'syncauth_renewals_total',
      help: 'Renewal attempts by outcome (renewed, fresh, rate_limited, failed, reauthorization_needed, configuration_error)',
      labelNames: ['profile', 'outcome'],
      registers,
    });
    this.#reconciles = new Counter({
      name: 'syncauth_reconciles_total',
      help: 'Connector reconciles by outcome (created, adopted, updated, recreated, replaced, failed, skipped, deferred)',
      labelNames: ['profile', 'outcome'],
      registers,
    });
    this.#skipped = new Counter({
      name: 'syncauth_sweep_skipped_total',
      help: "Sweeps that skipped the profile because its previous cycle was still running (a slow service or endpoint)",
      labelNames: ['profile'],
      registers,
    });
    this.#lastSuccess = new Gauge({
      name: 'syncauth_last_success_timestamp_seconds',
      help: 'When the profile last renewed its access token, in seconds since the epoch',
      labelNames: ['profile'],
      registers,
    });
    const expiry = new Gauge({
      name: 'syncauth_token_expiry_seconds',
      help: "Seconds until the profile's newest access token expires (negative once expired)",
      labelNames: ['profile'],
      registers,
      collect() {
        expiry.reset();
        const now = view.now();
        for (const profile of view.profiles()) {
          if (profile.expiresAt !== undefined) expiry.set({ profile: profile.name }, Math.round((profile.expiresAt - now) / 1000));
        }
      },
    });
    this.#expiry = expiry;
    const states = new Gauge({
      name: 'syncauth_profiles',
      help: 'Profiles served, by state',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = new Map<ProfileHealth, number>(PROFILE_HEALTH_STATES.map((s) => [s, 0]));
        for (const profile of view.profiles()) counts.set(profile.health, (counts.get(profile.health) ?? 0) + 1);
        for (const [state, count] of counts) states.set({ state }, count);
      },
    });
    this.#reconcileOk = new Gauge({
      name: 'syncauth_last_reconcile_success',
      help: "1 when the profile's last reconcile gave the connector its token, 0 when it failed; absent before the first",
      labelNames: ['profile'],
      registers,
    });
    this.#reconcileAt = new Gauge({
      name: 'syncauth_last_reconcile_timestamp_seconds',
      help: "When the profile's last reconcile ended (success or failure), in seconds since the epoch",
      labelNames: ['profile'],
      registers,
    });
    this.#lastSweep = new Gauge({
      name: 'syncauth_last_sweep_timestamp_seconds',
      help: 'When the last sweep started, in seconds since the epoch',
      registers,
    });
    const reauthorization = new Gauge({
      name: 'syncauth_reauthorization_needed',
      help: 'Whether the profile needs re-authorization (1: its grant was revoked or expired; run syncauth setup --profile NAME)',
      labelNames: ['profile'],
      registers,
      collect() {
        reauthorization.reset();
        for (const profile of view.profiles()) reauthorization.set({ profile: profile.name }, profile.health === 'reauthorization_needed' ? 1 : 0);
      },
    });
    this.#reauthorization = reauthorization;
    const margin = new Gauge({ name: 'syncauth_renew_margin_seconds', help: 'Tokens are renewed when less than this is left', registers });
    margin.set(Math.round(view.marginMs / 1000));
    if (view.coordinatorUp) {
      const up = view.coordinatorUp;
      const coordinator = new Gauge({
        name: 'syncauth_coordinator_up',
        help: "Whether the replicas' coordinator (Redis) answers: 0 holds connector reconciles, never renewals",
        registers,
        collect() {
          coordinator.set(up() ? 1 : 0);
        },
      });
    }
    collectDefaultMetrics({ register: this.registry });
  }

  renewal(profile: string, outcome: RenewalOutcome): void {
    this.#renewals.inc({ profile, outcome });
    this.#labelsOf(profile).renewals.add(outcome);
  }

  reconcile(profile: string, outcome: ReconcileOutcome, atMs?: number): void {
    this.#reconciles.inc({ profile, outcome });
    this.#labelsOf(profile).reconciles.add(outcome);
    if (outcome !== 'failed' && !RECONCILED.has(outcome)) return;
    this.#reconcileOk.set({ profile }, outcome === 'failed' ? 0 : 1);
    if (atMs !== undefined) this.#reconcileAt.set({ profile }, Math.round(atMs / 1000));
  }

  swept(atMs: number): void {
    this.#lastSweep.set(Math.round(atMs / 1000));
  }

  skipped(profile: string): void {
    this.#skipped.inc({ profile });
  }

  success(profile: string, atMs: number): void {
    this.#lastSuccess.set({ profile }, Math.round(atMs / 1000));
  }

  /** Drops the series of a profile no longer served. */
  forget(profile: string): void {
    const used = this.#used.get(profile);
    for (const outcome of used?.renewals ?? []) this.#renewals.remove({ profile, outcome });
    for (const outcome of used?.reconciles ?? []) this.#reconciles.remove({ profile, outcome });
    this.#used.delete(profile);
    this.#lastSuccess.remove({ profile });
    this.#expiry.remove({ profile });
    this.#skipped.remove({ profile });
    this.#reconcileOk.remove({ profile });
    this.#reconcileAt.remove({ profile });
    this.#reauthorization.remove({ profile });
  }

  #labelsOf(profile: string): { renewals: Set<string>; reconciles: Set<string> } {
    let used = this.#used.get(profile);
    if (!used) {
      used = { renewals: new Set(), reconciles: new Set() };
      this.#used.set(profile, used);
    }
    return used;
  }
}
