// The daemon's Prometheus metrics, in a registry of its own so that several daemons in one process (tests,
// embedding) never mix their series. What the daemon counts is kept in plain maps, which cost a renewal next
// to nothing; prom-client is loaded, and the registry built over those maps, only when someone asks for the
// registry (the health server's /metrics, an embedding program): a daemon that nobody scrapes never loads it.
// Every series is computed when scraped.
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';
import type { FleetMode } from './fleet.js';
import type { CheckOutcome, ReconcileOutcome, RenewalOutcome } from './types.js';

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
  /** Fleet mode's view (the status's `fleet`); undefined, or answering undefined, without a fleet. */
  fleet?: () => FleetMetricsView | undefined;
}

/** What the fleet's gauges show: the live members this replica sees, its mode, and the shared profiles it serves. */
export interface FleetMetricsView {
  members: number;
  mode: FleetMode;
  served: number;
  shared: number;
}

const FLEET_MODES: readonly FleetMode[] = ['shares', 'last_owned', 'all'];

/** Reconcile outcomes that gave the connector a fresh token. */
const RECONCILED: ReadonlySet<ReconcileOutcome> = new Set(['created', 'adopted', 'updated', 'recreated', 'replaced']);

export class DaemonMetrics {
  readonly #view: MetricsView;
  readonly #renewals = new Map<string, Map<string, number>>();
  readonly #reconciles = new Map<string, Map<string, number>>();
  readonly #checks = new Map<string, Map<string, number>>();
  readonly #skipped = new Map<string, number>();
  /** Seconds since the epoch. */
  readonly #lastSuccess = new Map<string, number>();
  readonly #reconcileOk = new Map<string, 0 | 1>();
  readonly #reconcileAt = new Map<string, number>();
  #lastSweep: number | undefined;
  #registry: Registry | undefined;

  constructor(view: MetricsView) {
    this.#view = view;
  }

  /** The Prometheus registry; built (and prom-client loaded) on first use. */
  get registry(): Registry {
    this.#registry ??= this.#build();
    return this.#registry;
  }

  renewal(profile: string, outcome: RenewalOutcome): void {
    count(this.#renewals, profile, outcome);
  }

  reconcile(profile: string, outcome: ReconcileOutcome, atMs?: number): void {
    count(this.#reconciles, profile, outcome);
    if (outcome !== 'failed' && !RECONCILED.has(outcome)) return;
    this.#reconcileOk.set(profile, outcome === 'failed' ? 0 : 1);
    if (atMs !== undefined) this.#reconcileAt.set(profile, Math.round(atMs / 1000));
  }

  check(profile: string, outcome: CheckOutcome): void {
    count(this.#checks, profile, outcome);
  }

  /** Checks by outcome, across profiles. */
  checkCounts(): Record<string, number> {
    const totals: Record<string, number> = {};
    for (const outcomes of this.#checks.values()) for (const [outcome, n] of outcomes) totals[outcome] = (totals[outcome] ?? 0) + n;
    return totals;
  }

  swept(atMs: number): void {
    this.#lastSweep = Math.round(atMs / 1000);
  }

  skipped(profile: string): void {
    this.#skipped.set(profile, (this.#skipped.get(profile) ?? 0) + 1);
  }

  success(profile: string, atMs: number): void {
    this.#lastSuccess.set(profile, Math.round(atMs / 1000));
  }

  /** Drops the series of a profile no longer served. */
  forget(profile: string): void {
    for (const map of [this.#renewals, this.#reconciles, this.#checks, this.#skipped, this.#lastSuccess, this.#reconcileOk, this.#reconcileAt]) map.delete(profile);
  }

  #build(): Registry {
    const prom = createRequire(import.meta.url)('prom-client') as typeof PromClient;
    const registry = new prom.Registry();
    const registers = [registry];
    const view = this.#view;
    const counter = (name: string, help: string, source: Map<string, Map<string, number>>): void => {
      const metric: PromClient.Counter<'profile' | 'outcome'> = new prom.Counter({
        name, help, labelNames: ['profile', 'outcome'], registers,
        collect() {
          metric.reset();
          for (const [profile, outcomes] of source) for (const [outcome, n] of outcomes) metric.inc({ profile, outcome }, n);
        },
      });
    };
    const perProfile = (name: string, help: string, source: Map<string, number>, kind: 'counter' | 'gauge'): void => {
      const fill = (metric: { reset(): void }, put: (profile: string, value: number) => void): void => {
        metric.reset();
        for (const [profile, value] of source) put(profile, value);
      };
      if (kind === 'counter') {
        const metric: PromClient.Counter<'profile'> = new prom.Counter({
          name, help, labelNames: ['profile'], registers, collect: () => fill(metric, (profile, value) => metric.inc({ profile }, value)),
        });
      } else {
        const metric: PromClient.Gauge<'profile'> = new prom.Gauge({
          name, help, labelNames: ['profile'], registers, collect: () => fill(metric, (profile, value) => metric.set({ profile }, value)),
        });
      }
    };
    counter('syncauth_renewals_total', 'Renewal attempts by outcome (renewed, fresh, rate_limited, failed, reauthorization_needed, configuration_error, handed_over, budget_spent)', this.#renewals);
    counter('syncauth_token_checks_total', 'Checks of the published access token with Dropbox, by outcome (valid, invalid, expired, missing_scope, account_mismatch, failed, shared)', this.#checks);
    counter('syncauth_reconciles_total', 'Connector reconciles by outcome (created, adopted, updated, recreated, replaced, failed, skipped, deferred)', this.#reconciles);
    perProfile('syncauth_sweep_skipped_total', 'Sweeps that skipped the profile because its previous cycle was still running (a slow service or endpoint)', this.#skipped, 'counter');
    perProfile('syncauth_last_success_timestamp_seconds', 'When the profile last renewed its access token, in seconds since the epoch', this.#lastSuccess, 'gauge');
    const expiry: PromClient.Gauge<'profile'> = new prom.Gauge({
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
    const states: PromClient.Gauge<'state'> = new prom.Gauge({
      name: 'syncauth_profiles',
      help: 'Profiles served, by state',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = new Map<ProfileHealth, number>(PROFILE_HEALTH_STATES.map((s) => [s, 0]));
        for (const profile of view.profiles()) counts.set(profile.health, (counts.get(profile.health) ?? 0) + 1);
        for (const [state, n] of counts) states.set({ state }, n);
      },
    });
    perProfile('syncauth_last_reconcile_success', "1 when the profile's last reconcile gave the connector its token, 0 when it failed; absent before the first", this.#reconcileOk, 'gauge');
    perProfile('syncauth_last_reconcile_timestamp_seconds', "When the profile's last reconcile ended (success or failure), in seconds since the epoch", this.#reconcileAt, 'gauge');
    const lastSweep: PromClient.Gauge = new prom.Gauge({
      name: 'syncauth_last_sweep_timestamp_seconds',
      help: 'When the last sweep started, in seconds since the epoch',
      registers,
      collect: () => {
        if (this.#lastSweep !== undefined) lastSweep.set(this.#lastSweep);
      },
    });
    const reauthorization: PromClient.Gauge<'profile'> = new prom.Gauge({
      name: 'syncauth_reauthorization_needed',
      help: 'Whether the profile needs re-authorization (1: its grant was revoked or expired; run syncauth setup --profile NAME)',
      labelNames: ['profile'],
      registers,
      collect() {
        reauthorization.reset();
        for (const profile of view.profiles()) reauthorization.set({ profile: profile.name }, profile.health === 'reauthorization_needed' ? 1 : 0);
      },
    });
    const margin = new prom.Gauge({ name: 'syncauth_renew_margin_seconds', help: 'Tokens are renewed when less than this is left', registers });
    margin.set(Math.round(view.marginMs / 1000));
    if (view.coordinatorUp) {
      const up = view.coordinatorUp;
      const coordinator: PromClient.Gauge = new prom.Gauge({
        name: 'syncauth_coordinator_up',
        help: "Whether the replicas' coordinator (Redis) answers: 0 holds connector reconciles, never renewals",
        registers,
        collect() {
          coordinator.set(up() ? 1 : 0);
        },
      });
    }
    const fleet = view.fleet;
    if (fleet?.() !== undefined) {
      // Fleet mode: a share unserved shows as the served profiles summed across replicas below the shared count.
      const fleetGauge = (name: string, help: string, pick: (f: FleetMetricsView) => number): void => {
        const gauge: PromClient.Gauge = new prom.Gauge({
          name, help, registers,
          collect() {
            const now = fleet();
            if (now) gauge.set(pick(now));
          },
        });
      };
      fleetGauge('syncauth_fleet_members', 'Live members of the fleet as this replica last saw them, itself included', (f) => f.members);
      fleetGauge('syncauth_fleet_served_profiles', 'Shared profiles this replica serves (renews, checks and reconciles) now', (f) => f.served);
      fleetGauge('syncauth_fleet_shared_profiles', 'Profiles shared in the fleet: those this replica publishes nowhere', (f) => f.shared);
      const mode: PromClient.Gauge<'mode'> = new prom.Gauge({
        name: 'syncauth_fleet_mode',
        help: "1 for the replica's fleet mode: shares (Redis answers), last_owned (Redis away: what it owned last), all (Redis away past the bound: every profile)",
        labelNames: ['mode'],
        registers,
        collect() {
          const now = fleet();
          if (now) for (const m of FLEET_MODES) mode.set({ mode: m }, now.mode === m ? 1 : 0);
        },
      });
    }
    prom.collectDefaultMetrics({ register: registry });
    return registry;
  }
}

function count(map: Map<string, Map<string, number>>, profile: string, outcome: string): void {
  let outcomes = map.get(profile);
  if (!outcomes) {
    outcomes = new Map();
    map.set(profile, outcomes);
  }
  outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
}
