// A profile's access token, as `syncauth token`, `refresh`, `exec` and the library's `getAccessToken` get it:
// the one kept in the profile's secret store while it will do, otherwise renewed under the profile's renewal
// lock after reading the store again, so that callers in several processes (a daemon, `syncauth token`, a
// program using the library) cost one renewal between them; within one process, concurrent callers of
// profileAccessToken share one flight.
import { SyncauthError } from '../errors.js';
import type { StoredSecrets } from '../credentials/types.js';
import { isOAuthError, type TokenSet } from '../oauth/index.js';
import { reauthorizeRemedyHint } from '../remedy.js';
import { resolveSettings } from '../config.js';
import { openProfileSession, readSecrets, requireGrant, type Grant, type OpenProfileSessionOptions, type ProfileSession } from './profile-session.js';
import { renewHoldingLock } from './renew.js';
import { due } from './renewal-policy.js';
import { accessTokenKeeper, decodeAccessToken, readKeptAccessToken } from './token-cache.js';

/** Runs `work`; a terminal OAuth failure gets the exact command that fixes it, naming the profile. */
export async function reauthorizeHint<T>(profile: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isOAuthError(error) && error.kind === 'terminal') {
      throw new SyncauthError(error.code, `${error.message} (profile "${profile}")`, {
        exitCode: error.exitCode,
        hint: reauthorizeRemedyHint(profile),
        cause: error,
      });
    }
    throw error;
  }
}

/** An access token with the refresh token of its grant, as `token` prints it and `refresh` sends it on. */
export type SessionToken = Pick<TokenSet, 'accessToken' | 'refreshToken' | 'expiresAt'>;

/**
 * When a token another process already obtained will do:
 * - `margin` (`token`): while it has more than the renew margin left;
 * - `recent` (`refresh`, which promises a renewal now): only one whose renewal finished after this process
 *   began waiting for the profile's lock (another `refresh`, `token` or a daemon that held the lock meanwhile),
 *   and less than RECENT_RENEWAL_MS ago; a token kept before this process asked is never taken, however new;
 * - `never` (`token --force`).
 */
export type TokenReuse = 'margin' | 'recent' | 'never';

/**
 * How old a renewal `refresh` takes as its own. Long enough to cover callers queued on the lock behind it,
 * short enough that the token is as fresh as a renewal now would give, within seconds of its 4 hours.
 */
export const RECENT_RENEWAL_MS = 10_000;

export interface SessionAccessTokenOptions {
  now?: () => number;
  /**
   * Wraps each write of what Dropbox handed out (a rotated refresh token, the new access token), so that a
   * caller that stops on a signal can let it finish first (the CLI's writeSection). Default: the write alone.
   */
  guardWrite?: <T>(write: () => Promise<T>) => Promise<T>;
}

/**
 * The profile's access token: one kept in its secret store when `reuse` allows, otherwise renewed under the
 * profile's renewal lock. Under the lock the store is read again first: another process may have renewed (or
 * rotated the refresh token) while this one waited, and then its result is used. A renewal records its
 * outcome in the state, stores a rotated refresh token and keeps the new access token in the store.
 */
export async function sessionAccessToken(
  session: ProfileSession,
  grant: Grant,
  reuse: TokenReuse,
  options: SessionAccessTokenOptions = {},
): Promise<SessionToken> {
  const { secrets, name } = session;
  const now = options.now ?? Date.now;
  const guardWrite = options.guardWrite ?? ((write) => write());
  // A profile the state marks for re-authorization has a revoked grant, whose access tokens died with it.
  const cacheable = secrets.writable && session.state?.needsReauthorization !== true;
  // `waitingSince`: when this process began waiting for the lock; `recent` reuses only a renewal finished since.
  const reusable = (kept: string | undefined, current: Grant, waitingSince?: number): SessionToken | undefined => {
    const cached = reuse === 'never' ? undefined : decodeAccessToken(kept, current);
    if (!cached) return undefined;
    const marginMs = session.values.renewMargin * 1000;
    // Not waiting yet (before the lock): no renewal counts as recent.
    const rule = reuse === 'margin' ? { marginMs } : { marginMs, recent: { since: waitingSince ?? Infinity, withinMs: RECENT_RENEWAL_MS } };
    if (due(cached, rule, now())) return undefined;
    return { accessToken: cached.accessToken, refreshToken: current.refreshToken, expiresAt: cached.expiresAt };
  };
  // Before the lock only `token` may reuse: `refresh` promises a renewal made now, not one made before it asked.
  // The token alone is read: the grant was read already, and a keychain would start a child for it again.
  if (cacheable && reuse === 'margin') {
    const hit = reusable(await readKeptAccessToken(secrets, name), grant);
    if (hit) return hit;
  }
  const waitingSince = now();
  return reauthorizeHint(name, () =>
    session.profiles.withLock(name, async () => {
      let current = grant;
      if (cacheable) {
        const stored = await secrets.get(name);
        current = storedGrant(session, grant, stored);
        const hit = reusable(stored.access_token, current, waitingSince);
        if (hit) return hit;
      }
      const keep = cacheable ? accessTokenKeeper(secrets, name, current.appKey, now) : undefined;
      return renewHoldingLock({
        profiles: session.profiles,
        name,
        app: { appKey: current.appKey, appSecret: current.appSecret },
        refreshToken: current.refreshToken,
        tokenUrl: session.values.tokenUrl,
        now,
        // Never stopped in the middle of storing what Dropbox handed out.
        ...(secrets.writable ? { onNewRefreshToken: (rt: string) => guardWrite(() => secrets.set(name, { refresh_token: rt })) } : {}),
        ...(keep ? { onNewAccessToken: (tokens: TokenSet) => guardWrite(() => keep(tokens)) } : {}),
      });
    }),
  );
}

/**
 * The grant with the refresh token as the store holds it now: another process may have stored a rotated one
 * while this one waited for the lock. One from the environment wins over the store, as in readSecrets.
 */
function storedGrant(session: ProfileSession, grant: Grant, stored: StoredSecrets): Grant {
  if (session.settings.sources.refreshToken === 'env') return grant;
  return { ...grant, refreshToken: stored.refresh_token ?? grant.refreshToken };
}

export interface ProfileAccessTokenOptions extends OpenProfileSessionOptions, SessionAccessTokenOptions {
  reuse: TokenReuse;
}

const inFlight = new Map<string, Promise<SessionToken>>();

/**
 * Opens the profile, reads its grant and gets its access token (sessionAccessToken); concurrent calls in this
 * process for the same profile, config directory and `reuse` share one flight.
 */
export async function profileAccessToken(options: ProfileAccessTokenOptions): Promise<SessionToken> {
  const { configDir, profile } = resolveSettings(options.inputs).values;
  const name = options.name ?? profile;
  const key = `${configDir}\0${name}\0${options.reuse}`;
  const running = inFlight.get(key);
  if (running) return running;
  const flight = (async (): Promise<SessionToken> => {
    const session = await openProfileSession({ ...options, name, existing: true });
    const grant = requireGrant(session, await readSecrets(session));
    return sessionAccessToken(session, grant, options.reuse, options);
  })();
  inFlight.set(key, flight);
  try {
    return await flight;
  } finally {
    inFlight.delete(key);
  }
}
