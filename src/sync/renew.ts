// Renewing one profile's access token and recording the outcome in its state, under the profile's renewal
// lock so that two processes never renew the same grant at once.
import { isOAuthError, renewAccessToken, type AppCredentials, type TokenSet } from '../oauth/index.js';
import { newSecretsVersion, type ProfileState, type ProfileStore } from '../profile/index.js';

export interface RenewOptions {
  profiles: ProfileStore;
  name: string;
  app: AppCredentials;
  refreshToken: string;
  tokenUrl: string;
  /** Called under the lock when Dropbox hands out a new refresh token, to store it before anything else. */
  onNewRefreshToken?: (refreshToken: string) => Promise<void>;
  /**
   * Called under the lock with every fresh token set, after `onNewRefreshToken` and before the state records
   * the renewal, to keep the access token and its expiry where the profile's secrets live so that other
   * processes reuse it (see `accessTokenKeeper` in token-cache.ts). A rejection fails the renewal.
   */
  onNewAccessToken?: (tokens: TokenSet) => Promise<void>;
  now?: () => number;
  /** Cancels the token request (the daemon's shutdown, a lost lease). */
  signal?: AbortSignal;
  /** Deadline of the token request; the OAuth module's default when absent. */
  timeoutMs?: number;
  /** Told when the token request ends, before anything is done with its answer: `error` is absent when it gave tokens. */
  onAnswer?: (error?: unknown) => void;
  /** Told the `lastError.at` of a failure this renewal recorded in the state, so its caller does not take it for another process's. */
  onFailureRecorded?: (at: string) => void;
}

/**
 * Renews and records expiry and renewal time; a failure is recorded too (terminal ones flag re-authorization).
 * The caller holds the profile's renewal lock (`ProfileStore.withLock`) and has re-read, under it, what another
 * process may have renewed in the meantime: the state's expiry (the daemon) or the token kept in the secret
 * store (`token`, `refresh`).
 */
export async function renewHoldingLock(options: RenewOptions): Promise<TokenSet> {
  const { profiles, name } = options;
  let tokens: TokenSet;
  try {
    tokens = await renewAccessToken({
      tokenUrl: options.tokenUrl,
      app: options.app,
      refreshToken: options.refreshToken,
      ...(options.now ? { now: options.now } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    });
  } catch (error) {
    options.onAnswer?.(error);
    const recorded = await recordFailure(profiles, name, error, options.now);
    if (recorded !== undefined) options.onFailureRecorded?.(recorded);
    throw error;
  }
  options.onAnswer?.();
  if (tokens.refreshToken !== options.refreshToken && options.onNewRefreshToken) {
    await options.onNewRefreshToken(tokens.refreshToken);
  }
  await options.onNewAccessToken?.(tokens);
  // The renewal record, which only this lock's holder writes: no write lock, no new file, no flush (what it
  // records is learnt again by the next renewal; see renewal-record.ts).
  await profiles.recordRenewal(name, { accessTokenExpiresAt: tokens.expiresAt, lastRenewalAt: options.now?.() ?? Date.now() });
  // A failure recorded before (a renewal, a reconcile, setup) is cleared in the state file, as before.
  const state = await profiles.read(name);
  if (state?.lastError !== undefined || state?.needsReauthorization === true) {
    await profiles.update(name, (current) => ({ ...baseState(current), lastError: undefined, needsReauthorization: false }), { durable: false });
  }
  return tokens;
}

export function baseState(current: ProfileState | undefined): Omit<ProfileState, 'version' | 'profile' | 'createdAt' | 'updatedAt'> {
  if (!current) return {};
  const { version: _v, profile: _p, createdAt: _c, updatedAt: _u, ...rest } = current;
  return rest;
}

/**
 * The state after a new grant replaced the profile's (re-authorization): a new secrets version tells other
 * processes the grant they hold is stale; the old grant's trouble and its token's expiry are forgotten; the
 * account is recorded when known.
 */
export function stateWithNewGrant(current: ProfileState | undefined, accountId: string | undefined): Omit<ProfileState, 'version' | 'profile' | 'createdAt' | 'updatedAt'> {
  return {
    ...baseState(current),
    secretsVersion: newSecretsVersion(),
    needsReauthorization: false,
    lastError: undefined,
    accessTokenExpiresAt: undefined,
    ...(accountId ? { accountId } : {}),
  };
}

/** Records the failure in the profile's state; returns the `lastError.at` it wrote. */
export async function recordFailure(profiles: ProfileStore, name: string, error: unknown, now?: () => number): Promise<string | undefined> {
  const terminal = isOAuthError(error) && (error.kind === 'terminal' || error.kind === 'configuration');
  const code = error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : 'UNKNOWN';
  const message = error instanceof Error ? error.message : String(error);
  const state = await profiles.update(name, (current) => ({
    ...baseState(current),
    lastError: { code, message, at: new Date(now?.() ?? Date.now()).toISOString(), terminal },
    ...(isOAuthError(error) && error.kind === 'terminal' ? { needsReauthorization: true } : {}),
  }));
  return state?.lastError?.at;
}
