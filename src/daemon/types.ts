// The daemon's public shapes: what it is given, what it reports.
import type { Registry } from 'prom-client';
import type { Logger } from '../log.js';
import type { TokenSet } from '../oauth/index.js';
import type { TransportOptions } from '../oauth/http.js';
import type { ProfileStore } from '../profile/index.js';
import type { ServiceClientOptions } from '../service/index.js';
import type { Schedule } from '../service/models.js';
import type { FileAccess } from '../publish/file.js';
import type { TemplateSpec } from '../publish/template.js';
import type { GrantStore } from '../sync/grant-store.js';
import type { ProfileSinks } from '../publish/token-file.js';
import type { SinkLocks } from '../publish/sink-lock.js';
import type { Coordinator } from './coordinator.js';
import type { NoticeSink } from './events.js';
import type { ReauthorizationResult, ReauthorizedGrant } from './events.js';

export type { GrantStore } from '../sync/grant-store.js';

/** The Dropbox grant of one profile. */
export interface DaemonGrant {
  appKey: string;
  appSecret: string;
  refreshToken: string;
}

/** Where and how the profile's connector is reconciled after each renewal. */
export interface ReconcileTarget {
  baseUrl: string;
  apiKey: string;
  apiKeyHeader?: string;
  /** The configured connector name; replacements get a time stamp appended. */
  connectorName: string;
  remoteUrl: string;
  recursive: boolean;
  workflow?: { id: string; schedule?: Schedule };
}

/** One profile as the daemon runs it: everything resolved, nothing read from the environment here. */
export interface DaemonProfile {
  name: string;
  tokenUrl: string;
  /** Dropbox's v2 API base, to learn the account id a template may use. */
  dropboxApiUrl?: string;
  grant: DaemonGrant;
  /**
   * Where the grant is kept: read again, a rotated refresh token and a re-authorization's grant stored, the
   * access token shared with other processes, the account recorded (see src/sync/grant-store.ts). The daemon
   * uses it alone; a profile without it is served through the six functions below (each absent: what the
   * store cannot do), which it adapts into one when the profile is loaded.
   */
  grants?: GrantStore;
  /**
   * Reads the grant again from where it is kept. Called when the profile's stored `secretsVersion` changes
   * and once before a profile is parked for `invalid_grant` (another process may have stored a new refresh
   * token). Absent for a grant that cannot change while the process runs (the environment).
   */
  readGrant?: () => Promise<DaemonGrant>;
  /**
   * Stores a whole new grant (re-authorization) where the profile's secrets live, with the account that gave
   * it, and bumps the stored `secretsVersion`; the expiry of the old grant's token is forgotten. Absent when the
   * grant's source is read-only.
   */
  storeGrant?: (grant: DaemonGrant, accountId: string | undefined) => Promise<void>;
  /** Records the Dropbox account of the grant in the profile's state, when none is recorded yet. */
  recordAccount?: (accountId: string) => Promise<void>;
  /** Stores a refresh token Dropbox rotated, before it is used. Absent when the grant's source is read-only. */
  storeRefreshToken?: (refreshToken: string) => Promise<void>;
  /**
   * Keeps each fresh access token where the profile's secrets live, so `syncauth token` and `refresh` in
   * other processes reuse it instead of renewing again. Absent when the secrets are read-only.
   */
  storeAccessToken?: (tokens: TokenSet, grant: DaemonGrant) => Promise<void>;
  /**
   * Reads back the access token kept by `storeAccessToken` (this or another process), when it belongs to
   * `grant`. A daemon that publishes its token takes one another process renewed, rather than renewing again,
   * when its own is due. Absent when the secrets keep no access token (the env store): the daemon renews.
   */
  readAccessToken?: (grant: DaemonGrant) => Promise<{ accessToken: string; expiresAt: number; renewedAt: number } | undefined>;
  /** Absent: the profile is only renewed (no service settings). */
  reconcile?: ReconcileTarget;
}

/** A profile that could not be loaded (keychain out of reach, no grant): served as not ready, retried on reload. */
export interface ProfileLoadFailure {
  name: string;
  error: Error;
}

export type ProfileEntry = DaemonProfile | ProfileLoadFailure;

export interface DaemonOptions {
  /** The profiles, or a loader called at start and again on reload() (SIGHUP). */
  profiles: readonly ProfileEntry[] | (() => Promise<readonly ProfileEntry[]>);
  /**
   * Loads one profile again. A profile that could not be loaded (a broken state file, a locked keychain) is
   * retried with it, with backoff, instead of waiting for a reload.
   */
  loadProfile?: (name: string) => Promise<ProfileEntry>;
  /** Non-secret state: expiry, connector id, secrets version; also the cross-process renewal lock. */
  profileStore: ProfileStore;
  /** Renew when the token has less than this left. */
  renewMarginMs: number;
  /**
   * Each cycle renews up to this much earlier again, drawn at random per profile and cycle, so profiles
   * renewed together drift apart. Default 20% of the margin.
   */
  jitterMs?: number;
  /** node-cron expression of the sweep; `false` runs no schedule (call sweep() yourself). Default `* * * * *`. */
  schedule?: string | false;
  /** Run a sweep at once when started. Default: true when a schedule runs. */
  sweepOnStart?: boolean;
  /**
   * Profiles renewed at the same time, and profiles reconciled at the same time (bounded apart, so a renewal
   * never waits behind a slow reconcile). Default 4.
   */
  concurrency?: number;
  /**
   * Spread renewals over the renewal window: the first token a profile holds after its worker starts, or after
   * a failed renewal, is renewed at a point drawn between now and its expiry less the margin, rather than within
   * the usual jitter, so renewals bunched by a cold start or an outage are spread at the next lifetime (at the
   * cost of one early renewal). Default true with `fleet`, false otherwise.
   */
  spreadRenewals?: boolean;
  /**
   * Cap on token requests per second across profiles. Default: none. In fleet mode it is the fleet's cap, each
   * live replica taking an equal part of it, and defaults to DEFAULT_FLEET_TOKEN_REQUESTS_PER_SECOND (10).
   */
  maxRenewalsPerSecond?: number;
  /**
   * How often each profile's published token is checked with Dropbox (`users/get_current_account`), so that a
   * revoked grant is seen before the next renewal; each profile at its own offset within the interval. 0 turns
   * the checks off. Default 15 min.
   */
  checkIntervalMs?: number;
  /** Token checks per second at most, per daemon and per Dropbox account. Default 1. */
  maxChecksPerSecond?: number;
  /** Deadline of one check. Default 10 s. */
  checkTimeoutMs?: number;
  /**
   * How often (real milliseconds) the daemon looks for checks due; `false` looks only when `checkTick()` is
   * called (a caller on a clock of its own). Default: a second, or a quarter of the interval when shorter.
   */
  checkTickMs?: number | false;
  /** Publish each fresh access token here (0600, atomic); `{profile}` is replaced by the profile name. */
  tokenFile?: string;
  /** Mode and group of the token file and its expiry, e.g. 0640 with a consumer's group. Default 0600. */
  tokenFileAccess?: FileAccess;
  /** Files rendered from each fresh token (see src/publish/template.ts); `{profile}` in a destination as above. */
  templates?: readonly TemplateSpec[];
  /** Profiles' own sinks, by name: an own token file replaces `tokenFile` for the profile, own templates add to `templates`. */
  profileSinks?: ReadonlyMap<string, ProfileSinks>;
  /** Serve each profile's current token, on request only, over this Unix socket (0600 unless a mode is given). */
  socket?: { path: string; mode?: number; gid?: number };
  /** Serve /healthz, /readyz and /metrics here; port 0 picks a free one. */
  listen?: { host: string; port: number };
  /**
   * The locks of the sinks (see src/publish/sink-lock.ts): each file is written only once this process holds
   * its lock, taken here when not taken before (a profile a reload added). The caller takes and gives them back.
   */
  sinkLocks?: SinkLocks;
  /** Shares the work among replicas: per-profile leases and a shared record of the last renewal. */
  coordinator?: Coordinator;
  /**
   * Fleet mode: each profile this replica publishes nowhere (no token file, template or socket here) is renewed,
   * checked and reconciled by one live replica of the fleet, not by every one (see fleet.ts). Needs a coordinator
   * that keeps fleet membership (Redis with SYNCAUTH_GRANT_KEY) and `grantKey`, through which a rotated refresh
   * token or a re-authorization's grant reaches the next owner. `leaseMs`: a member's lease (default 30 s);
   * `fallbackMs`: how long Redis may be away before this replica serves every profile (default the smaller of
   * 5 min and half the margin); `timers: false` leaves the heartbeat to the sweeps (the soak's virtual time).
   */
  fleet?: boolean | { leaseMs?: number; fallbackMs?: number; timers?: boolean };
  logger?: Logger;
  /** Clock in epoch milliseconds. Default Date.now. */
  now?: () => number;
  /**
   * A clock that only moves forward, in milliseconds: a token's remaining life is the smaller of its
   * wall-clock and its monotonic reading. Default performance.now, or `now` when only that is given.
   */
  monotonicNow?: () => number;
  /** Uniform in [0, 1), for jitter. Default Math.random. */
  random?: () => number;
  /** Waits `ms` on the same clock as `now` (only the rate cap waits). Default: real timers. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Exponential backoff of failed renewals and reconciles. Defaults: 1 s doubling, capped at min(60 s, margin / 4). */
  backoff?: { baseMs?: number; maxMs?: number };
  /** Deadline of one token request. Default 15 s. */
  tokenTimeoutMs?: number;
  /**
   * How long a renewal waits for another process holding the profile's lock: longer than the store's stale
   * time (10 s by default), so that a lock left by a killed process is taken over. Default 15 s.
   */
  lockWaitMs?: number;
  /** Deadline of one whole reconcile (every service call it makes); its calls are cancelled then. Default 45 s. */
  reconcileTimeoutMs?: number;
  /** How long close() lets in-flight work finish before cancelling it. Default 10 s. */
  shutdownTimeoutMs?: number;
  /** The service client's own retries within one reconcile. Default 2 retries from 250 ms, at most 2 s apart. */
  serviceRetry?: ServiceClientOptions['retry'];
  /**
   * Told when a person is needed (a profile parked for re-authorization, the loop closed, a connector failing
   * too long, no live token too long); it only queues, delivery is its own (see src/notify/).
   */
  notices?: NoticeSink;
  /**
   * With a coordinator that keeps grant records: the key (32 bytes) sealing the grant a re-authorization brings,
   * so every replica adopts it (see grant-record.ts and grant-sharing.ts). Without it, a re-authorization reaches
   * only the replica that completed it.
   */
  grantKey?: Buffer;
  /**
   * Runs after a re-authorization's grant is stored (or held) by this replica, to put it where a restart reads
   * it (the operator's --on-reauthorized command). Resolves with whether it succeeded; never throws.
   */
  onReauthorized?: (profile: string, grant: DaemonGrant) => Promise<{ ok: boolean; message?: string }>;
  /** How long reconciles of a connector fail before `connector.failing` is told. Default 15 min. */
  connectorFailingAfterMs?: number;
  /** Extra options for every service client (a test's dispatcher, timeouts; each call's overall deadline is 20 s by default). */
  serviceClient?: Pick<ServiceClientOptions, 'dispatcher' | 'timeouts' | 'userAgent'>;
  /**
   * The transport of the Dropbox v2 API calls (the token checks, the account id): a test's or the soak's (the
   * emulator's in-process one). Default: the proxy the environment names, else a direct pool. Token requests
   * keep their own.
   */
  dropboxApiDispatcher?: TransportOptions['dispatcher'];
}

export type RenewalOutcome =
  | 'renewed'
  /**
   * Another process renewed: no token request. When this process publishes its token, it took the one the
   * other kept in the secret store (more than the margin left); otherwise it had nothing to do.
   */
  | 'fresh'
  | 'rate_limited'
  /** Fleet mode: another live replica owns the shared profile now (fleet.ts), so this one sent no token request. */
  | 'handed_over'
  /**
   * The profile has made its token calls of the day (call-budget.ts: 100 in any 24 hours, a burst of 40 then one
   * every 24 minutes), so none was sent; it calls again when the budget gives one back (`backoffUntil`).
   */
  | 'budget_spent'
  | 'failed'
  | 'reauthorization_needed'
  | 'configuration_error';

/**
 * `skipped`: nothing to do (no token to give, or another replica gave the connector one of this lifetime);
 * `deferred`: another replica holds the reconcile lease, or the coordinator is away; tried again shortly.
 */
export type ReconcileOutcome = 'created' | 'adopted' | 'updated' | 'recreated' | 'replaced' | 'failed' | 'skipped' | 'deferred';

export interface SweepEntry {
  profile: string;
  /**
   * What this sweep did: a renewal (with the outcome of the reconcile it started), a reconcile retry, nothing,
   * or nothing because the profile is busy (its previous visit, or a reconcile it owes, still running).
   */
  action: 'renewal' | 'reconcile' | 'idle' | 'parked' | 'in_flight';
  renewal?: RenewalOutcome;
  reconcile?: ReconcileOutcome;
}

export interface SweepReport {
  /** When the sweep started, ISO 8601 on the daemon's clock. */
  at: string;
  profiles: SweepEntry[];
}

export type ParkReason = 'reauthorization_needed' | 'configuration_error' | 'unavailable';

/**
 * What one check of a published token found: `valid`; `invalid` or `expired` (Dropbox refused the token: a
 * renewal starts); `missing_scope` (the app may not ask; checks stop for the profile); `account_mismatch` (the
 * token is another account's than the one recorded); `failed` (network, 5xx, 429, deadline: nothing done);
 * `shared` (another replica checked it this interval).
 */
export type CheckOutcome = 'valid' | 'invalid' | 'expired' | 'missing_scope' | 'account_mismatch' | 'failed' | 'shared';

export interface ProfileStatus {
  name: string;
  /** Expiry of the newest access token known to exist (renewed here, by another process or another replica). */
  expiresAt?: string;
  /** Whether this process holds an unexpired access token (and so can publish it). */
  holdsToken: boolean;
  lastRenewal?: { at: string; outcome: RenewalOutcome };
  lastSuccessAt?: string;
  /** No renewal attempt before this time (backoff or Retry-After). */
  backoffUntil?: string;
  /** Renewals stopped until the secrets change; `message` says what to do. */
  terminal?: { reason: ParkReason; code: string; message: string };
  connectorId?: string;
  reconcile?: { lastOutcome?: ReconcileOutcome; retryAt?: string; pending: boolean };
  /** The last check of the published token with Dropbox; `off` says why checks stopped for the profile. */
  check?: { at?: string; outcome?: CheckOutcome; off?: string };
  ready: boolean;
  /** Why the profile is not ready. */
  reason?: string;
}

export interface DaemonStatus {
  ready: boolean;
  /**
   * The token checks: how often, at most how many a second, and so how long a revoked grant may go unnoticed
   * with the profiles served (absent when checks are off).
   */
  checks?: { intervalSeconds: number; maxPerSecond: number; noticeWithinSeconds: number };
  coordinator?: { available: boolean };
  /**
   * Fleet mode: this replica's id, the live members it sees, how it decides (`shares`; `last_owned` or `all`
   * while Redis is away), and how many shared profiles it serves of those configured.
   */
  fleet?: { replica: string; members: number; mode: 'shares' | 'last_owned' | 'all'; served: number; shared: number };
  profiles: ProfileStatus[];
}

export interface SweepOptions {
  /**
   * For a caller that drives the sweeps itself (`schedule: false`), where no other process writes the profile
   * store: visits only the profiles whose own next due time (nextDueAt) has come, and reports the others idle,
   * as a visit would find them. A visit is also where a profile sees what other processes wrote to the store, so
   * the daemon's own schedule never skips one.
   */
  onlyDue?: boolean;
}

export interface RunningDaemon {
  /** Renews what is due and retries pending reconciles; resolves when the work it started is done. */
  sweep(options?: SweepOptions): Promise<SweepReport>;
  /**
   * Checks the published tokens whose time has come (each profile once per check interval, at its own offset,
   * within the rate caps); resolves when the checks it started, and the renewals they started, have ended.
   * The daemon calls it by itself unless `checkTickMs` is false.
   */
  checkTick(): Promise<void>;
  /**
   * For a caller that drives the sweeps itself (`schedule: false`): the earliest wall-clock time at which a sweep
   * may have work to do, from this process's own state; a sweep before it finds nothing due unless another
   * process wrote the profile store meanwhile.
   */
  nextDueAt(): number;
  /** A fleet with `timers: false`: the heartbeat a sweep begins with, without the visits. */
  heartbeat(): Promise<void>;
  /** Resolves once the template renders started so far have ended (each read has a deadline); for a one-shot run. */
  rendersSettled(): Promise<void>;
  /**
   * Calls the profile loader again: adds, updates and removes profiles, keeping what is known about the rest.
   * `profileSinks`, when given, replaces every profile's own sinks: a profile whose sinks change is stopped (its
   * old token file removed) and started again on the new ones.
   */
  reload(options?: { profileSinks?: ReadonlyMap<string, ProfileSinks> }): Promise<void>;
  status(): DaemonStatus;
  /**
   * A new grant for `profile` from re-authorization: stored where the profile's secrets live (when writable),
   * the profile un-parked and renewed with it, the connector reconciled and the service's connection check run.
   * Resolves with what happened; never throws.
   */
  reauthorized(profile: string, grant: ReauthorizedGrant): Promise<ReauthorizationResult>;
  /** `http://127.0.0.1:PORT` of the health server, when listening. */
  readonly url: string | undefined;
  readonly registry: Registry;
  /** Stops the schedule, lets in-flight work finish (bounded), closes the server and the coordinator. */
  close(): Promise<void>;
}
