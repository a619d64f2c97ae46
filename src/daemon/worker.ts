// One profile's work, as a part of its own: the worker owns what the daemon knows about the profile (its
// token, its backoff, why it is parked) privately, and the daemon talks to it through a handful of methods:
// visit (one sweep's work, single flight), expire (drop a token whose time is up), view (status and health),
// apply (a reloaded entry), dispose. Everything it needs from outside comes through a narrow context
// (worker-context.ts). Here: the token held and published, parking, loading, and what a visit does; the
// renewal itself is renewal.ts, the reconciles of the connector reconciler.ts.
import { getCurrentAccount } from '../oauth/api.js';
import { isOAuthError } from '../oauth/index.js';
import { removeTemporaryLeftovers } from '../profile/files.js';
import type { ProfileState } from '../profile/index.js';
import { reauthorizeCommand } from '../profile/name.js';
import { tokenFileFor } from '../publish/place.js';
import { ACCOUNT_ID_TIMEOUT_MS, templatesUse } from '../publish/template.js';
import { Backoff } from '../backoff.js';
import { classifyFailure, type Failure } from './classify.js';
import { visitDueAt } from './due.js';
import { HELD_ELSEWHERE } from './exclusion.js';
import { ProfileNotices } from '../notify/transitions.js';
import type { ProfileHealth } from './metrics.js';
import { ProfileReconciler } from './reconciler.js';
import { ProfileRenewer } from './renewal.js';
import { accessTokenSlot, ProfileRuntime, servedProfile, type HeldToken, type ServedProfile } from './runtime.js';
import { registerAppCredentials, registerSecrets, registerSlotSecret } from '../redact.js';
import { healthOf, profileStatus } from './status.js';
import type { ReauthorizationResult, ReauthorizedGrant } from './events.js';
import type { CheckOutcome, DaemonGrant, ParkReason, ProfileEntry, ProfileLoadFailure, ProfileStatus, ReconcileOutcome, SweepEntry } from './types.js';
import { drawJitter, type WorkerContext } from './worker-context.js';
import { spreadJitter } from '../sync/renewal-policy.js';
import type { SealedGrant } from './grant-record.js';

export function isLoadFailure(entry: ProfileEntry): entry is ProfileLoadFailure {
  return 'error' in entry;
}

/** One visit's work: its sweep entry, and the reconcile it started, which runs outside the single flight. */
export interface Visited {
  entry: SweepEntry;
  reconcile?: Promise<ReconcileOutcome>;
}

export class ProfileWorker {
  readonly #ctx: WorkerContext;
  readonly #rt: ProfileRuntime;
  readonly #renewer: ProfileRenewer;
  readonly #reconciler: ProfileReconciler;
  /** A published file was found removed or replaced; the next sweep puts it back and says so. */
  #lost = false;

  private constructor(name: string, ctx: WorkerContext) {
    this.#ctx = ctx;
    this.#rt = new ProfileRuntime(name, ctx.clock);
    this.#renewer = new ProfileRenewer(this.#rt, ctx, {
      holdToken: (token) => this.#holdToken(token),
      park: (reason, failure, until, secretsVersion) => this.#park(reason, failure, until, secretsVersion),
      adoptShared: () => this.#adoptShared('invalid_grant'),
    });
    this.#reconciler = new ProfileReconciler(this.#rt, ctx);
    if (ctx.notices) this.#rt.notices = new ProfileNotices(ctx.notices, name, ctx.log, ctx.clock.wall());
  }

  /** A worker for `entry`: its recorded state read, a token file left by an earlier run adopted or removed. */
  static async start(entry: ProfileEntry, ctx: WorkerContext): Promise<ProfileWorker> {
    const worker = new ProfileWorker(entry.name, ctx);
    worker.#rt.spreadNext = ctx.config.spreadRenewals;
    worker.#applyEntry(entry);
    if (!worker.#rt.parked) await worker.#observeInitialState();
    // At start the newest of the store's grant and the shared record wins; the store's counts as the older.
    await worker.#adoptShared('start');
    await worker.#adoptBudget();
    await worker.#adoptPublished();
    return worker;
  }

  get name(): string {
    return this.#rt.name;
  }

  /** The work in flight, if any, the reconciles it starts included: shutdown waits for it. */
  get inFlight(): Promise<unknown> | undefined {
    const visit = this.#ctx.locks.flight.inFlight(this.#rt.name);
    if (!visit && !this.#reconciler.reconciling) return undefined;
    return (async () => {
      await visit?.catch(() => undefined);
      // A renewal that ends starts a reconcile, and one that runs may have another queued behind it.
      while (this.#reconciler.reconciling) await this.#reconciler.reconciling.catch(() => undefined);
    })();
  }

  // ---- what the daemon calls ----

  /**
   * One sweep's visit. Single flight, and never waiting: a profile whose previous cycle still runs (a slow
   * service, a hung endpoint, each within its deadline) is skipped and counted, and the sweep goes on.
   */
  async visit(): Promise<SweepEntry> {
    const visited = await this.visitOwn();
    // The reconcile the visit started runs on the profile's own chain, outside the single flight: the sweep
    // still reports its outcome, but the next visit may renew while it runs.
    return visited.reconcile ? { ...visited.entry, reconcile: await visited.reconcile } : visited.entry;
  }

  /**
   * The visit's own work, ended without waiting for the reconcile it started, which is handed back: a sweep
   * visits a few profiles at a time, and a profile's reconcile (bounded apart) must not hold up the next visit.
   */
  async visitOwn(): Promise<Visited> {
    const name = this.#rt.name;
    this.#checkNotices();
    const visited = await this.#ctx.locks.flight.run(name, () =>
      this.#work().catch((error: unknown): Visited => {
        this.#ctx.log.error({ profile: name, event: 'sweep.failed', op: 'sweep', err: error }, 'unexpected failure in the sweep');
        return { entry: { profile: name, action: 'idle' } };
      }),
    );
    if (visited === HELD_ELSEWHERE || visited.entry.action === 'in_flight') {
      this.#ctx.metrics.skipped(name);
      return { entry: { profile: name, action: 'in_flight' } };
    }
    return visited;
  }

  /** Drops the token held when its time is up at `at`; the token file goes with it. */
  expire(at: number): Promise<void> {
    const rt = this.#rt;
    if (!rt.token || rt.holdsToken(at)) return Promise.resolve();
    // With replicas, the token this one holds may simply be older than the one another replica renewed.
    if ((rt.knownExpiresAt ?? 0) > rt.token.expiresAt) this.#ctx.log.debug({ profile: rt.name, event: 'token.expired', op: 'publish', older: true }, 'an older access token expired; another process holds the current one');
    else this.#ctx.log.warn({ profile: rt.name, event: 'token.expired', op: 'publish' }, `the access token of profile "${rt.name}" expired before a renewal succeeded`);
    return this.#dropToken();
  }

  /** How the profile looks at `at`, for status() and /readyz. */
  view(at: number): ProfileStatus {
    return profileStatus(this.#rt, at, this.#ctx.config);
  }

  /** The earliest time at which a visit may have work of the profile's own to do (due.ts). */
  nextDueAt(at: number): number {
    const { config, files, locks } = this.#ctx;
    const busy = locks.flight.inFlight(this.#rt.name) !== undefined || this.#reconciler.reconciling !== undefined;
    return visitDueAt(this.#rt, { marginMs: config.marginMs, needsOwnToken: config.needsOwnToken, publishes: files.publishes, busy }, at);
  }

  /** Its health and the expiry known, for the metrics: cheaper than the whole view. */
  health(at: number): { health: ProfileHealth; expiresAt: number | undefined; account: string | undefined } {
    return { health: healthOf(this.#rt, at, this.#ctx.config).health, expiresAt: this.#rt.expiry(at), account: this.#rt.knownAccount };
  }

  /**
   * Whether a file this profile published was removed or replaced since (true: it is no longer counted as
   * published, so the profile is not ready until the next sweep puts it back).
   */
  async checkPublished(): Promise<boolean> {
    const rt = this.#rt;
    if (!this.#ctx.files.publishes || !rt.token || rt.published !== rt.token) return false;
    const published = rt.published;
    if (await this.#ctx.files.intact(rt)) return false;
    if (rt.published === published) rt.published = undefined;
    this.#lost = true;
    return true;
  }

  /** The token for the socket's readers: only while it is unexpired. */
  liveToken(at: number): { value: string; expiresAt: number } | undefined {
    const rt = this.#rt;
    const expiresAt = rt.tokenExpiry(at);
    return rt.token && expiresAt !== undefined && at < expiresAt ? { value: rt.token.value, expiresAt } : undefined;
  }

  /** A reloaded entry: new settings or secrets; a profile that could not be loaded before starts now. */
  async apply(entry: ProfileEntry): Promise<void> {
    const rt = this.#rt;
    const wasUnavailable = rt.parked?.reason === 'unavailable';
    this.#applyEntry(entry);
    if (!wasUnavailable || !rt.config) return;
    rt.parked = undefined;
    rt.loadBackoff = Backoff.none;
    this.#ctx.log.info({ profile: rt.name, event: 'profile.loaded', op: 'load' }, `profile "${rt.name}" loaded`);
    await this.#observeInitialState();
  }

  /**
   * The Dropbox account id, for templates that use it: learnt once per profile from the account endpoint,
   * within a short deadline, and after a failure not asked again for a minute (the render that needs it fails
   * and keeps its previous file meanwhile; the token file and the other templates do not wait).
   */
  async accountId(accessToken: string): Promise<string | undefined> {
    const rt = this.#rt;
    const apiUrl = rt.config?.dropboxApiUrl;
    if (rt.accountId || !apiUrl || this.#ctx.clock.mono() < rt.accountRetryAt || !(await templatesUse(this.#ctx.files.templatesOf(rt.name), 'account_id'))) return rt.accountId;
    try {
      rt.accountId = (await getCurrentAccount({ apiUrl, accessToken, timeoutMs: ACCOUNT_ID_TIMEOUT_MS, signal: this.#ctx.shutdown, dispatcher: this.#ctx.dropboxApiDispatcher })).accountId;
    } catch (error) {
      rt.accountRetryAt = this.#ctx.clock.mono() + 60_000;
      this.#ctx.log.warn({ profile: rt.name, event: 'account.unknown', op: 'publish', error: classifyFailure(error).message }, `could not learn the Dropbox account id of profile "${rt.name}" for its templates`);
    }
    return rt.accountId;
  }

  // ---- the checks of the published token (when: token-check.ts) ----

  get checkedCycle(): number {
    return this.#rt.check.cycle;
  }

  set checkedCycle(cycle: number) {
    this.#rt.check.cycle = cycle;
  }

  get lastCheckAt(): number | undefined {
    return this.#rt.check.at;
  }

  /** What the profile's checks count against, or undefined when there is nothing to check now. */
  checkKey(at: number): string | undefined {
    const rt = this.#rt;
    if (rt.removed || rt.parked || rt.check.off !== undefined || !rt.config?.dropboxApiUrl || !rt.holdsToken(at)) return undefined;
    const account = rt.knownAccount;
    // A 429 of the token endpoint paused the account (account-pause.ts): its checks wait too.
    if (account !== undefined && this.#ctx.pauses.pausedHere(account) !== undefined) return undefined;
    return account !== undefined ? `account:${account}` : `profile:${rt.name}`;
  }

  /**
   * Asks Dropbox who the token held belongs to (`users/get_current_account`, one call within its deadline).
   * Refused as invalid or expired: a renewal starts at once (a revoked grant then meets invalid_grant and the
   * profile parks, as at any renewal). The app may not ask (missing_scope): checks stop for the profile, said
   * once. Another account's than the one recorded: the token is withdrawn and the profile parked until its
   * secrets change. No answer, 5xx, 429: nothing but the count.
   */
  async check(): Promise<CheckOutcome> {
    const rt = this.#rt;
    const { config, log, metrics, shutdown } = this.#ctx;
    const token = rt.token;
    const apiUrl = rt.config?.dropboxApiUrl;
    if (!token || !apiUrl) return 'failed';
    let outcome: CheckOutcome;
    let account: string | undefined;
    let failure: ReturnType<typeof classifyFailure> | undefined;
    try {
      account = (await getCurrentAccount({ apiUrl, accessToken: token.value, timeoutMs: config.checks.timeoutMs, signal: shutdown, dispatcher: this.#ctx.dropboxApiDispatcher })).accountId;
      const expected = rt.recordedAccountId ?? (rt.accountRecorded ? rt.accountId : undefined);
      outcome = expected !== undefined && account !== expected ? 'account_mismatch' : 'valid';
    } catch (error) {
      failure = classifyFailure(error);
      outcome = isOAuthError(error, 'OAUTH_INVALID_ACCESS_TOKEN')
        ? 'invalid'
        : isOAuthError(error, 'OAUTH_EXPIRED_ACCESS_TOKEN')
          ? 'expired'
          : isOAuthError(error, 'OAUTH_MISSING_SCOPE')
            ? 'missing_scope'
            : 'failed';
    }
    rt.check.at = this.#now();
    rt.check.outcome = outcome;
    metrics.check(rt.name, outcome);
    // A token renewed while the check ran is not the one judged.
    if (rt.token?.value !== token.value || rt.parked || rt.removed) return outcome;
    switch (outcome) {
      case 'valid':
        if (account !== undefined) rt.check.account = account;
        log.debug({ profile: rt.name, event: 'check.valid', op: 'check' }, `the access token of profile "${rt.name}" is valid`);
        return outcome;
      case 'failed':
        log.debug({ profile: rt.name, event: 'check.failed', op: 'check', errorCode: failure?.code }, `could not check the access token of profile "${rt.name}": ${failure?.message ?? 'unknown reason'}`);
        return outcome;
      case 'missing_scope':
        rt.check.off = `the Dropbox app lacks the account_info.read permission (missing_scope); add it in the App Console and authorize again (\`${reauthorizeCommand(rt.name)}\`) to turn checks on`;
        log.warn(
          { profile: rt.name, event: 'check.off', op: 'check', errorCode: failure?.code },
          `profile "${rt.name}": Dropbox refused the token check (missing_scope): ${failure?.message ?? ''}. Checks are off for this profile, so a revoked grant is noticed only at the next renewal`,
        );
        return outcome;
      case 'account_mismatch': {
        const message = `the published access token belongs to Dropbox account ${account ?? '?'}, not to ${rt.recordedAccountId ?? rt.accountId ?? '?'}, which the profile records`;
        log.error({ profile: rt.name, event: 'check.account_mismatch', op: 'check', accountId: account }, `profile "${rt.name}": ${message}; the token is withdrawn and the profile stopped until its secrets change`);
        this.#park('configuration_error', { kind: 'configuration', code: 'TOKEN_ACCOUNT_MISMATCH', message, hint: `authorize the recorded account again: \`${reauthorizeCommand(rt.name)}\`` }, 'secrets', rt.secretsVersion);
        await this.#dropToken();
        return outcome;
      }
      default:
        await this.#renewRefused(`Dropbox refused its access token (${outcome === 'invalid' ? 'invalid_access_token' : 'expired_access_token'}) at a check`);
        return outcome;
    }
  }

  /** Another replica checked the profile this interval: a refused token there is a grant refused here too. */
  async checkedElsewhere(outcome: CheckOutcome): Promise<void> {
    const rt = this.#rt;
    rt.check.at = this.#now();
    rt.check.outcome = 'shared';
    this.#ctx.metrics.check(rt.name, 'shared');
    if ((outcome !== 'invalid' && outcome !== 'expired') || rt.parked || rt.removed || !rt.token) return;
    await this.#renewRefused(`another replica's check found its access token refused (${outcome === 'invalid' ? 'invalid_access_token' : 'expired_access_token'})`);
  }

  /** A renewal now, for `why`; a visit under way (a sweep) leaves it to the next one. */
  async #renewRefused(why: string): Promise<void> {
    const rt = this.#rt;
    rt.renewSoon = why;
    this.#ctx.log.warn({ profile: rt.name, event: 'token.refused', op: 'check' }, `profile "${rt.name}": ${why}; renewing now`);
    const visited = await this.visitOwn();
    if (visited.reconcile) await visited.reconcile;
  }

  /**
   * What other processes recorded in the profile's state since the last visit: a grant stored anew (setup, a
   * re-authorization elsewhere) is read and renewed with; an invalid_grant another process met makes this one
   * renew to see for itself. It parks only on its own invalid_grant.
   */
  async #notesOfOthers(profile: ServedProfile): Promise<void> {
    const rt = this.#rt;
    const { log } = this.#ctx;
    let state: ProfileState | undefined;
    try {
      state = await this.#readState();
    } catch {
      return;
    }
    this.#learnState(state);
    const failure = state?.lastError;
    const failedElsewhere = failure !== undefined && failure.terminal && state?.needsReauthorization === true && failure.at !== rt.seenFailureAt;
    rt.seenFailureAt = failure?.at;
    if (profile.grants.rereads && state?.secretsVersion !== rt.secretsVersion) {
      try {
        const stored = await profile.grants.readGrant();
        rt.secretsVersion = state?.secretsVersion;
        if (rt.grantDiffers(stored)) {
          rt.grant = stored;
          rt.grantIssuedAt = undefined;
          rt.check.off = undefined;
          rt.renewSoon = 'a new grant was stored by another process';
          log.info({ profile: rt.name, event: 'grant.changed', op: 'load' }, `profile "${rt.name}": another process stored a new grant; renewing with it`);
          return;
        }
      } catch (error) {
        log.warn({ profile: rt.name, event: 'profile.secrets_unreadable', op: 'load', error: classifyFailure(error).message }, `profile "${rt.name}": could not read its new secrets`);
      }
    }
    if (failedElsewhere && rt.renewSoon === undefined) {
      rt.renewSoon = `another process met ${failure.code} at ${failure.at}`;
      log.warn({ profile: rt.name, event: 'grant.failed_elsewhere', op: 'renew', errorCode: failure.code }, `profile "${rt.name}": another process recorded ${failure.code} at ${failure.at}; renewing to see for itself`);
    }
  }

  /** What every read of the state teaches: the account recorded. */
  #learnState(state: ProfileState | undefined): void {
    if (state?.accountId !== undefined) this.#rt.recordedAccountId = state.accountId;
  }

  /**
   * A new grant from re-authorization: stored, then the profile renewed with it at once (un-parked by the new
   * secrets version), the connector reconciled, and the service's connection check run. Never throws.
   */
  async reauthorized(grant: ReauthorizedGrant, checkTimeoutMs: number): Promise<ReauthorizationResult> {
    const rt = this.#rt;
    const { log, grants, onReauthorized } = this.#ctx;
    // Learnt now: from here on no log line, error or record carries it.
    registerAppCredentials(grant.appKey, grant.appSecret);
    registerSecrets(grant.refreshToken);
    const profile = rt.config;
    if (!profile) return { stored: false, error: `profile "${rt.name}" is not loaded: ${rt.loadError?.message ?? 'unknown reason'}` };
    const writable = profile.grants.writable;
    if (!writable && !grants && !onReauthorized) {
      return { stored: false, error: `the secrets of profile "${rt.name}" are read-only here (the env store): a new grant cannot be stored` };
    }
    const fresh = { appKey: grant.appKey, appSecret: grant.appSecret, refreshToken: grant.refreshToken };
    if (writable) {
      try {
        await profile.grants.storeGrant(fresh, grant.accountId || undefined);
      } catch (error) {
        const failure = classifyFailure(error);
        log.error({ profile: rt.name, event: 'reauth.store_failed', op: 'reauth', errorCode: failure.code }, `could not store the new grant of profile "${rt.name}": ${failure.message}`);
        return { stored: false, error: `storing the new grant failed: ${failure.message}` };
      }
    }
    // Later than the grant in use, even on a clock that stepped back: the newer grant is the one that wins.
    const issuedAt = Math.max(this.#now(), (rt.grantIssuedAt ?? 0) + 1);
    rt.grant = fresh;
    rt.grantIssuedAt = issuedAt;
    rt.accountRecorded = Boolean(grant.accountId);
    rt.accountId = grant.accountId || undefined;
    rt.recordedAccountId = grant.accountId || undefined;
    rt.check.off = undefined;
    // Tried at once: the backoff (or the budget's wait) the previous grant's failures earned does not hold it.
    rt.backoff = Backoff.none;
    const warnings: string[] = [];
    if (writable) {
      log.info({ profile: rt.name, event: 'reauth.grant_stored', op: 'reauth' }, `stored the new grant of profile "${rt.name}"; renewing with it`);
    } else {
      log.info({ profile: rt.name, event: 'reauth.grant_held', op: 'reauth' }, `holding the new grant of profile "${rt.name}" in memory (its secrets are read-only here); renewing with it`);
      // Nothing the store says changes, so nothing else un-parks it.
      this.#unpark('a new grant was authorized');
    }
    if (grants) {
      try {
        const shared = await grants.write(rt.name, { ...fresh, ...(grant.accountId ? { accountId: grant.accountId } : {}), issuedAt });
        if (shared) log.info({ profile: rt.name, event: 'grant.shared', op: 'reauth', issuedAt: new Date(issuedAt).toISOString() }, `shared the new grant of profile "${rt.name}" with the other replicas, sealed`);
        else log.warn({ profile: rt.name, event: 'grant.share_refused', op: 'reauth' }, `did not share the new grant of profile "${rt.name}": Redis holds one issued later`);
      } catch (error) {
        const failure = classifyFailure(error);
        log.error({ profile: rt.name, event: 'grant.share_failed', op: 'reauth', errorCode: failure.code }, `could not share the new grant of profile "${rt.name}" with the other replicas: ${failure.message}`);
        warnings.push('The other replicas could not be given the new grant (Redis did not answer); they keep failing until this is done again.');
      }
    } else if (!writable && !onReauthorized) {
      warnings.push('The new grant is held in memory only: a restart reads the old one from the environment.');
    }
    // Beside the renewal: the command has its own deadline, and the page waits for both.
    const hook = onReauthorized ? this.#runHook(onReauthorized, fresh) : undefined;
    const result = await this.#renewWithNewGrant(profile, checkTimeoutMs);
    const hookWarning = await hook;
    if (hookWarning) warnings.push(hookWarning);
    return warnings.length > 0 ? { ...result, warning: warnings.join(' ') } : result;
  }

  /** The operator's --on-reauthorized command: a warning in words when it failed, for the page. */
  async #runHook(hook: NonNullable<WorkerContext['onReauthorized']>, grant: DaemonGrant): Promise<string | undefined> {
    const rt = this.#rt;
    const result = await hook(rt.name, grant).catch((error: unknown) => ({ ok: false, message: classifyFailure(error).message }));
    if (result.ok) {
      this.#ctx.log.info({ profile: rt.name, event: 'reauth.hook_succeeded', op: 'reauth' }, `the --on-reauthorized command stored the new grant of profile "${rt.name}"`);
      return undefined;
    }
    this.#ctx.log.error({ profile: rt.name, event: 'reauth.hook_failed', op: 'reauth', error: result.message }, `the --on-reauthorized command failed for profile "${rt.name}": ${result.message ?? 'no reason given'}`);
    return `The command that stores the new grant where a restart reads it (--on-reauthorized) failed: ${result.message ?? 'no reason given'}. The grant works now, but a restart would read the old one.`;
  }

  /** Renews at once with the grant just brought, then reconciles and runs the connection check. */
  async #renewWithNewGrant(profile: ServedProfile, checkTimeoutMs: number): Promise<ReauthorizationResult> {
    const rt = this.#rt;
    rt.forceRenewal = true;
    let entry: SweepEntry | undefined;
    try {
      // A visit under way (a sweep) is waited out: the profile's visits are single flight.
      for (let tries = 0; tries < 100; tries += 1) {
        entry = await this.visit();
        if (entry.action !== 'in_flight') break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      rt.forceRenewal = false;
    }
    if (entry?.action !== 'renewal' || (entry.renewal !== 'renewed' && entry.renewal !== 'fresh')) {
      const why = rt.parked?.message ?? (entry?.renewal ? `the renewal ended ${entry.renewal}` : 'the profile could not be renewed');
      return { stored: true, error: `renewing with the new grant failed: ${why}` };
    }
    if (!profile.reconcile) return { stored: true };
    const reconciled = entry.reconcile !== undefined && entry.reconcile !== 'failed' && entry.reconcile !== 'deferred';
    if (!reconciled) return { stored: true, reconciled: false, error: 'updating the connector with the new token failed; the daemon keeps trying' };
    const check = await this.#reconciler.checkConnection(checkTimeoutMs);
    return { stored: true, reconciled: true, ...(check ? { check } : {}) };
  }

  /**
   * The grant another replica shared (the record of a re-authorization), taken when it was issued later than
   * the grant in use: in memory, in the profile's store when writable, and the profile un-parked. Read at start,
   * at each sweep of a profile parked for re-authorization, and before a profile is parked on invalid_grant.
   * Returns whether a different grant was taken.
   */
  async #adoptShared(when: 'start' | 'sweep' | 'invalid_grant'): Promise<boolean> {
    const rt = this.#rt;
    const { grants, log } = this.#ctx;
    const profile = rt.config;
    if (!grants || !profile || rt.removed) return false;
    let record: SealedGrant | undefined;
    try {
      record = await grants.read(rt.name);
    } catch (error) {
      log.debug({ profile: rt.name, event: 'grant.record_unread', op: 'reauth', when, error: classifyFailure(error).message }, `could not read the grant shared for profile "${rt.name}"`);
      return false;
    }
    // An older record never replaces a newer grant.
    if (!record || (rt.grantIssuedAt !== undefined && record.issuedAt <= rt.grantIssuedAt)) return false;
    const grant: DaemonGrant = { appKey: record.appKey, appSecret: record.appSecret, refreshToken: record.refreshToken };
    registerAppCredentials(grant.appKey, grant.appSecret);
    registerSecrets(grant.refreshToken);
    rt.grantIssuedAt = record.issuedAt;
    if (!rt.grantDiffers(grant)) return false;
    rt.grant = grant;
    if (record.accountId) {
      rt.accountId = record.accountId;
      rt.accountRecorded = true;
      rt.recordedAccountId = record.accountId;
    }
    rt.check.off = undefined;
    let stored = false;
    if (profile.grants.writable) {
      try {
        await profile.grants.storeGrant(grant, record.accountId);
        stored = true;
        // Our own write: not news for the next visit.
        rt.secretsVersion = (await this.#readState().catch(() => undefined))?.secretsVersion ?? rt.secretsVersion;
      } catch (error) {
        log.warn({ profile: rt.name, event: 'grant.adopt_store_failed', op: 'reauth', error: classifyFailure(error).message }, `took the grant shared for profile "${rt.name}" but could not store it; it is held in memory`);
      }
    }
    log.info(
      { profile: rt.name, event: 'grant.adopted', op: 'reauth', when, issuedAt: new Date(record.issuedAt).toISOString(), stored },
      `took the newer grant of profile "${rt.name}" another replica obtained by re-authorization${stored ? ', and stored it' : ''}`,
    );
    this.#unpark('another replica shared a newer grant');
    return true;
  }

  /**
   * The profile's budget of token calls as the fleet's last owner of it left it (call-budget.ts), or as this
   * process knew it before the worker was stopped: its failure streak and the wait it chose go on here, so a
   * takeover or a restart continues the backoff, not from its first step.
   */
  async #adoptBudget(): Promise<void> {
    const rt = this.#rt;
    const { budgets, fleet, clock } = this.#ctx;
    const state = await budgets.adopt(rt.name, rt.config?.tokenUrl ?? '', fleet?.shares(rt.name) ?? false);
    if (!state || state.failures === 0 || rt.backoff.failures >= state.failures) return;
    const now = this.#now();
    const until = state.retryAt !== undefined && state.retryAt > now ? rt.monoTimeOf(state.retryAt, now) : clock.mono();
    rt.backoff = Backoff.of(state.failures, until);
  }

  /**
   * The Dropbox account of the grant, recorded in the profile's state once, while the grant works (profiles made
   * without setup, or before it recorded one): re-authorization later accepts only a grant of the same account.
   * Off the renewal path; a failure is tried again after the next renewal, a minute later at the soonest.
   */
  async recordAccount(): Promise<void> {
    const rt = this.#rt;
    const { clock, log } = this.#ctx;
    const apiUrl = rt.config?.dropboxApiUrl;
    const token = rt.token;
    if (rt.accountRecorded || !rt.config?.grants.recordsAccount || !apiUrl || !token || clock.mono() < rt.accountRetryAt) return;
    try {
      const state = await this.#readState();
      if (state?.accountId) {
        rt.accountRecorded = true;
        return;
      }
      const accountId = rt.accountId ?? (await getCurrentAccount({ apiUrl, accessToken: token.value, timeoutMs: ACCOUNT_ID_TIMEOUT_MS, signal: this.#ctx.shutdown, dispatcher: this.#ctx.dropboxApiDispatcher })).accountId;
      rt.accountId = accountId;
      await rt.config.grants.recordAccount(accountId);
      rt.accountRecorded = true;
      log.info({ profile: rt.name, event: 'account.recorded', op: 'renew', accountId }, `recorded the Dropbox account of profile "${rt.name}"`);
    } catch (error) {
      rt.accountRetryAt = clock.mono() + 60_000;
      log.warn({ profile: rt.name, event: 'account.unknown', op: 'renew', error: classifyFailure(error).message }, `could not learn the Dropbox account of profile "${rt.name}"; re-authorization will need a link that allows choosing the account`);
    }
  }

  /** Gives up on the profile's service calls in flight; the next reconcile opens a new client. */
  abandon(): void {
    this.#reconciler.abandon();
  }

  /** The coordinator is reachable again: whether a reconcile held only for it is due now (see ProfileReconciler). */
  coordinatorBack(): boolean {
    return this.#reconciler.coordinatorBack();
  }

  /**
   * Stops the worker. Removed from the configuration: its token file goes. At shutdown (`keepPublished`): a
   * token with life left stays for the consumers through a restart (its expiry is beside it); one about to
   * expire goes, since nobody will remove it once this process is gone.
   */
  async dispose(options: { keepPublished: boolean }): Promise<void> {
    const rt = this.#rt;
    rt.removed = true;
    if (!options.keepPublished) await this.inFlight;
    clearTimeout(rt.expiryTimer);
    const at = this.#now();
    const keep = options.keepPublished && (rt.tokenExpiry(at) ?? at) - at > this.#ctx.config.safetyMs && rt.published === rt.token;
    if (keep) await rt.fileChain;
    else await this.#ctx.files.unpublish(rt);
    await rt.client?.client.close().catch(() => undefined);
    if (!options.keepPublished) {
      this.#ctx.metrics.forget(rt.name);
      registerSlotSecret(accessTokenSlot(rt.name), undefined);
    }
  }

  // ---- the token held ----

  #now(): number {
    return this.#ctx.clock.wall();
  }

  #dropToken(): Promise<void> {
    const rt = this.#rt;
    rt.token = undefined;
    clearTimeout(rt.expiryTimer);
    rt.expiryTimer = undefined;
    return this.#ctx.files.unpublish(rt);
  }

  /** This token's share of jitter: the usual draw, or a draw over its whole window when it is to be spread. */
  #jitterFor(token: HeldToken): number {
    const rt = this.#rt;
    if (!rt.spreadNext) return drawJitter(this.#ctx);
    rt.spreadNext = false;
    const usual = drawJitter(this.#ctx);
    return this.#ctx.metrics.spread(spreadJitter(token.expiresAt, { now: this.#now(), marginMs: this.#ctx.config.marginMs, usual, random: this.#ctx.random }), usual);
  }

  #holdToken(token: HeldToken): void {
    const rt = this.#rt;
    // Whatever way it came (renewed, taken from another process, adopted from the token file), the token held
    // is redacted from every line logged, in place of the profile's last one.
    registerSlotSecret(accessTokenSlot(rt.name), token.value);
    clearTimeout(rt.expiryTimer);
    rt.token = token;
    rt.renewSoon = undefined;
    rt.learnExpiry(token.expiresAt, this.#jitterFor(token), token.monoExpiresAt);
    this.#armExpiry();
  }

  /**
   * Between sweeps too: a token must leave the file the moment it expires, not at the next tick. Timers run on
   * the monotonic clock; a wall clock that jumps past the expiry is caught by the schedule's heartbeat. A timer
   * that fires before the token's time is up by the daemon's clocks (timers round to the millisecond; the
   * clocks drift apart) is armed again for what is left, instead of leaving the token to the next sweep.
   */
  #armExpiry(): void {
    const rt = this.#rt;
    clearTimeout(rt.expiryTimer);
    const at = this.#now();
    rt.expiryTimer = setTimeout(() => {
      const now = this.#now();
      if (rt.token && rt.holdsToken(now)) this.#armExpiry();
      else void this.expire(now);
    }, Math.max(1, (rt.tokenExpiry(at) ?? at) - at));
    rt.expiryTimer.unref();
  }

  /**
   * A token file left by an earlier run stays while its token has more than the safety window to live, so
   * consumers keep working through a restart; this process takes it as the token it holds. Anything else
   * there (an expired token, one of unknown age, a leftover temporary file) goes.
   */
  async #adoptPublished(): Promise<void> {
    const rt = this.#rt;
    const { files, clock, log } = this.#ctx;
    await removeTemporaryLeftovers(files.templatesOf(rt.name).map((spec) => tokenFileFor(spec.dest, rt.name)), 0);
    // This process holds the sink's lock: what an earlier run left at the token file is now its own, to adopt or remove.
    const { found, token: left } = await files.adopt(rt.name, !rt.parked);
    if (!found) return;
    const at = this.#now();
    if (!left || left.expiresAt - at <= this.#ctx.config.safetyMs) {
      await files.unpublish(rt);
      return;
    }
    this.#holdToken({ value: left.value, expiresAt: left.expiresAt, monoExpiresAt: clock.mono() + (left.expiresAt - at) });
    // Templates are rendered again from it: one added since the last run gets its file now.
    if (files.templatesOf(rt.name).length > 0) await files.publish(rt);
    else rt.published = rt.token;
    // What the connector holds is not known to a process that just started: its previous run may have been
    // stopped before a reconcile succeeded (the service down, a retry pending), or, with replicas, while it
    // watched for another replica to reconcile. Both lived in memory. The first sweep looks: alone, it gives the
    // connector this token; with replicas, only when the shared record says the connector's token is due, and
    // otherwise it watches again.
    if (rt.config?.reconcile) rt.oweReconcile();
    log.info({ profile: rt.name, event: 'token.adopted', op: 'publish', expiresAt: new Date(left.expiresAt).toISOString() }, `kept the published access token of profile "${rt.name}"; it is still valid`);
  }

  // ---- notices ----

  #noticeWhere(): { connectorId?: string | undefined; folder?: string | undefined } {
    return { connectorId: this.#rt.connectorId, folder: this.#rt.config?.reconcile?.remoteUrl };
  }

  /** At each visit, before anything waits: has a spell without a token, or of a failing connector, lasted too long? */
  #checkNotices(): void {
    const rt = this.#rt;
    if (!rt.notices) return;
    const at = this.#now();
    const { config } = this.#ctx;
    // A process that hands no token on may hold none while another process keeps a live one.
    const live = rt.holdsToken(at) || (!config.needsOwnToken && (rt.expiry(at) ?? 0) > at);
    rt.notices.check(at, { live, parked: rt.parked, ...this.#noticeWhere() }, { marginMs: config.marginMs, failingAfterMs: config.connectorFailingAfterMs });
  }

  // ---- parking ----

  #park(reason: ParkReason, failure: Failure, until: 'secrets' | 'readable' | 'reload', secretsVersion: string | undefined): void {
    const rt = this.#rt;
    const already = rt.parked?.reason === reason && rt.parked.code === failure.code;
    rt.parked = { reason, code: failure.code, message: failure.message, until, secretsVersion };
    rt.renewSoon = undefined;
    if (reason === 'reauthorization_needed') {
      void this.#dropToken();
      rt.notices?.parked(this.#now(), failure, secretsVersion, rt.grant, this.#noticeWhere());
    }
    if (already) return;
    if (reason === 'reauthorization_needed') {
      this.#ctx.log.error(
        { profile: rt.name, event: 'profile.reauthorization_needed', op: 'renew', errorCode: failure.code },
        `profile "${rt.name}" needs re-authorization: ${failure.message}. Run \`${reauthorizeCommand(rt.name)}\` to authorize again; ` +
          'the daemon stops renewing this profile until its secrets change.',
      );
    } else {
      this.#ctx.log.error(
        { profile: rt.name, event: 'profile.parked', op: 'renew', errorCode: failure.code },
        `profile "${rt.name}" cannot be renewed: ${failure.message}${failure.hint ? ` (${failure.hint})` : ''}. ` +
          `Fix it (e.g. \`${reauthorizeCommand(rt.name)}\`); the daemon stops renewing this profile until its secrets change or it reloads (SIGHUP).`,
      );
    }
  }

  #unpark(why: string): void {
    const rt = this.#rt;
    if (!rt.parked) return;
    rt.parked = undefined;
    rt.backoff = Backoff.none;
    // The token it gets next is fresh: its first check comes at its offset in the next interval, not at once.
    rt.check.cycle = -Infinity;
    rt.notices?.resumed(this.#now(), why, this.#noticeWhere());
    this.#ctx.log.info({ profile: rt.name, event: 'profile.resumed', op: 'load' }, `profile "${rt.name}": ${why}; renewing it again`);
  }

  async #maybeUnpark(): Promise<void> {
    const rt = this.#rt;
    const parked = rt.parked;
    if (!parked || parked.until === 'reload' || !rt.config) return;
    let state: ProfileState | undefined;
    try {
      state = await this.#readState();
    } catch {
      return;
    }
    // Its own failure (or any recorded while parked) is no news once it runs again.
    rt.seenFailureAt = state?.lastError?.at;
    this.#learnState(state);
    if (parked.until === 'secrets' && state?.secretsVersion === parked.secretsVersion) return;
    rt.check.off = undefined;
    if (rt.config.grants.rereads) {
      try {
        rt.grant = await rt.config.grants.readGrant();
      } catch (error) {
        this.#ctx.log.warn({ profile: rt.name, event: 'profile.secrets_unreadable', op: 'load', error: classifyFailure(error).message }, `profile "${rt.name}": could not read its new secrets`);
        return;
      }
    }
    rt.secretsVersion = state?.secretsVersion;
    if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), drawJitter(this.#ctx));
    this.#unpark(parked.until === 'readable' ? 'its state file is readable again' : 'new secrets were stored');
  }

  // ---- loading ----

  #readState(): Promise<ProfileState | undefined> {
    return this.#ctx.store.read(this.#rt.name);
  }

  /** At start and when a profile is added: what the state file says about expiry, connector and secrets. */
  async #observeInitialState(): Promise<void> {
    const rt = this.#rt;
    try {
      const state = await this.#readState();
      rt.secretsVersion = state?.secretsVersion;
      rt.connectorId = state?.connectorId;
      rt.seenFailureAt = state?.lastError?.at;
      this.#learnState(state);
      if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), drawJitter(this.#ctx));
      if (state?.needsReauthorization) {
        // Flagged by an earlier run or by another command: known now, not at the next renewal hours from now.
        const failure: Failure = {
          kind: 'terminal',
          code: state.lastError?.code ?? 'OAUTH_INVALID_GRANT',
          message: state.lastError?.message ?? 'the grant was revoked or has expired',
        };
        this.#park('reauthorization_needed', failure, 'secrets', state.secretsVersion);
      }
    } catch (error) {
      this.#park('configuration_error', classifyFailure(error), 'readable', undefined);
    }
  }

  #applyEntry(entry: ProfileEntry): void {
    const rt = this.#rt;
    const { log } = this.#ctx;
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
    // A reload that reads the same grant as the last load keeps a newer one re-authorization brought (the env
    // store reads the old grant for as long as the process runs); a store that changed since wins.
    const storeChanged = rt.loadedGrant !== undefined && rt.grantDiffers(entry.grant, rt.loadedGrant);
    const keepNewer = rt.grantIssuedAt !== undefined && !storeChanged;
    const grantChanged = !keepNewer && rt.grant !== undefined && rt.grantDiffers(entry.grant);
    const targetKey = entry.reconcile ? JSON.stringify(entry.reconcile) : '';
    if (rt.client && rt.client.key !== targetKey) {
      void rt.client.client.close();
      rt.client = undefined;
    }
    rt.config = servedProfile(entry);
    rt.loadedGrant = entry.grant;
    if (!keepNewer) {
      if (grantChanged) rt.grantIssuedAt = undefined;
      rt.grant = entry.grant;
    }
    rt.loadError = undefined;
    if (rt.parked && grantChanged) this.#unpark('its secrets changed');
  }

  /** A profile that could not be loaded is loaded again, with backoff, so fixing its files is enough. */
  async #retryLoad(): Promise<void> {
    const rt = this.#rt;
    const { loadProfile, clock, config, random } = this.#ctx;
    if (!loadProfile || !rt.loadBackoff.ready(clock.mono())) return;
    const entry = await loadProfile(rt.name).catch((error: unknown) => ({ name: rt.name, error: error instanceof Error ? error : new Error(String(error)) }));
    if (isLoadFailure(entry)) {
      rt.loadBackoff = rt.loadBackoff.failed(clock.mono(), rt.loadBackoff.nextDelay(config.backoff, random));
      return;
    }
    await this.apply(entry);
  }

  // ---- one visit ----

  async #work(): Promise<Visited> {
    const rt = this.#rt;
    if (rt.parked?.reason === 'unavailable') await this.#retryLoad();
    const profile = rt.config;
    if (!profile) return { entry: { profile: rt.name, action: 'parked' } };
    if (rt.parked) await this.#maybeUnpark();
    // Only a profile parked for re-authorization looks for a shared grant at every sweep: the Redis reads grow
    // with the parked profiles. The others look when their grant fails (see ProfileRenewer).
    if (rt.parked?.reason === 'reauthorization_needed') await this.#adoptShared('sweep');
    if (rt.parked) return { entry: { profile: rt.name, action: 'parked' } };
    await this.#notesOfOthers(profile);
    const at = this.#now();
    // A write that failed when the token was renewed (the directory unusable for a while) is tried again at
    // every sweep: the file must not keep the previous token until it expires. So is a removal that failed
    // when the token expired: the file must not keep an expired token until a renewal succeeds.
    // So is a file removed or replaced under this process: put back, and said so.
    if (this.#ctx.files.publishes) {
      if (rt.token && rt.holdsToken(at)) {
        await this.checkPublished();
        const lost = this.#lost;
        this.#lost = false;
        if (rt.published !== rt.token) await this.#ctx.files.publish(rt);
        if (lost) this.#ctx.log.warn({ profile: rt.name, event: 'publish.restored', op: 'publish', path: this.#ctx.files.pathOf(rt.name) }, `a file published for profile "${rt.name}" was removed or replaced; published it again`);
      } else if (rt.fileFailed) await this.#ctx.files.unpublish(rt);
    }
    if (!rt.inBackoff() && rt.renewalDue(at, this.#ctx.config.marginMs, this.#ctx.config.needsOwnToken)) {
      const { adopted, renewal } = await this.#ctx.limiter.run(() => this.#renewer.renewUnderLock(profile));
      const entry: SweepEntry = { profile: rt.name, action: 'renewal', renewal };
      if (renewal === 'renewed' && !rt.accountRecorded) void this.recordAccount();
      if ((renewal !== 'renewed' && !adopted) || !profile.reconcile || rt.removed) return { entry };
      rt.oweReconcile();
      // A token taken from another process: that process may not have given it to the connector (`token` never
      // does), so this one does, unless someone renewed again since (the retry's rule).
      return { entry, reconcile: this.#reconciler.reconcile(adopted ? 'retry' : 'renewed') };
    }
    if (rt.reconcileDue() && profile.reconcile) {
      // One reconcile per profile at a time: a retry while one runs is that one's to make (it is still busy).
      if (this.#reconciler.reconciling) return { entry: { profile: rt.name, action: 'in_flight' } };
      return { entry: { profile: rt.name, action: 'reconcile' }, reconcile: this.#reconciler.reconcile('retry') };
    }
    return { entry: { profile: rt.name, action: 'idle' } };
  }
}
