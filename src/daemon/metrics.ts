// The daemon's Prometheus metrics, in a registry of its own so that several daemons in one process (tests,
// embedding) never mix their series. What the daemon counts is kept in plain maps, which cost a renewal next
// to nothing; prom-client is loaded, and the registry built over those maps, only when someone asks for the
// registry (the health server's /metrics, an embedding program): a daemon that nobody scrapes never loads it.
// Every series is computed when scraped.
//
// The token endpoint's budget (the cap on token requests, the account pauses a 429 starts, the spreading of
// renewals) is counted per daemon with bounded labels only (an outcome, a source): never a profile or an
// account, of which a fleet may serve thousands. Each replica exports its own; Prometheus sums them.
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';
import { isOAuthError } from '../oauth/index.js';
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
  /** `account`: the profile's Dropbox account as far as it is known (for the profiles held by a pause). */
  profiles(): { name: string; expiresAt: number | undefined; health: ProfileHealth; account?: string | undefined }[];
  /** Whether the replicas' coordinator answers; undefined when the daemon runs without one. */
  coordinatorUp?: () => boolean;
  /** Fleet mode's view (the status's `fleet`); undefined, or answering undefined, without a fleet. */
  fleet?: () => FleetMetricsView | undefined;
  /** The token endpoint's budget as the daemon holds it now. */
  budget?: () => BudgetView;
}

/** What the budget's series show. */
export interface BudgetView {
  /**
   * This daemon's cap on token requests a second now (with a fleet, its part of the fleet's cap), and what
   * renewals spent waiting for it (`delayMs`: the waits summed; `waiting`: renewals waiting now); undefined
   * without a cap.
   */
  cap: { perSecond: number; delayed: number; delayMs: number; waiting: number } | undefined;
  /** Accounts paused now, as this daemon knows, and the pauses begun here by where they came from. */
  pauses: { paused: number; begun: { here: number; fleet: number } };
  /** Whether an account is paused now. */
  paused(account: string): boolean;
}

/**
 * What a request to the token endpoint ended in: tokens (`ok`), a 429 (`rate_limited`), the grant refused
 * (`reauthorization_needed`), the app or request refused (`configuration_error`), or no usable answer (`failed`:
 * a 5xx, the network, a timeout, an answer that does not parse).
 */
export type TokenRequestOutcome = 'ok' | 'rate_limited' | 'failed' | 'reauthorization_needed' | 'configuration_error';

const TOKEN_REQUEST_OUTCOMES: readonly TokenRequestOutcome[] = ['ok', 'rate_limited', 'failed', 'reauthorization_needed', 'configuration_error'];

/** The outcome of a token request that ended in `error` (none: it gave tokens); undefined when nothing was sent. */
export function tokenRequestOutcome(error?: unknown): TokenRequestOutcome | undefined {
  if (error === undefined) return 'ok';
  // A grant or setting refused before sending (a ValidationError) sent nothing.
  if (!isOAuthError(error)) return undefined;
  switch (error.kind) {
    case 'rate_limited':
      return 'rate_limited';
    case 'terminal':
      return 'reauthorization_needed';
    case 'configuration':
      return 'configuration_error';
    default:
      return 'failed';
  }
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
  readonly #tokenRequests = new Map<TokenRequestOutcome, number>(TOKEN_REQUEST_OUTCOMES.map((o) => [o, 0]));
  /** Renewals drawn over the renewal window rather than within the usual jitter, and the seconds drawn earlier than it. */
  readonly #spread = { renewals: 0, earlyMs: 0 };
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

  /** A request to the token endpoint ended, in `error` or (none) with tokens; one that sent nothing is not counted. */
  tokenRequest(error?: unknown): void {
    const outcome = tokenRequestOutcome(error);
    if (outcome !== undefined) this.#tokenRequests.set(outcome, (this.#tokenRequests.get(outcome) ?? 0) + 1);
  }

  /** A renewal spread over the window: its jitter `jitterMs` in place of the usual draw `usualMs`; returns `jitterMs`. */
  spread(jitterMs: number, usualMs: number): number {
    this.#spread.renewals += 1;
    this.#spread.earlyMs += Math.max(0, jitterMs - usualMs);
    return jitterMs;
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
    this.#buildBudget(prom, registers);
    prom.collectDefaultMetrics({ register: registry });
    return registry;
  }

  /** The token endpoint's budget: requests by outcome, the cap and the waits for it, the account pauses, the spreading. */
  #buildBudget(prom: typeof PromClient, registers: Registry[]): void {
    const budget = this.#view.budget;
    const requests: PromClient.Counter<'outcome'> = new prom.Counter({
      name: 'syncauth_token_requests_total',
      help: 'Requests to the token endpoint (renewals; token checks call the API, not the token endpoint), by outcome (ok, rate_limited, failed, reauthorization_needed, configuration_error)',
      labelNames: ['outcome'],
      registers,
      collect: () => {
        requests.reset();
        for (const [outcome, n] of this.#tokenRequests) requests.inc({ outcome }, n);
      },
    });
    const spread = this.#spread;
    /** A counter whose total is read from the daemon when scraped. */
    const total = (name: string, help: string, pick: () => number): void => {
      const metric: PromClient.Counter = new prom.Counter({
        name, help, registers,
        collect() {
          metric.reset();
          metric.inc(pick());
        },
      });
    };
    total('syncauth_renewals_spread_total', 'Tokens whose renewal was drawn over the whole renewal window (spreadRenewals: after a start, a failure or a pause) rather than within the usual jitter', () => spread.renewals);
    total('syncauth_renewals_spread_early_seconds_total', "Seconds of token life given up by spreading: how much earlier than the usual draw each spread renewal was set, summed", () => spread.earlyMs / 1000);
    if (!budget) return;
    const gauge = (name: string, help: string, pick: (b: BudgetView) => number): void => {
      const metric: PromClient.Gauge = new prom.Gauge({ name, help, registers, collect: () => metric.set(pick(budget())) });
    };
    const counter = (name: string, help: string, pick: (b: BudgetView) => number): void => total(name, help, () => pick(budget()));
    // The cap is set when the daemon is built (a flag, or a fleet's default): its series are there only with one.
    if (budget().cap !== undefined) {
      const cap = (b: BudgetView): NonNullable<BudgetView['cap']> => b.cap ?? { perSecond: 0, delayed: 0, delayMs: 0, waiting: 0 };
      gauge('syncauth_token_requests_per_second_limit', "This daemon's cap on token requests a second now (with --fleet, its part of the fleet's cap: the cap over the live replicas)", (b) => cap(b).perSecond);
      counter('syncauth_token_requests_delayed_total', 'Renewals that waited for the cap on token requests before sending', (b) => cap(b).delayed);
      counter('syncauth_token_requests_delay_seconds_total', 'Seconds renewals waited for the cap on token requests, summed (its rate: renewals waiting on average)', (b) => cap(b).delayMs / 1000);
      gauge('syncauth_token_requests_waiting', 'Renewals waiting for the cap on token requests now', (b) => cap(b).waiting);
    }
    gauge('syncauth_accounts_paused', 'Dropbox accounts whose token requests and checks are paused now after a 429, as this daemon knows (a pause another replica recorded is known once a renewal here reads it)', (b) => b.pauses.paused);
    const begun: PromClient.Counter<'source'> = new prom.Counter({
      name: 'syncauth_account_pauses_total',
      help: "Pauses of a Dropbox account's token requests begun on this daemon, by source: here (a 429 met by this daemon) or fleet (a record another replica wrote)",
      labelNames: ['source'],
      registers,
      collect() {
        begun.reset();
        const { here, fleet } = budget().pauses.begun;
        begun.inc({ source: 'here' }, here);
        begun.inc({ source: 'fleet' }, fleet);
      },
    });
    const view = this.#view;
    gauge('syncauth_profiles_paused', "Profiles served here whose Dropbox account is paused now: they send no token request or check until the pause ends", (b) => {
      // Nothing paused, nothing held: the profiles are not looked at.
      if (b.pauses.paused === 0) return 0;
      let held = 0;
      for (const profile of view.profiles()) if (profile.account !== undefined && b.paused(profile.account)) held += 1;
      return held;
    });
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
