// One profile's renewal, a part of its worker (worker.ts): under the profile's locks, it reads what other
// processes recorded, takes a token another process kept when it may, renews otherwise, keeps a rotated refresh
// token, and on failure backs off (a Retry-After bounded by the token's expiry) or parks the profile. It publishes
// the token it gets, which the worker holds (and drops at expiry); the reconcile that follows is reconciler.ts's.
import { SyncauthError } from '../errors.js';
import { isOAuthError, type TokenSet } from '../oauth/index.js';
import { isProfileStoreError, type ProfileState } from '../profile/index.js';
import { reauthorizeCommand } from '../profile/name.js';
import { renewHoldingLock } from '../sync/renew.js';
import { afterFailure, due, resumeAfterPause } from '../sync/renewal-policy.js';
import { remainingMs } from '../sync/token-cache.js';
import { linkSignals } from '../abort.js';
import { Backoff } from '../backoff.js';
import { classifyFailure, type Failure } from './classify.js';
import { HELD_ELSEWHERE } from './exclusion.js';
import { accessTokenSlot, type HeldToken, type Parked, type ProfileRuntime, type ServedProfile } from './runtime.js';
import { registerSecrets, registerSlotSecret } from '../redact.js';
import { isGrantStoreReadOnly } from '../sync/grant-store.js';
import type { DaemonGrant, ParkReason, RenewalOutcome } from './types.js';
import { drawJitter, type WorkerContext } from './worker-context.js';
import { RESUME_SPREAD_MS } from './account-pause.js';
import { BUDGET_BURST, BUDGET_REFILL_MS, BUDGET_RESERVE, TOKEN_CALLS_PER_DAY } from './call-budget.js';

/** How long a replica serving a profile only for a fallback waits before it tries a refused grant again. */
const FALLBACK_RETRY_MS = 5 * 60_000;

/** What a renewal asks of the worker it is part of: to hold the token it got (until it expires), or to park the profile. */
export interface RenewalWorker {
  holdToken(token: HeldToken): void;
  park(reason: ParkReason, failure: Failure, until: Parked['until'], secretsVersion: string | undefined): void;
  /** Takes a newer grant another replica shared, if there is one; whether it did. */
  adoptShared(): Promise<boolean>;
}

export class ProfileRenewer {
  readonly #rt: ProfileRuntime;
  readonly #ctx: WorkerContext;
  readonly #worker: RenewalWorker;
  /** When this renewal sent its call to the token endpoint (wall ms); undefined until it does. */
  #sentAt: number | undefined;
  /** The lifetime of the token this renewal brought, when it brought one. */
  #lifetimeMs: number | undefined;

  constructor(rt: ProfileRuntime, ctx: WorkerContext, worker: RenewalWorker) {
    this.#rt = rt;
    this.#ctx = ctx;
    this.#worker = worker;
  }

  #now(): number {
    return this.#ctx.clock.wall();
  }

  #readState(): Promise<ProfileState | undefined> {
    return this.#ctx.store.read(this.#rt.name);
  }

  #settle(outcome: RenewalOutcome): RenewalOutcome {
    this.#rt.lastRenewal = { at: this.#now(), outcome };
    this.#ctx.metrics.renewal(this.#rt.name, outcome);
    return outcome;
  }

  /** A renewal of the profile, under its locks; its outcome, and whether the token was taken from another process. */
  async renewUnderLock(profile: ServedProfile): Promise<{ renewal: RenewalOutcome; adopted?: boolean }> {
    const rt = this.#rt;
    const { shutdown, locks } = this.#ctx;
    this.#sentAt = undefined;
    this.#lifetimeMs = undefined;
    try {
      const outcome = await locks.renewal.run(
        rt.name,
        async (lockSignal) => {
          const linked = linkSignals(lockSignal, shutdown);
          try {
            return await this.#renewHolding(profile, linked.signal);
          } finally {
            linked.release();
          }
        },
      );
      if (this.#sentAt !== undefined) await this.#counted(this.#sentAt, true);
      // Another holder is renewing it now; the next visit reads what it recorded.
      return outcome === HELD_ELSEWHERE ? { renewal: this.#settle('fresh') } : outcome;
    } catch (error) {
      const renewal = await this.#renewalFailed(profile, error);
      if (this.#sentAt !== undefined) await this.#counted(this.#sentAt, false);
      return { renewal };
    }
  }

  /**
   * The call this renewal sent, counted in the profile's budget (call-budget.ts) with the failure streak it left
   * and the wait it chose: for a profile a fleet shares, in Redis too, where the next owner continues both.
   */
  async #counted(at: number, ok: boolean): Promise<void> {
    const rt = this.#rt;
    const { budgets, fleet } = this.#ctx;
    const failures = ok ? 0 : rt.backoff.failures;
    const retryAt = !ok && rt.inBackoff() ? rt.wallTimeOf(rt.backoff.until, this.#now()) : undefined;
    const lifetimeMs = ok ? this.#lifetimeMs : undefined;
    const endpoint = rt.config?.tokenUrl ?? '';
    await budgets.called(rt.name, { at, failures, endpoint, ...(retryAt !== undefined ? { retryAt } : {}), ...(lifetimeMs !== undefined ? { lifetimeMs } : {}) }, fleet?.shares(rt.name) ?? false);
  }

  /**
   * Whether the profile has spent its token calls of the day (call-budget.ts): then none is sent, and the renewal
   * waits until the budget gives one back. A renewal with a grant a person has just authorized is not held.
   */
  #budgetSpent(): boolean {
    const rt = this.#rt;
    const { budgets, log } = this.#ctx;
    if (rt.forceRenewal) return false;
    const resumeAt = budgets.spentUntil(rt.name, rt.config?.tokenUrl ?? '');
    if (resumeAt === undefined) return false;
    const at = this.#now();
    rt.backoff = rt.backoff.waitUntil(rt.monoTimeOf(resumeAt, at));
    const fields = { profile: rt.name, event: 'renewal.budget_spent', op: 'renew', resumeAt: new Date(resumeAt).toISOString(), perDay: TOKEN_CALLS_PER_DAY };
    const message =
      `profile "${rt.name}" has spent its budget of token requests (${TOKEN_CALLS_PER_DAY} in any 24 hours: a burst of ${BUDGET_BURST}, then one every ${Math.round(BUDGET_REFILL_MS / 60_000)} min, ` +
      `the last ${BUDGET_RESERVE} kept for when the token endpoint is seen answering): none sent; looking again at ${new Date(resumeAt).toISOString()}`;
    if (budgets.firstRefusal(rt.name)) log.warn(fields, message);
    else log.debug(fields, message);
    return true;
  }

  /**
   * Whether the profile's Dropbox account is paused after a 429 (here or on another replica): then no request is
   * sent, and the renewal waits until a point drawn within a minute after the pause, never past the token's
   * expiry less the safety window.
   */
  async #accountPaused(): Promise<boolean> {
    const rt = this.#rt;
    const { pauses, config, random } = this.#ctx;
    const account = rt.knownAccount;
    if (account === undefined) return false;
    const until = await pauses.pausedUntil(account);
    if (until === undefined) return false;
    const at = this.#now();
    const resumeAt = resumeAfterPause(until, { now: at, spreadMs: RESUME_SPREAD_MS, random, expiresAt: rt.expiry(at), safetyMs: config.safetyMs });
    if (resumeAt === undefined) return false;
    rt.backoff = rt.backoff.waitUntil(rt.monoTimeOf(resumeAt, at));
    if (config.spreadRenewals) rt.spreadNext = true;
    this.#ctx.log.debug({ profile: rt.name, event: 'renewal.paused', op: 'renew', resumeAt: new Date(resumeAt).toISOString() }, `profile "${rt.name}": its Dropbox account is paused; renewing at ${new Date(resumeAt).toISOString()}`);
    return true;
  }

  /** The renewal itself, holding the profile's lock; `signal` aborts when the lock is lost or the daemon stops. */
  async #renewHolding(profile: ServedProfile, signal: AbortSignal): Promise<{ renewal: RenewalOutcome; adopted?: boolean }> {
    const rt = this.#rt;
    const { store, config, rateGate, clock } = this.#ctx;
    // Another process may have renewed while this one waited for the lock.
    const state = await this.#readState();
    if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), drawJitter(this.#ctx));
    if (!rt.renewalDue(this.#now(), config.marginMs, config.needsOwnToken)) {
      rt.backoff = Backoff.none;
      return { renewal: this.#settle('fresh') };
    }
    if (profile.grants.rereads && state?.secretsVersion !== rt.secretsVersion) {
      rt.grant = await profile.grants.readGrant();
      rt.secretsVersion = state?.secretsVersion;
    }
    const grant = rt.grant as NonNullable<typeof rt.grant>;
    // In a fleet, the owner of a shared profile is read again here, against Redis's clock: a replica that was
    // stopped past its lease, or has seen another join, leaves the renewal to the owner.
    if (this.#ctx.fleet && !(await this.#ctx.fleet.confirm(rt.name))) return { renewal: this.#settle('handed_over') };
    if (await this.#accountPaused()) return { renewal: this.#settle('rate_limited') };
    // A token refused by Dropbox, or a grant another process found revoked: a token kept from it is no better.
    if (config.needsOwnToken && rt.renewSoon === undefined && (await this.#adoptKept(profile, grant))) {
      rt.backoff = Backoff.none;
      return { renewal: this.#settle('fresh'), adopted: true };
    }
    if (this.#budgetSpent()) return { renewal: this.#settle('budget_spent') };
    if (rateGate) await rateGate.wait(signal);
    const sentMono = clock.mono();
    this.#sentAt = this.#now();
    const tokens = await renewHoldingLock({
      profiles: store,
      name: rt.name,
      app: { appKey: grant.appKey, appSecret: grant.appSecret },
      refreshToken: grant.refreshToken,
      tokenUrl: profile.tokenUrl,
      now: clock.wall,
      signal,
      timeoutMs: config.tokenTimeoutMs,
      onAnswer: (error) => this.#ctx.metrics.tokenRequest(error),
      // Its own failure is no news at the next visit's look at what other processes recorded.
      onFailureRecorded: (at) => (rt.seenFailureAt = at),
      onNewRefreshToken: (refreshToken) => this.#keepRefreshToken(profile, refreshToken),
      onNewAccessToken: (fresh: TokenSet) => this.#shareAccessToken(profile, fresh, grant),
    });
    this.#lifetimeMs = tokens.expiresIn * 1000;
    this.#settle('renewed');
    await this.#renewed(tokens, sentMono);
    return { renewal: 'renewed' as const };
  }

  /**
   * This process publishes its token and its own is due, while the state says another process renewed: the
   * token that process kept in the secret store is taken, published and held as this one's, when it belongs
   * to the grant held and has more than the margin (and the largest jitter) left. Returns whether it was; if
   * not (the env store keeps none, the store is out of reach, the kept token is as old), this process renews.
   */
  async #adoptKept(profile: ServedProfile, grant: DaemonGrant): Promise<boolean> {
    const rt = this.#rt;
    const { config, clock, log } = this.#ctx;
    // Due as it would be with the largest share of jitter drawn.
    const rule = { marginMs: config.marginMs, jitterMs: config.jitterMs };
    const at = this.#now();
    const known = rt.expiry(at);
    if (known === undefined || due({ expiresAt: known }, rule, at)) return false;
    let kept: Awaited<ReturnType<ServedProfile['grants']['readAccessToken']>>;
    try {
      kept = await profile.grants.readAccessToken(grant);
    } catch (error) {
      log.warn({ profile: rt.name, event: 'token.unread', op: 'renew', error: classifyFailure(error).message }, `could not read the access token of profile "${rt.name}" another process kept; renewing instead`);
      return false;
    }
    const now = this.#now();
    if (!kept || due(kept, rule, now) || kept.accessToken === rt.token?.value) return false;
    const left = remainingMs(kept, now);
    this.#worker.holdToken({ value: kept.accessToken, expiresAt: kept.expiresAt, monoExpiresAt: clock.mono() + left });
    // Published before anything else awaits, as after a renewal of its own.
    await this.#ctx.files.publish(rt);
    log.info(
      { profile: rt.name, event: 'token.shared', op: 'renew', expiresAt: new Date(kept.expiresAt).toISOString() },
      `took the access token of profile "${rt.name}" another process renewed, instead of renewing again`,
    );
    return true;
  }

  async #keepRefreshToken(profile: ServedProfile, refreshToken: string): Promise<void> {
    const rt = this.#rt;
    // Learnt now: no line logged from here on carries it.
    registerSecrets(refreshToken);
    // In memory first: whatever happens to the store, this process keeps the grant alive.
    if (rt.grant) rt.grant = { ...rt.grant, refreshToken };
    await this.#shareRotated();
    try {
      await profile.grants.keepRefreshToken(refreshToken);
    } catch (error) {
      if (isGrantStoreReadOnly(error)) {
        this.#ctx.log.warn(
          { profile: rt.name, event: 'grant.rotated', op: 'renew', stored: false },
          `Dropbox rotated the refresh token of profile "${rt.name}", and its secrets are read-only here: the new one is kept in memory only. ` +
            `Store it where the grant comes from (run \`${reauthorizeCommand(rt.name)}\`) before this process stops.`,
        );
        return;
      }
      // Not used before it is stored: the renewal counts as failed and is retried (with the token in memory),
      // storing again each time, however the store classifies its own failure.
      throw new SyncauthError('REFRESH_TOKEN_NOT_STORED', `Dropbox rotated the refresh token of profile "${rt.name}" and storing the new one failed: ${classifyFailure(error).message}`, {
        cause: error,
      });
    }
    this.#ctx.log.info({ profile: rt.name, event: 'grant.rotated', op: 'renew' }, `Dropbox rotated the refresh token of profile "${rt.name}"; the new one is stored`);
  }

  /**
   * In a fleet, the next owner of the profile must renew with the rotated refresh token: it goes to the sealed
   * grant record in Redis (grant-record.ts), which a replica reads when it takes the profile. A failure is logged;
   * the store's copy, when writable, still carries it.
   */
  async #shareRotated(): Promise<void> {
    const rt = this.#rt;
    const { fleet, grants, clock, log } = this.#ctx;
    if (!fleet || !grants || !rt.grant) return;
    const issuedAt = Math.max(Math.round(clock.wall()), (rt.grantIssuedAt ?? 0) + 1);
    try {
      await grants.write(rt.name, { ...rt.grant, ...(rt.accountId ? { accountId: rt.accountId } : {}), issuedAt });
      rt.grantIssuedAt = issuedAt;
    } catch (error) {
      log.warn(
        { profile: rt.name, event: 'grant.rotated_unshared', op: 'renew', error: classifyFailure(error).message },
        `could not share the rotated refresh token of profile "${rt.name}" with the fleet; the replica that takes the profile next may find its grant refused`,
      );
    }
  }

  /** A failure to share the token with other processes costs them a renewal of their own, not this one. */
  async #shareAccessToken(profile: ServedProfile, tokens: TokenSet, grant: DaemonGrant): Promise<void> {
    // Learnt now: the profile's access token slot names this token from here on, in place of the last one.
    registerSlotSecret(accessTokenSlot(this.#rt.name), tokens.accessToken);
    try {
      await profile.grants.keepAccessToken(tokens, grant);
    } catch (error) {
      this.#ctx.log.warn({ profile: this.#rt.name, event: 'token.unshared', op: 'renew', error: classifyFailure(error).message }, `could not keep the access token of profile "${this.#rt.name}" in its secret store; other commands will renew their own`);
    }
  }

  /** Holds and publishes the fresh token and records the renewal; the reconcile comes after the lock is released. */
  async #renewed(tokens: TokenSet, sentMono: number): Promise<void> {
    const rt = this.#rt;
    this.#worker.holdToken({ value: tokens.accessToken, expiresAt: tokens.expiresAt, monoExpiresAt: sentMono + tokens.expiresIn * 1000 });
    // Published before anything else awaits: holding the token makes the profile ready, and /readyz must never
    // say ready while the file consumers read still holds the old token or none.
    await this.#ctx.files.publish(rt);
    rt.backoff = Backoff.none;
    rt.lastSuccessAt = this.#now();
    this.#ctx.metrics.success(rt.name, rt.lastSuccessAt);
    try {
      // Storing a rotated refresh token bumps the stored secretsVersion; that change is ours, not news.
      rt.secretsVersion = (await this.#readState())?.secretsVersion ?? rt.secretsVersion;
    } catch {
      // The next sweep's read reports a broken state file.
    }
    this.#ctx.log.info({ profile: rt.name, event: 'renewal.succeeded', op: 'renew', expiresAt: new Date(tokens.expiresAt).toISOString() }, `renewed the access token of profile "${rt.name}"`);
  }

  async #renewalFailed(profile: ServedProfile, error: unknown): Promise<RenewalOutcome> {
    const rt = this.#rt;
    const { config, random, log } = this.#ctx;
    const failure = classifyFailure(error);
    const at = this.#now();
    const next = afterFailure(failure, rt.backoff.failures + 1, {
      backoff: config.backoff,
      random,
      expiry: { expiresAt: rt.expiry(at), safetyMs: config.safetyMs, now: at },
    });
    if ('park' in next) {
      // Another replica may have shared a newer grant (a re-authorization there): try it before giving up.
      if (isOAuthError(error, 'OAUTH_INVALID_GRANT') && (await this.#worker.adoptShared())) {
        rt.backoff = rt.backoff.waitUntil(0);
        return this.#settle('failed');
      }
      // Another process may have stored a new grant since this one was read: try it before giving up.
      if (isOAuthError(error, 'OAUTH_INVALID_GRANT') && profile.grants.rereads) {
        try {
          const stored = await profile.grants.readGrant();
          if (rt.grantDiffers(stored)) {
            rt.grant = stored;
            rt.backoff = rt.backoff.waitUntil(0);
            log.info({ profile: rt.name, event: 'grant.changed', op: 'renew' }, `profile "${rt.name}": the stored grant changed; trying it`);
            return this.#settle('failed');
          }
        } catch {
          // Parked below; new secrets un-park it.
        }
      }
      // Served here only while Redis is away, with the grant this replica was configured with: a grant the owner
      // took since (a re-authorization, a rotation) is in a record this replica cannot read now. Not this
      // replica's to flag: it tries again later, and its owner, or this replica once Redis is back, decides.
      if (next.park === 'reauthorization_needed' && this.#ctx.fleet?.servesForFallback(rt.name)) {
        log.warn(
          { profile: rt.name, event: 'fleet.fallback_refused', op: 'renew', errorCode: failure.code },
          `profile "${rt.name}" is served here only while Redis is away, and Dropbox refused the grant this replica holds; its owner may hold a newer one: not flagging it, trying again in ${Math.round(FALLBACK_RETRY_MS / 60_000)} min`,
        );
        rt.backoff = rt.backoff.failed(this.#ctx.clock.mono(), FALLBACK_RETRY_MS);
        return this.#settle('failed');
      }
      let secretsVersion = rt.secretsVersion;
      try {
        secretsVersion = (await this.#readState())?.secretsVersion;
      } catch {
        // Keep the version the grant was read under.
      }
      const reason: ParkReason = next.park;
      // A state file that does not parse is fixed by hand, not by new secrets.
      this.#worker.park(reason, failure, isProfileStoreError(error, 'PROFILE_CORRUPT') ? 'readable' : 'secrets', secretsVersion);
      return this.#settle(reason);
    }
    rt.notices?.renewalFailed({ code: failure.code, message: failure.message });
    // Retried at a time the failure chose: the token it brings is renewed at a point spread over its window.
    if (this.#ctx.config.spreadRenewals) rt.spreadNext = true;
    // Dropbox's limits are per linked user: the other profiles of the account wait as well (account-pause.ts).
    const account = rt.knownAccount;
    if (failure.kind === 'rate_limited' && failure.retryAfterMs !== undefined && account !== undefined) await this.#ctx.pauses.pause(account, at + failure.retryAfterMs, rt.name);
    const wait = next.retryInMs;
    if (next.cappedByExpiry) {
      // A Retry-After is honoured, but never past the token's expiry less a safety window (the policy's rule).
      log.warn(
        { profile: rt.name, event: 'renewal.retry_after_capped', op: 'renew', retryAfterMs: failure.retryAfterMs, retryInMs: wait },
        `the token endpoint asked to wait ${Math.ceil((failure.retryAfterMs ?? 0) / 1000)} s, past the expiry of the access token of profile "${rt.name}"; trying again in ${Math.ceil(wait / 1000)} s instead`,
      );
    }
    rt.backoff = rt.backoff.failed(this.#ctx.clock.mono(), wait);
    log.warn(
      { profile: rt.name, event: 'renewal.failed', op: 'renew', errorCode: failure.code, attempt: rt.backoff.failures, retryInMs: wait },
      `could not renew the access token of profile "${rt.name}": ${failure.message}; trying again in ${Math.ceil(wait / 1000)} s`,
    );
    return this.#settle(failure.kind === 'rate_limited' ? 'rate_limited' : 'failed');
  }

}
