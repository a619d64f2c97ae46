// The sidecar's core: one process serving many profiles. A sweep (node-cron, or a caller) finds tokens
// inside the renewal margin and renews each under the profile's locks (a replica lease when coordinated, the
// profile store's lock across processes, single flight within this one), re-reading what others recorded
// first. After each renewal the token is published and the connector reconciled. Everything comes in as
// options, the clock included, so a test can live through many token lifetimes in a second.
import { setTimeout as delay } from 'node:timers/promises';
import { SyncauthError, ValidationError } from '../errors.js';
import { createLogger, type Logger } from '../log.js';
import { isOAuthError, type TokenSet } from '../oauth/index.js';
import { isProfileStoreError, type ProfileState } from '../profile/index.js';
import { ServiceClient } from '../service/index.js';
import { reconcileConnector } from '../sync/reconcile.js';
import { baseState, renewHoldingLock } from '../sync/renew.js';
import { retryDelay, type BackoffPolicy } from './backoff.js';
import { classifyFailure, type Failure } from './classify.js';
import type { Coordinator, Lease, SharedReconcile } from './coordinator.js';
import { checkSchedule, scheduleSweeps, type ClockJump, type SweepSchedule } from './cron.js';
import { RateGate, Semaphore } from './limiter.js';
import { DaemonMetrics } from './metrics.js';
import { ProfileRuntime, type DaemonClock, type HeldToken } from './runtime.js';
import { startHealthServer, type HealthServer } from './server.js';
import { healthOf, profileStatus } from './status.js';
import { reauthorizeCommand } from '../profile/name.js';
import { TokenPublisher, checkTokenFileTemplate, readTokenFile, removeLeftovers, tokenFileFor } from './token-file.js';
import { getCurrentAccount } from '../oauth/api.js';
import { removeTemporaryLeftovers } from '../profile/files.js';
import { ACCOUNT_ID_TIMEOUT_MS, TemplateRenderer, templatesUse } from '../publish/template.js';
import { startTokenSocket, type TokenSocket } from '../publish/socket.js';
import type {
  DaemonGrant,
  DaemonOptions,
  DaemonProfile,
  DaemonStatus,
  ParkReason,
  ProfileEntry,
  ProfileLoadFailure,
  ReconcileOutcome,
  RenewalOutcome,
  RunningDaemon,
  SweepEntry,
  SweepReport,
} from './types.js';

export type * from './types.js';
export type { Coordinator, Lease, SharedReconcile } from './coordinator.js';
export { CoordinatorUnavailableError, isCoordinatorUnavailable } from './coordinator.js';
export { createRedisCoordinator, checkRedisUrl, redisTarget } from './redis.js';
export type { RedisCoordinator, RedisCoordinatorOptions } from './redis.js';
export { checkSchedule } from './cron.js';
export { reauthorizeCommand } from '../profile/name.js';
export { checkTokenFileTemplate, tokenFileFor, PROFILE_PLACEHOLDER } from './token-file.js';

export const DEFAULT_SCHEDULE = '* * * * *';
export const DEFAULT_CONCURRENCY = 4;

const DEFAULT_SERVICE_RETRY = { retries: 2, baseDelayMs: 250, maxDelayMs: 2_000 };
/** One service exchange, whole; a reconcile makes a few, and has a deadline of its own. */
const DEFAULT_SERVICE_CALL_MS = 20_000;
const DEFAULT_RECONCILE_TIMEOUT_MS = 45_000;
/**
 * A Retry-After never makes the daemon wait past the token's expiry less this window (60 s, or half the margin
 * when that is shorter); a token file left by an earlier run is kept only while its token has more than it.
 */
const SAFETY_WINDOW_MS = 60_000;

export function isLoadFailure(entry: ProfileEntry): entry is ProfileLoadFailure {
  return 'error' in entry;
}

export async function startDaemon(options: DaemonOptions): Promise<RunningDaemon> {
  const margin = options.renewMarginMs;
  if (!(Number.isFinite(margin) && margin > 0)) throw new ValidationError([{ field: 'renewMarginMs', message: 'must be a positive number' }]);
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new ValidationError([{ field: 'concurrency', message: 'must be a whole number of at least 1' }]);
  const rate = options.maxRenewalsPerSecond;
  if (rate !== undefined && !(Number.isFinite(rate) && rate > 0)) {
    throw new ValidationError([{ field: 'maxRenewalsPerSecond', message: 'must be a positive number' }]);
  }
  const scheduleExpression = options.schedule === undefined ? DEFAULT_SCHEDULE : options.schedule;
  if (scheduleExpression !== false) checkSchedule(scheduleExpression);

  const log: Logger = options.logger ?? createLogger();
  const now = options.now ?? Date.now;
  // A test that moves the wall clock by hand moves this one with it, unless it gives both.
  const mono = options.monotonicNow ?? options.now ?? (() => performance.now());
  const clock: DaemonClock = { wall: now, mono };
  const reconcileTimeoutMs = options.reconcileTimeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS;
  const safetyMs = Math.min(SAFETY_WINDOW_MS, margin / 2);
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? ((ms: number, signal?: AbortSignal) => delay(ms, undefined, signal ? { signal } : {}));
  const jitterMs = options.jitterMs ?? margin * 0.2;
  const backoff: BackoffPolicy = {
    baseMs: options.backoff?.baseMs ?? 1_000,
    maxMs: options.backoff?.maxMs ?? Math.min(60_000, margin / 4),
  };
  const tokenTimeoutMs = options.tokenTimeoutMs ?? 15_000;
  const lockWaitMs = options.lockWaitMs ?? 15_000;
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 10_000;
  const { profileStore: store, coordinator, tokenFile } = options;
  // A process that hands the token to consumers must hold one itself. So must every replica: each renews its
  // own (access tokens of one grant coexist), and one of them gives the connector its token per lifetime.
  const templates = options.templates && options.templates.length > 0 ? new TemplateRenderer(options.templates, log) : undefined;
  const needsOwnToken = tokenFile !== undefined || templates !== undefined || options.socket !== undefined || coordinator !== undefined;
  const readiness = { needsOwnToken, publishes: tokenFile !== undefined || templates !== undefined };
  const semaphore = new Semaphore(concurrency);
  const rateGate = rate === undefined ? undefined : new RateGate(rate, now, sleep);
  const shutdown = new AbortController();
  const runtimes = new Map<string, ProfileRuntime>();
  let closing: Promise<void> | undefined;
  let coordinatorDownSince: number | undefined;

  const drawJitter = (): number => random() * jitterMs;
  const loadEntries = async (): Promise<readonly ProfileEntry[]> =>
    typeof options.profiles === 'function' ? options.profiles() : options.profiles;

  // ---- the token file ----

  const files = new TokenPublisher({
    template: tokenFile,
    ...(options.tokenFileAccess ? { access: options.tokenFileAccess } : {}),
    ...(templates ? { templates, accountId: (name: string, accessToken: string) => accountIdOf(name, accessToken) } : {}),
    now,
    log,
  });

  /**
   * The Dropbox account id, for templates that use it: learnt once per profile from the account endpoint,
   * within a short deadline, and after a failure not asked again for a minute (the render that needs it fails
   * and keeps its previous file meanwhile; the token file and the other templates do not wait).
   */
  async function accountIdOf(name: string, accessToken: string): Promise<string | undefined> {
    const rt = runtimes.get(name);
    const apiUrl = rt?.config?.dropboxApiUrl;
    if (!rt || rt.accountId || !apiUrl || mono() < rt.accountRetryAt || !(await templatesUse(options.templates ?? [], 'account_id'))) return rt?.accountId;
    try {
      rt.accountId = (await getCurrentAccount({ apiUrl, accessToken, timeoutMs: ACCOUNT_ID_TIMEOUT_MS, signal: shutdown.signal })).accountId;
    } catch (error) {
      rt.accountRetryAt = mono() + 60_000;
      log.warn({ profile: name, event: 'account.unknown', op: 'publish', error: classifyFailure(error).message }, `could not learn the Dropbox account id of profile "${name}" for its templates`);
    }
    return rt.accountId;
  }


  function dropToken(rt: ProfileRuntime): Promise<void> {
    rt.token = undefined;
    clearTimeout(rt.expiryTimer);
    rt.expiryTimer = undefined;
    return files.unpublish(rt);
  }

  function expireIfDue(rt: ProfileRuntime, at: number): Promise<void> {
    if (!rt.token || rt.holdsToken(at)) return Promise.resolve();
    // With replicas, the token this one holds may simply be older than the one another replica renewed.
    if ((rt.knownExpiresAt ?? 0) > rt.token.expiresAt) log.debug({ profile: rt.name, event: 'token.expired', op: 'publish', older: true }, 'an older access token expired; another process holds the current one');
    else log.warn({ profile: rt.name, event: 'token.expired', op: 'publish' }, `the access token of profile "${rt.name}" expired before a renewal succeeded`);
    return dropToken(rt);
  }

  function holdToken(rt: ProfileRuntime, token: HeldToken): void {
    clearTimeout(rt.expiryTimer);
    rt.token = token;
    rt.learnExpiry(token.expiresAt, drawJitter(), token.monoExpiresAt);
    // Between sweeps too: a token must leave the file the moment it expires, not at the next tick. Timers run
    // on the monotonic clock; a wall clock that jumps past the expiry is caught by the schedule's heartbeat.
    const at = now();
    rt.expiryTimer = setTimeout(() => void expireIfDue(rt, now()), Math.max(0, (rt.tokenExpiry(at) ?? at) - at));
    rt.expiryTimer.unref();
  }

  /**
   * A token file left by an earlier run stays while its token has more than the safety window to live, so
   * consumers keep working through a restart; this process takes it as the token it holds. Anything else
   * there (an expired token, one of unknown age, a leftover temporary file) goes.
   */
  async function adoptPublished(rt: ProfileRuntime): Promise<void> {
    await removeTemporaryLeftovers((options.templates ?? []).map((spec) => tokenFileFor(spec.dest, rt.name)), 0);
    const file = files.pathOf(rt.name);
    if (file === undefined) return;
    await removeLeftovers(file);
    const left = rt.parked ? undefined : await readTokenFile(file).catch(() => undefined);
    const at = now();
    if (!left || left.expiresAt - at <= safetyMs) {
      await files.unpublish(rt);
      return;
    }
    holdToken(rt, { value: left.value, expiresAt: left.expiresAt, monoExpiresAt: mono() + (left.expiresAt - at) });
    // Templates are rendered again from it: one added since the last run gets its file now.
    if (templates) await files.publish(rt);
    else rt.publishedToken = left.value;
    log.info({ profile: rt.name, event: 'token.adopted', op: 'publish', expiresAt: new Date(left.expiresAt).toISOString() }, `kept the published access token of profile "${rt.name}"; it is still valid`);
  }

  // ---- profiles ----

  function park(rt: ProfileRuntime, reason: ParkReason, failure: Failure, until: 'secrets' | 'readable' | 'reload', secretsVersion: string | undefined): void {
    const already = rt.parked?.reason === reason && rt.parked.code === failure.code;
    rt.parked = { reason, code: failure.code, message: failure.message, until, secretsVersion };
    if (reason === 'reauthorization_needed') void dropToken(rt);
    if (already) return;
    if (reason === 'reauthorization_needed') {
      log.error(
        { profile: rt.name, event: 'profile.reauthorization_needed', op: 'renew', errorCode: failure.code },
        `profile "${rt.name}" needs re-authorization: ${failure.message}. Run \`${reauthorizeCommand(rt.name)}\` to authorize again; ` +
          'the daemon stops renewing this profile until its secrets change.',
      );
    } else {
      log.error(
        { profile: rt.name, event: 'profile.parked', op: 'renew', errorCode: failure.code },
        `profile "${rt.name}" cannot be renewed: ${failure.message}${failure.hint ? ` (${failure.hint})` : ''}. ` +
          `Fix it (e.g. \`${reauthorizeCommand(rt.name)}\`); the daemon stops renewing this profile until its secrets change or it reloads (SIGHUP).`,
      );
    }
  }

  function unpark(rt: ProfileRuntime, why: string): void {
    if (!rt.parked) return;
    rt.parked = undefined;
    rt.failures = 0;
    rt.retryAt = 0;
    log.info({ profile: rt.name, event: 'profile.resumed', op: 'load' }, `profile "${rt.name}": ${why}; renewing it again`);
  }

  async function readState(rt: ProfileRuntime): Promise<ProfileState | undefined> {
    return store.read(rt.name);
  }

  /** At start and when a profile is added: what the state file says about expiry, connector and secrets. */
  async function observeInitialState(rt: ProfileRuntime): Promise<void> {
    try {
      const state = await readState(rt);
      rt.secretsVersion = state?.secretsVersion;
      rt.connectorId = state?.connectorId;
      if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), drawJitter());
      if (state?.needsReauthorization) {
        // Flagged by an earlier run or by another command: known now, not at the next renewal hours from now.
        const failure: Failure = {
          kind: 'terminal',
          code: state.lastError?.code ?? 'OAUTH_INVALID_GRANT',
          message: state.lastError?.message ?? 'the grant was revoked or has expired',
        };
        park(rt, 'reauthorization_needed', failure, 'secrets', state.secretsVersion);
      }
    } catch (error) {
      park(rt, 'configuration_error', classifyFailure(error), 'readable', undefined);
    }
  }

  function applyEntry(rt: ProfileRuntime, entry: ProfileEntry): void {
    if (isLoadFailure(entry)) {
      if (rt.config) {
        // A profile that ran before keeps its last good settings: a keychain locked during a reload must not
        // stop renewals that were working.
        log.warn({ profile: rt.name, event: 'profile.reload_failed', op: 'load', error: entry.error.message }, `profile "${rt.name}" could not be reloaded; keeping its previous settings`);
        return;
      }
      rt.loadError = entry.error;
      const failure = classifyFailure(entry.error);
      if (!rt.parked || rt.parked.reason !== 'unavailable') {
        log.error({ profile: rt.name, event: 'profile.load_failed', op: 'load', errorCode: failure.code }, `profile "${rt.name}" could not be loaded: ${failure.message}${failure.hint ? ` (${failure.hint})` : ''}`);
      }
      rt.parked = { reason: 'unavailable', code: failure.code, message: failure.message, until: 'reload', secretsVersion: undefined };
      return;
    }
    const grantChanged = rt.grant !== undefined && rt.grantDiffers(entry.grant);
    const targetKey = entry.reconcile ? JSON.stringify(entry.reconcile) : '';
    if (rt.client && rt.client.key !== targetKey) {
      void rt.client.client.close();
      rt.client = undefined;
    }
    rt.config = entry;
    rt.grant = entry.grant;
    rt.loadError = undefined;
    if (rt.parked && grantChanged) unpark(rt, 'its secrets changed');
  }

  async function addProfile(entry: ProfileEntry): Promise<ProfileRuntime> {
    const rt = new ProfileRuntime(entry.name, clock);
    applyEntry(rt, entry);
    if (!rt.parked) await observeInitialState(rt);
    await adoptPublished(rt);
    return rt;
  }

  async function maybeUnpark(rt: ProfileRuntime): Promise<void> {
    const parked = rt.parked;
    if (!parked || parked.until === 'reload' || !rt.config) return;
    let state: ProfileState | undefined;
    try {
      state = await readState(rt);
    } catch {
      return;
    }
    if (parked.until === 'secrets' && state?.secretsVersion === parked.secretsVersion) return;
    if (rt.config.readGrant) {
      try {
        rt.grant = await rt.config.readGrant();
      } catch (error) {
        log.warn({ profile: rt.name, event: 'profile.secrets_unreadable', op: 'load', error: classifyFailure(error).message }, `profile "${rt.name}": could not read its new secrets`);
        return;
      }
    }
    rt.secretsVersion = state?.secretsVersion;
    if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), drawJitter());
    unpark(rt, parked.until === 'readable' ? 'its state file is readable again' : 'new secrets were stored');
  }

  // ---- the service ----

  function clientFor(rt: ProfileRuntime, profile: DaemonProfile): ServiceClient | undefined {
    const target = profile.reconcile;
    if (!target) return undefined;
    const key = JSON.stringify(target);
    if (rt.client?.key === key) return rt.client.client;
    const client = new ServiceClient({
      baseUrl: target.baseUrl,
      apiKey: target.apiKey,
      ...(target.apiKeyHeader ? { apiKeyHeader: target.apiKeyHeader } : {}),
      retry: options.serviceRetry ?? DEFAULT_SERVICE_RETRY,
      ...options.serviceClient,
      timeouts: { totalMs: DEFAULT_SERVICE_CALL_MS, ...options.serviceClient?.timeouts },
    });
    rt.client = { key, client };
    return client;
  }

  /** Gives up on the profile's service calls in flight; the next reconcile opens a new client. */
  function abandonClient(rt: ProfileRuntime): void {
    const held = rt.client;
    if (!held) return;
    rt.client = undefined;
    held.client.cancel();
    void held.client.close().catch(() => undefined);
  }

  /**
   * One reconcile, outside the renewal lock (a slow service must not keep other processes from renewing) and
   * within its own deadline; a failure schedules a retry and never touches the renewal.
   */
  async function reconcileNow(rt: ProfileRuntime, profile: DaemonProfile, sharedConnectorId?: string): Promise<ReconcileOutcome> {
    const target = profile.reconcile;
    const token = rt.token;
    const grant = rt.grant;
    if (!target || !grant || !token || !rt.holdsToken(now())) {
      // Never hand the service an expired token; the next renewal reconciles with a fresh one.
      rt.reconcile.pending = false;
      return 'skipped';
    }
    const client = clientFor(rt, profile) as ServiceClient;
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      abandonClient(rt);
    }, reconcileTimeoutMs);
    try {
      const state = await readState(rt);
      const result = await reconcileConnector({
        client,
        connector: {
          name: target.connectorName,
          remoteUrl: target.remoteUrl,
          recursive: target.recursive,
          appKey: grant.appKey,
          appSecret: grant.appSecret,
          refreshToken: grant.refreshToken,
          accessToken: token.value,
        },
        ...(state?.connectorId || sharedConnectorId ? { connectorId: (state?.connectorId ?? sharedConnectorId) as string } : {}),
        ...(target.workflow ? { workflow: target.workflow } : {}),
        now: () => new Date(now()),
      });
      // The configured name, not the connector's: a replacement's time stamp must not become the next base name.
      await store.update(rt.name, (current) => ({ ...baseState(current), connectorId: result.connector.id, connectorName: target.connectorName }));
      rt.connectorId = result.connector.id;
      rt.reconcile = { pending: false, failures: 0, retryAt: 0, lastOutcome: result.action };
      metrics.reconcile(rt.name, result.action, now());
      const detail = { profile: rt.name, event: `reconcile.${result.action}`, op: 'reconcile', connectorId: result.connector.id, action: result.action, removed: result.removed, workflow: result.workflowAction };
      if (result.action === 'updated' && result.workflowAction !== 'updated') log.debug(detail, 'connector reconciled');
      else log.info(detail, `connector of profile "${rt.name}" ${result.action}`);
      return result.action;
    } catch (caught) {
      const error = timedOut
        ? new SyncauthError('RECONCILE_TIMEOUT', `the service did not finish the reconcile within ${Math.round(reconcileTimeoutMs / 1000)} s`, { cause: caught })
        : caught;
      const failure = classifyFailure(error);
      metrics.reconcile(rt.name, 'failed', now());
      rt.reconcile.lastOutcome = 'failed';
      if (failure.kind === 'configuration' || failure.kind === 'terminal') {
        // Retrying a request the service refuses is noise; the next renewal tries again with fresh values.
        rt.reconcile.pending = false;
        log.error(
          { profile: rt.name, event: 'reconcile.failed', op: 'reconcile', errorCode: failure.code, retry: 'next_renewal' },
          `could not reconcile the connector of profile "${rt.name}": ${failure.message}${failure.hint ? ` (${failure.hint})` : ''}; trying again after the next renewal`,
        );
      } else {
        const wait = retryDelay(backoff, rt.reconcile.failures, random, failure.retryAfterMs);
        rt.reconcile.failures += 1;
        rt.reconcile.pending = true;
        rt.reconcile.retryAt = now() + wait;
        log.warn(
          { profile: rt.name, event: 'reconcile.failed', op: 'reconcile', errorCode: failure.code, retryInMs: wait },
          `could not reconcile the connector of profile "${rt.name}": ${failure.message}; trying again in ${Math.ceil(wait / 1000)} s`,
        );
      }
      return 'failed';
    } finally {
      clearTimeout(deadline);
    }
  }

  /**
   * With replicas, one reconciles per lifetime: the replica that takes the profile's lease while the token the
   * connector holds (the shared record) is inside the renewal window; the others find the record fresh and
   * skip. A replica that finds the lease taken, or cannot reach the coordinator, keeps its reconcile pending
   * and looks again, so a replica that died holding the lease is covered by the next one.
   */
  async function reconcileShared(rt: ProfileRuntime, profile: DaemonProfile, shared: Coordinator): Promise<ReconcileOutcome> {
    const token = rt.token;
    if (!token || !rt.holdsToken(now())) {
      rt.reconcile.pending = false;
      return 'skipped';
    }
    // The connector's token is due when it would be renewed now: inside the margin plus the largest jitter.
    const due = (record: SharedReconcile | undefined): boolean => !record || record.expiresAt - now() <= margin + jitterMs;
    let lease: Lease | undefined;
    try {
      if (!due(await shared.lastReconcile(rt.name))) return reconciledElsewhere(rt);
      lease = await shared.acquire(rt.name);
      coordinatorUp();
      if (!lease) return deferReconcile(rt, backoff.baseMs * (1 + random()));
      const record = await shared.lastReconcile(rt.name);
      if (!due(record)) return reconciledElsewhere(rt);
      const outcome = await reconcileNow(rt, profile, record?.connectorId);
      if (outcome === 'failed' || outcome === 'skipped') return outcome;
      const connectorId = rt.connectorId;
      await shared
        .recordReconcile(rt.name, { expiresAt: token.expiresAt, reconciledAt: now(), replica: shared.replicaId, ...(connectorId ? { connectorId } : {}) })
        .catch((error: unknown) =>
          log.warn({ profile: rt.name, event: 'reconcile.unshared', op: 'reconcile', error: classifyFailure(error).message }, 'could not tell the other replicas about the reconcile'),
        );
      return outcome;
    } catch (error) {
      coordinatorDown(error);
      const wait = retryDelay(backoff, rt.reconcile.failures, random, undefined);
      rt.reconcile.failures += 1;
      return deferReconcile(rt, wait);
    } finally {
      await lease?.release();
    }
  }

  function reconciledElsewhere(rt: ProfileRuntime): ReconcileOutcome {
    rt.reconcile.pending = false;
    rt.reconcile.failures = 0;
    metrics.reconcile(rt.name, 'skipped');
    log.debug({ profile: rt.name, event: 'reconcile.skipped', op: 'reconcile' }, 'another replica gave the connector a token of this lifetime');
    return 'skipped';
  }

  /** The reconcile waits: another replica holds the lease, or the coordinator is away. */
  function deferReconcile(rt: ProfileRuntime, waitMs: number): ReconcileOutcome {
    rt.reconcile.pending = true;
    rt.reconcile.retryAt = now() + waitMs;
    metrics.reconcile(rt.name, 'deferred');
    return 'deferred';
  }

  // ---- renewal ----

  function settle(rt: ProfileRuntime, outcome: RenewalOutcome): RenewalOutcome {
    rt.lastRenewal = { at: now(), outcome };
    metrics.renewal(rt.name, outcome);
    return outcome;
  }

  function coordinatorDown(error: unknown): void {
    if (coordinatorDownSince !== undefined) return;
    coordinatorDownSince = now();
    log.warn(
      { event: 'coordinator.down', op: 'reconcile', errorCode: 'COORDINATOR_UNAVAILABLE', error: classifyFailure(error).message },
      'the coordinator is unreachable: connector reconciles wait until it is back; every token this replica publishes is still renewed',
    );
  }

  function coordinatorUp(): void {
    if (coordinatorDownSince === undefined) return;
    coordinatorDownSince = undefined;
    log.info({ event: 'coordinator.up', op: 'reconcile' }, 'the coordinator is reachable again; held reconciles go ahead');
  }

  async function keepRefreshToken(rt: ProfileRuntime, profile: DaemonProfile, refreshToken: string): Promise<void> {
    // In memory first: whatever happens to the store, this process keeps the grant alive.
    if (rt.grant) rt.grant = { ...rt.grant, refreshToken };
    if (profile.storeRefreshToken) {
      try {
        await profile.storeRefreshToken(refreshToken);
      } catch (error) {
        // Not used before it is stored: the renewal counts as failed and is retried (with the token in memory),
        // storing again each time, however the store classifies its own failure.
        throw new SyncauthError('REFRESH_TOKEN_NOT_STORED', `Dropbox rotated the refresh token of profile "${rt.name}" and storing the new one failed: ${classifyFailure(error).message}`, {
          cause: error,
        });
      }
      log.info({ profile: rt.name, event: 'grant.rotated', op: 'renew' }, `Dropbox rotated the refresh token of profile "${rt.name}"; the new one is stored`);
    } else {
      log.warn(
        { profile: rt.name, event: 'grant.rotated', op: 'renew', stored: false },
        `Dropbox rotated the refresh token of profile "${rt.name}", and its secrets are read-only here: the new one is kept in memory only. ` +
          `Store it where the grant comes from (run \`${reauthorizeCommand(rt.name)}\`) before this process stops.`,
      );
    }
  }

  /** A failure to share the token with other processes costs them a renewal of their own, not this one. */
  async function shareAccessToken(rt: ProfileRuntime, profile: DaemonProfile, tokens: TokenSet, grant: DaemonGrant): Promise<void> {
    try {
      await profile.storeAccessToken?.(tokens, grant);
    } catch (error) {
      log.warn({ profile: rt.name, event: 'token.unshared', op: 'renew', error: classifyFailure(error).message }, `could not keep the access token of profile "${rt.name}" in its secret store; other commands will renew their own`);
    }
  }

  /** Holds and publishes the fresh token and records the renewal; the reconcile comes after the lock is released. */
  async function renewed(rt: ProfileRuntime, tokens: TokenSet, sentMono: number): Promise<void> {
    holdToken(rt, { value: tokens.accessToken, expiresAt: tokens.expiresAt, monoExpiresAt: sentMono + tokens.expiresIn * 1000 });
    // Published before anything else awaits: holding the token makes the profile ready, and /readyz must never
    // say ready while the file consumers read still holds the old token or none.
    await files.publish(rt);
    rt.failures = 0;
    rt.retryAt = 0;
    rt.lastSuccessAt = now();
    metrics.success(rt.name, rt.lastSuccessAt);
    try {
      // Storing a rotated refresh token bumps the stored secretsVersion; that change is ours, not news.
      rt.secretsVersion = (await readState(rt))?.secretsVersion ?? rt.secretsVersion;
    } catch {
      // The next sweep's read reports a broken state file.
    }
    log.info({ profile: rt.name, event: 'renewal.succeeded', op: 'renew', expiresAt: new Date(tokens.expiresAt).toISOString() }, `renewed the access token of profile "${rt.name}"`);
  }

  async function renewalFailed(rt: ProfileRuntime, profile: DaemonProfile, error: unknown): Promise<RenewalOutcome> {
    const failure = classifyFailure(error);
    if (failure.kind === 'terminal' || failure.kind === 'configuration') {
      // Another process may have stored a new grant since this one was read: try it before giving up.
      if (isOAuthError(error, 'OAUTH_INVALID_GRANT') && profile.readGrant) {
        try {
          const stored = await profile.readGrant();
          if (rt.grantDiffers(stored)) {
            rt.grant = stored;
            rt.retryAt = 0;
            log.info({ profile: rt.name, event: 'grant.changed', op: 'renew' }, `profile "${rt.name}": the stored grant changed; trying it`);
            return settle(rt, 'failed');
          }
        } catch {
          // Parked below; new secrets un-park it.
        }
      }
      let secretsVersion = rt.secretsVersion;
      try {
        secretsVersion = (await readState(rt))?.secretsVersion;
      } catch {
        // Keep the version the grant was read under.
      }
      const reason: ParkReason = failure.kind === 'terminal' ? 'reauthorization_needed' : 'configuration_error';
      // A state file that does not parse is fixed by hand, not by new secrets.
      park(rt, reason, failure, isProfileStoreError(error, 'PROFILE_CORRUPT') ? 'readable' : 'secrets', secretsVersion);
      return settle(rt, reason);
    }
    const wait = boundedByExpiry(rt, retryDelay(backoff, rt.failures, random, failure.retryAfterMs), failure.retryAfterMs);
    rt.failures += 1;
    rt.retryAt = now() + wait;
    log.warn(
      { profile: rt.name, event: 'renewal.failed', op: 'renew', errorCode: failure.code, attempt: rt.failures, retryInMs: wait },
      `could not renew the access token of profile "${rt.name}": ${failure.message}; trying again in ${Math.ceil(wait / 1000)} s`,
    );
    return settle(rt, failure.kind === 'rate_limited' ? 'rate_limited' : 'failed');
  }

  /**
   * A Retry-After is honoured, but never past the token's expiry less a safety window: a token that dies
   * waiting politely is worse than one more request the server asked us not to send yet.
   */
  function boundedByExpiry(rt: ProfileRuntime, waitMs: number, retryAfterMs: number | undefined): number {
    const at = now();
    const expiry = rt.expiry(at);
    if (retryAfterMs === undefined || expiry === undefined) return waitMs;
    const latest = Math.max(backoff.baseMs, expiry - safetyMs - at);
    if (waitMs <= latest) return waitMs;
    log.warn(
      { profile: rt.name, event: 'renewal.retry_after_capped', op: 'renew', retryAfterMs, retryInMs: latest },
      `the token endpoint asked to wait ${Math.ceil(retryAfterMs / 1000)} s, past the expiry of the access token of profile "${rt.name}"; trying again in ${Math.ceil(latest / 1000)} s instead`,
    );
    return latest;
  }

  async function renew(rt: ProfileRuntime, profile: DaemonProfile): Promise<{ renewal: RenewalOutcome; reconcile?: ReconcileOutcome }> {
    const renewal = await renewUnderLock(rt, profile);
    if (renewal.renewal !== 'renewed' || !profile.reconcile || rt.removed) return renewal;
    rt.reconcile = { pending: true, failures: 0, retryAt: 0, lastOutcome: rt.reconcile.lastOutcome };
    return { ...renewal, reconcile: coordinator ? await reconcileShared(rt, profile, coordinator) : await reconcileNow(rt, profile) };
  }

  async function renewUnderLock(rt: ProfileRuntime, profile: DaemonProfile): Promise<{ renewal: RenewalOutcome }> {
    try {
      return await store.withLock(
        rt.name,
        async (lockSignal) => {
          const signal = AbortSignal.any([lockSignal, shutdown.signal]);
          // Another process may have renewed while this one waited for the lock.
          const state = await readState(rt);
          if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), drawJitter());
          if (!rt.renewalDue(now(), margin, needsOwnToken)) {
            rt.failures = 0;
            rt.retryAt = 0;
            return { renewal: settle(rt, 'fresh') };
          }
          if (profile.readGrant && state?.secretsVersion !== rt.secretsVersion) {
            rt.grant = await profile.readGrant();
            rt.secretsVersion = state?.secretsVersion;
          }
          const grant = rt.grant as NonNullable<typeof rt.grant>;
          if (rateGate) await rateGate.wait(signal);
          const sentMono = mono();
          const tokens = await renewHoldingLock({
            profiles: store,
            name: rt.name,
            app: { appKey: grant.appKey, appSecret: grant.appSecret },
            refreshToken: grant.refreshToken,
            tokenUrl: profile.tokenUrl,
            now,
            signal,
            timeoutMs: tokenTimeoutMs,
            onNewRefreshToken: (refreshToken) => keepRefreshToken(rt, profile, refreshToken),
            ...(profile.storeAccessToken ? { onNewAccessToken: (fresh: TokenSet) => shareAccessToken(rt, profile, fresh, grant) } : {}),
          });
          settle(rt, 'renewed');
          await renewed(rt, tokens, sentMono);
          return { renewal: 'renewed' as const };
        },
        { waitMs: lockWaitMs },
      );
    } catch (error) {
      return { renewal: await renewalFailed(rt, profile, error) };
    }
  }

  /** Outside the renewal lock, like the reconcile after a renewal: a hung service never blocks renewals. */
  async function retryReconcile(rt: ProfileRuntime, profile: DaemonProfile): Promise<ReconcileOutcome> {
    if (coordinator) return reconcileShared(rt, profile, coordinator);
    try {
      const ours = rt.token?.expiresAt ?? 0;
      const state = await readState(rt);
      const newest = state?.accessTokenExpiresAt ? Date.parse(state.accessTokenExpiresAt) : 0;
      if (newest > ours) {
        // Someone renewed after this process did, and reconciled with that newer token: leave it be.
        rt.reconcile.pending = false;
        return 'skipped';
      }
      return await reconcileNow(rt, profile);
    } catch (error) {
      const failure = classifyFailure(error);
      const wait = retryDelay(backoff, rt.reconcile.failures, random, failure.retryAfterMs);
      rt.reconcile.failures += 1;
      rt.reconcile.retryAt = now() + wait;
      log.warn({ profile: rt.name, event: 'reconcile.failed', op: 'reconcile', errorCode: failure.code }, `could not reconcile the connector of profile "${rt.name}": ${failure.message}`);
      return 'failed';
    }
  }

  // ---- the sweep ----

  /** A profile that could not be loaded is loaded again, with backoff, so fixing its files is enough. */
  async function retryLoad(rt: ProfileRuntime): Promise<void> {
    if (!options.loadProfile || mono() < rt.loadRetryAt) return;
    const entry = await options.loadProfile(rt.name).catch((error: unknown) => ({ name: rt.name, error: error instanceof Error ? error : new Error(String(error)) }));
    if (isLoadFailure(entry)) {
      rt.loadRetryAt = mono() + retryDelay(backoff, rt.loadFailures, random, undefined);
      rt.loadFailures += 1;
      return;
    }
    await applyLoaded(rt, entry);
  }

  /** Applies an entry loaded again (by retryLoad or a reload); a profile that could not be loaded before starts now. */
  async function applyLoaded(rt: ProfileRuntime, entry: ProfileEntry): Promise<void> {
    const wasUnavailable = rt.parked?.reason === 'unavailable';
    applyEntry(rt, entry);
    if (!wasUnavailable || !rt.config) return;
    rt.parked = undefined;
    rt.loadFailures = 0;
    rt.loadRetryAt = 0;
    log.info({ profile: rt.name, event: 'profile.loaded', op: 'load' }, `profile "${rt.name}" loaded`);
    await observeInitialState(rt);
  }

  async function work(rt: ProfileRuntime): Promise<SweepEntry> {
    if (rt.parked?.reason === 'unavailable') await retryLoad(rt);
    const profile = rt.config;
    if (!profile) return { profile: rt.name, action: 'parked' };
    if (rt.parked) await maybeUnpark(rt);
    if (rt.parked) return { profile: rt.name, action: 'parked' };
    const at = now();
    if (at >= rt.retryAt && rt.renewalDue(at, margin, needsOwnToken)) {
      const result = await semaphore.run(() => renew(rt, profile));
      return { profile: rt.name, action: 'renewal', ...result };
    }
    if (rt.reconcileDue(at) && profile.reconcile) {
      const reconcile = await semaphore.run(() => retryReconcile(rt, profile));
      return { profile: rt.name, action: 'reconcile', reconcile };
    }
    return { profile: rt.name, action: 'idle' };
  }

  function visit(rt: ProfileRuntime): Promise<SweepEntry> {
    // Single flight, and never waiting: a profile whose previous cycle still runs (a slow service, a hung
    // endpoint, each within its deadline) is skipped and counted, and the sweep goes on with the others.
    if (rt.busy) {
      metrics.skipped(rt.name);
      return Promise.resolve({ profile: rt.name, action: 'in_flight' });
    }
    const running = work(rt).catch((error: unknown) => {
      log.error({ profile: rt.name, event: 'sweep.failed', op: 'sweep', err: error }, 'unexpected failure in the sweep');
      return { profile: rt.name, action: 'idle' as const };
    });
    rt.busy = running;
    void running.then(() => {
      if (rt.busy === running) rt.busy = undefined;
    });
    return running;
  }

  async function sweep(): Promise<SweepReport> {
    const at = now();
    if (closing) return { at: new Date(at).toISOString(), profiles: [] };
    metrics.swept(at);
    const profiles = [...runtimes.values()];
    // Expired tokens leave the file before anything else happens, even for a profile whose renewal is running.
    await Promise.all(profiles.map((rt) => expireIfDue(rt, at)));
    const entries = await Promise.all(profiles.map((rt) => visit(rt)));
    return { at: new Date(at).toISOString(), profiles: entries };
  }

  // ---- status ----

  function status(): DaemonStatus {
    const at = now();
    const profiles = [...runtimes.values()].map((rt) => profileStatus(rt, at, readiness));
    const coordinatorAvailable = coordinator ? coordinator.isAvailable() : true;
    return {
      // Without the coordinator only reconciles wait: every consumer here still gets a fresh token.
      ready: profiles.length > 0 && profiles.every((p) => p.ready),
      ...(coordinator ? { coordinator: { available: coordinatorAvailable } } : {}),
      profiles,
    };
  }

  const metrics = new DaemonMetrics({
    now,
    marginMs: margin,
    ...(coordinator ? { coordinatorUp: () => coordinator.isAvailable() } : {}),
    profiles: () => {
      const at = now();
      return [...runtimes.values()].map((rt) => ({ name: rt.name, expiresAt: rt.expiry(at), health: healthOf(rt, at, readiness).health }));
    },
  });

  // ---- loading, reloading, closing ----

  function checkTemplate(entries: readonly ProfileEntry[]): void {
    if (tokenFile !== undefined) checkTokenFileTemplate(tokenFile, new Set(entries.map((e) => e.name)).size);
  }

  async function removeProfile(rt: ProfileRuntime): Promise<void> {
    rt.removed = true;
    runtimes.delete(rt.name);
    await rt.busy;
    clearTimeout(rt.expiryTimer);
    await files.unpublish(rt);
    await rt.client?.client.close();
    metrics.forget(rt.name);
  }

  const initial = await loadEntries();
  checkTemplate(initial);
  for (const entry of initial) {
    if (runtimes.has(entry.name)) continue;
    runtimes.set(entry.name, await addProfile(entry));
  }

  async function reload(): Promise<void> {
    if (closing) return;
    let entries: readonly ProfileEntry[];
    try {
      entries = await loadEntries();
      checkTemplate(entries);
    } catch (error) {
      const failure = classifyFailure(error);
      log.error({ event: 'daemon.reload_failed', op: 'load', errorCode: failure.code }, `could not reload the profiles: ${failure.message}; keeping the current ones`);
      return;
    }
    const wanted = new Map(entries.map((e) => [e.name, e]));
    for (const rt of [...runtimes.values()]) {
      if (!wanted.has(rt.name)) await removeProfile(rt);
    }
    for (const entry of wanted.values()) {
      const rt = runtimes.get(entry.name);
      if (!rt) {
        runtimes.set(entry.name, await addProfile(entry));
        continue;
      }
      await applyLoaded(rt, entry);
    }
    log.info({ event: 'daemon.reloaded', op: 'load', profiles: [...runtimes.keys()] }, 'profiles reloaded');
  }

  let server: HealthServer | undefined;
  let socket: TokenSocket | undefined;
  try {
    if (options.listen) server = await startHealthServer(options.listen, { status, registry: metrics.registry });
    if (options.socket) {
      socket = await startTokenSocket(
        options.socket.path,
        {
          profiles: () => [...runtimes.keys()],
          token: (name) => {
            const rt = runtimes.get(name);
            const at = now();
            const expiresAt = rt?.tokenExpiry(at);
            return rt?.token && expiresAt !== undefined && at < expiresAt ? { value: rt.token.value, expiresAt } : undefined;
          },
        },
        { ...(options.socket.mode !== undefined ? { mode: options.socket.mode } : {}), ...(options.socket.gid !== undefined ? { gid: options.socket.gid } : {}), log, now },
      );
    }
  } catch (error) {
    await server?.close();
    for (const rt of runtimes.values()) clearTimeout(rt.expiryTimer);
    throw error;
  }

  /** Once per jump of either clock: expired tokens leave the file first, then what is due is renewed. */
  function clockJumped(jump: ClockJump): void {
    const seconds = (ms: number): number => Math.round(Math.abs(ms) / 1000);
    if (jump.pausedMs > 0) log.warn({ event: 'clock.paused', op: 'sweep', pausedMs: jump.pausedMs }, `this process was paused for ${seconds(jump.pausedMs)} s; renewing what is due now`);
    if (jump.wallStepMs > 0) {
      log.warn({ event: 'clock.stepped', op: 'sweep', wallStepMs: jump.wallStepMs }, `the wall clock moved ${seconds(jump.wallStepMs)} s ahead of the process's timers (a host resumed from suspend, or the clock was set forward); renewing what is due now`);
    } else if (jump.wallStepMs < 0) {
      log.warn({ event: 'clock.stepped', op: 'sweep', wallStepMs: jump.wallStepMs }, `the wall clock stepped back ${seconds(jump.wallStepMs)} s; token lifetimes are judged by the monotonic clock too`);
    }
    void sweep().catch((error: unknown) => log.error({ event: 'sweep.failed', op: 'sweep', err: error }, 'the sweep after a clock jump failed'));
  }

  let schedule: SweepSchedule | undefined;
  if (scheduleExpression !== false) schedule = scheduleSweeps(scheduleExpression, sweep, log, { clock, onJump: clockJumped });
  if (options.sweepOnStart ?? scheduleExpression !== false) {
    void sweep().catch((error: unknown) => log.error({ event: 'sweep.failed', op: 'sweep', err: error }, 'the first sweep failed'));
  }

  async function settleWithin(pending: Promise<unknown>[], ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const done = Promise.allSettled(pending).then(() => true as const);
    const finished = await Promise.race([done, timeout]);
    clearTimeout(timer);
    return finished;
  }

  return {
    sweep,
    reload,
    status,
    url: server?.url,
    registry: metrics.registry,
    close() {
      closing ??= (async () => {
        await schedule?.stop();
        const pending = [...runtimes.values()].flatMap((rt) => (rt.busy ? [rt.busy] : []));
        if (!(await settleWithin(pending, shutdownTimeoutMs))) {
          log.warn({ event: 'daemon.cancelled_work', op: 'stop' }, `in-flight work did not finish within ${Math.round(shutdownTimeoutMs / 1000)} s; cancelling it`);
          shutdown.abort();
          for (const rt of runtimes.values()) abandonClient(rt);
          await settleWithin(pending, 2_000);
        }
        await server?.close();
        await socket?.close().catch((error: unknown) => log.warn({ event: 'socket.close_failed', op: 'stop', error: (error as Error).message }, 'could not remove the socket'));
        for (const rt of runtimes.values()) {
          rt.removed = true;
          clearTimeout(rt.expiryTimer);
          // A token with life left stays for the consumers through a restart (its expiry is beside it); one
          // about to expire goes, since nobody will remove it once this process is gone.
          const at = now();
          if ((rt.tokenExpiry(at) ?? at) - at <= safetyMs || rt.publishedToken !== rt.token?.value) await files.unpublish(rt);
          else await rt.fileChain;
          await rt.client?.client.close().catch(() => undefined);
        }
        await coordinator?.close();
      })();
      return closing;
    },
  };
}
