// What the daemon knows about one profile between sweeps: the token it holds, the newest expiry anyone
// reported, when it may try again, and why it stopped trying.
import { Backoff } from '../backoff.js';
import type { ServiceClient } from '../service/index.js';
import { due } from '../sync/renewal-policy.js';
import type { ProfileNotices } from '../notify/transitions.js';
import { grantStoreFromFunctions, type GrantStore } from '../sync/grant-store.js';
import type { CheckOutcome, DaemonGrant, DaemonProfile, ParkReason, ReconcileOutcome, RenewalOutcome } from './types.js';

/** The redaction slot of a profile's access token (see registerSlotSecret in src/redact.ts): one token per profile. */
export function accessTokenSlot(profile: string): string {
  return `access_token:${profile}`;
}

/** A profile as its worker serves it: where its grant is kept is always a GrantStore. */
export type ServedProfile = DaemonProfile & { readonly grants: GrantStore };

/**
 * The one place a profile enters the workers: one given with the six functions of the public profile, and no
 * store, is served through a store that calls them.
 */
export function servedProfile(entry: DaemonProfile): ServedProfile {
  return entry.grants ? (entry as ServedProfile) : { ...entry, grants: grantStoreFromFunctions(entry) };
}

export interface Parked {
  reason: ParkReason;
  code: string;
  message: string;
  /** What ends the parking: new secrets (a different stored secretsVersion), or a state file readable again. */
  until: 'secrets' | 'readable' | 'reload';
  secretsVersion: string | undefined;
}

/**
 * The daemon's two clocks. Neither alone is the truth: NTP can step the wall clock back, and a suspended host
 * stops the monotonic one (Linux's CLOCK_MONOTONIC does not count suspend) while the provider's time runs on.
 */
export interface DaemonClock {
  /** Epoch milliseconds. */
  wall(): number;
  /** Milliseconds that only move forward, at the pace of the process's timers. */
  mono(): number;
}

/** A token as this process holds it: its wall-clock expiry and, as a second reading, receipt + lifetime on the monotonic clock. */
export interface HeldToken {
  value: string;
  expiresAt: number;
  monoExpiresAt: number;
}

export class ProfileRuntime {
  readonly name: string;
  readonly #clock: DaemonClock;
  /** Undefined while the profile could not be loaded. */
  config: ServedProfile | undefined;
  loadError: Error | undefined;
  /** Failed loads in a row, and when (monotonic) to try loading again. */
  loadBackoff = Backoff.none;
  grant: DaemonGrant | undefined;
  /**
   * When the grant in use was issued by a re-authorization (this replica's or one shared through the grant
   * record), epoch ms. Undefined for a grant read from the store or the environment: the store does not record
   * when a grant was stored, so such a grant counts as older than any record.
   */
  grantIssuedAt: number | undefined;
  /** The grant the profile's last load read (from its store or the environment), to tell a reload's news from it. */
  loadedGrant: DaemonGrant | undefined;
  /** The access token this process holds. */
  token: HeldToken | undefined;
  /** The newest expiry known: ours, or one another process or replica recorded. */
  knownExpiresAt: number | undefined;
  /** The same expiry on the monotonic clock, as it read when the expiry was learnt. */
  #knownMonoExpiresAt: number | undefined;
  /** This cycle's share of the jitter: the renewal starts this much before the margin. */
  jitterMs = 0;
  /**
   * The next token held was obtained at a moment the profile did not choose (the worker started, or a renewal
   * had failed and was retried): its renewal is drawn over its whole window, so that renewals bunched by a cold
   * start or an outage do not stay bunched at every lifetime after. Set only when the daemon spreads renewals.
   */
  spreadNext = false;
  /**
   * Failed renewals in a row, and when to try again, on the monotonic clock: a wall clock stepped back an hour
   * must not make a one-second wait last an hour (the reconcile's backoff likewise).
   */
  backoff = Backoff.none;
  parked: Parked | undefined;
  /** The stored secretsVersion the grant in memory was read under. */
  secretsVersion: string | undefined;
  connectorId: string | undefined;
  /** Renew at the next visit whatever the expiry says: a new grant replaced the one the token came from. */
  forceRenewal = false;
  /**
   * Renew at the next visit whatever the expiry says, and why: Dropbox refused the token held (a check), or
   * another process recorded invalid_grant or stored a new grant. Cleared by the next token held or a parking.
   */
  renewSoon: string | undefined;
  /** The `lastError.at` of the state last read: a newer terminal one is another process's news. */
  seenFailureAt: string | undefined;
  /** The account the profile's state records (setup, the daemon, a re-authorization); a check compares it. */
  recordedAccountId: string | undefined;
  /** The token checks: the interval last checked (its index), the last outcome, and why checks are off. */
  check: { cycle: number; at?: number; outcome?: CheckOutcome; off?: string; account?: string } = { cycle: -Infinity };
  /** The profile's state records its Dropbox account (or this process recorded it): nothing more to learn. */
  accountRecorded = false;
  /** The Dropbox account of the grant, once a template asked for it. */
  accountId: string | undefined;
  /** No new attempt to learn it before this (monotonic) time, after a failure. */
  accountRetryAt = 0;
  lastRenewal: { at: number; outcome: RenewalOutcome } | undefined;
  lastSuccessAt: number | undefined;
  /** `awaitsCoordinator`: the reconcile is held only because the coordinator could not be reached. */
  reconcile: { pending: boolean; backoff: Backoff; lastOutcome: ReconcileOutcome | undefined; awaitsCoordinator?: boolean } = {
    pending: false,
    backoff: Backoff.none,
    lastOutcome: undefined,
  };
  /**
   * With replicas: when (monotonic) to look at the shared record again after another replica reconciled. If that replica
   * has not given the connector a newer token by then (it died, stopped, or its clock is wrong), this one does.
   */
  watchSharedAt: number | undefined;
  expiryTimer: NodeJS.Timeout | undefined;
  /** Token-file writes and removals, one after another. */
  fileChain: Promise<void> = Promise.resolve();
  /**
   * The access token the profile's sinks hold now, as far as this process wrote them: the token held, or the one
   * before it while the next is being written.
   */
  published: HeldToken | undefined;
  /** The last token-file write or removal failed (the directory unusable): the sweep tries again. */
  fileFailed = false;
  client: { key: string; client: ServiceClient } | undefined;
  removed = false;
  /** What a person is told about this profile, when someone listens. */
  notices: ProfileNotices | undefined;

  constructor(name: string, clock: DaemonClock) {
    this.name = name;
    this.#clock = clock;
  }

  /**
   * When the held token expires, as the wall clock at `at` should read it: the earlier of its wall-clock
   * expiry and what the monotonic clock says is left. A wall clock stepped back cannot make it look younger,
   * and a wall clock that jumped forward (a host resumed from suspend) counts as time that passed.
   */
  tokenExpiry(at: number): number | undefined {
    const token = this.token;
    return token && this.#earlier(at, token.expiresAt, token.monoExpiresAt);
  }

  /** The newest expiry known, read the same way: the earlier of its wall-clock and monotonic readings. */
  expiry(at: number): number | undefined {
    const known = this.knownExpiresAt;
    if (known === undefined || this.#knownMonoExpiresAt === undefined) return known;
    return this.#earlier(at, known, this.#knownMonoExpiresAt);
  }

  /** An expiry on the wall clock at `at`: its wall-clock reading, or sooner when the monotonic clock says so. */
  #earlier(at: number, expiresAt: number, monoExpiresAt: number): number {
    return Math.min(expiresAt, this.wallTimeOf(monoExpiresAt, at));
  }

  /** Whether what the sinks hold is unexpired at `at`, read as the held token is (both clocks). */
  publishedLive(at: number): boolean {
    const published = this.published;
    return published !== undefined && at < this.#earlier(at, published.expiresAt, published.monoExpiresAt);
  }

  holdsToken(at: number): boolean {
    const expiry = this.tokenExpiry(at);
    return expiry !== undefined && at < expiry;
  }

  /**
   * Takes an expiry. A token this process just received is the newest there is: its expiry (with its monotonic
   * reading) replaces what was known, even when the wall clock stepped back since the last one. An expiry seen
   * elsewhere (the state file, the shared record) is news only when later than the one known; it is read on
   * the monotonic clock from now on.
   */
  learnExpiry(expiresAt: number | undefined, jitterMs: number, ownMonoExpiresAt?: number): void {
    if (expiresAt === undefined || !Number.isFinite(expiresAt)) return;
    if (ownMonoExpiresAt === undefined && this.knownExpiresAt !== undefined && expiresAt <= this.knownExpiresAt) return;
    this.knownExpiresAt = expiresAt;
    this.#knownMonoExpiresAt = ownMonoExpiresAt ?? this.monoTimeOf(expiresAt, this.#clock.wall());
    this.jitterMs = jitterMs;
  }

  /**
   * Whether the token should be renewed now: nothing known, or inside the margin (plus this cycle's jitter).
   * `needsOwnToken`: this process publishes the token, so what counts is the token it holds itself: one that
   * only another process holds, however fresh, leaves its consumers with a token that expires (the renewal
   * then takes the other's token from the secret store when it can, see ProfileRenewer in renewal.ts).
   * The rule itself is the renewal policy's (sync/renewal-policy.ts); the daemon's part is which expiry it
   * judges, read on both clocks, and the renewals it forces.
   */
  renewalDue(at: number, marginMs: number, needsOwnToken: boolean): boolean {
    const expiresAt = needsOwnToken ? this.tokenExpiry(at) : this.expiry(at);
    return due({ expiresAt }, { marginMs, jitterMs: this.jitterMs, force: this.forceRenewal || this.renewSoon !== undefined }, at);
  }

  /**
   * How many times a reconcile was owed: a reconcile that sees it change while it runs knows a newer token
   * arrived meanwhile, and leaves the reconcile pending for it.
   */
  reconcileOwed = 0;

  /** A reconcile is owed now (a fresh token, or a connector whose token is not known): no wait, the last outcome kept. */
  oweReconcile(): void {
    this.reconcileOwed += 1;
    this.reconcile = { pending: true, backoff: Backoff.none, lastOutcome: this.reconcile.lastOutcome };
  }

  /** Whether the reconcile should be tried now: pending and out of backoff, or the shared record is due a look. */
  reconcileDue(): boolean {
    const mono = this.#clock.mono();
    return (this.reconcile.pending && this.reconcile.backoff.ready(mono)) || (this.watchSharedAt !== undefined && mono >= this.watchSharedAt);
  }

  /** The profile's Dropbox account as far as it is known: recorded, found by a check, or learnt for a template. */
  get knownAccount(): string | undefined {
    return this.recordedAccountId ?? this.check.account ?? this.accountId;
  }

  /** Whether renewals wait (backoff or Retry-After). */
  inBackoff(): boolean {
    return !this.backoff.ready(this.#clock.mono());
  }

  /** A time on the monotonic clock, as the wall clock at `at` reads it. */
  wallTimeOf(mono: number, at: number): number {
    return at + (mono - this.#clock.mono());
  }

  /** A wall-clock time, read at `at`, on the monotonic clock. */
  monoTimeOf(wall: number, at: number): number {
    return this.#clock.mono() + (wall - at);
  }

  /** Whether `grant` differs from the one in memory (compared in memory only, never logged). */
  grantDiffers(grant: DaemonGrant, current: DaemonGrant | undefined = this.grant): boolean {
    return !current || current.appKey !== grant.appKey || current.appSecret !== grant.appSecret || current.refreshToken !== grant.refreshToken;
  }
}
