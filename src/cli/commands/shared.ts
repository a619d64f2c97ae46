// Small pieces several profile commands share.
import { SyncauthError } from '../../errors.js';
import { isOAuthError, type TokenSet } from '../../oauth/index.js';
import { renewProfileToken } from '../../sync/renew.js';
import type { ProfileSession } from '../session.js';

/** Runs `work`; a terminal OAuth failure gets the exact command that fixes it, naming the profile. */
export async function reauthorizeHint<T>(profile: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isOAuthError(error) && error.kind === 'terminal') {
      throw new SyncauthError(error.code, `${error.message} (profile "${profile}")`, {
        exitCode: error.exitCode,
        hint: `run \`syncauth setup --profile ${profile}\` to authorize again`,
        cause: error,
      });
    }
    throw error;
  }
}

/** Renews the profile's access token, recording the outcome in its state and storing a rotated refresh token. */
export function renewSessionToken(
  session: ProfileSession,
  grant: { appKey: string; appSecret: string; refreshToken: string },
): Promise<TokenSet> {
  return reauthorizeHint(session.name, () =>
    renewProfileToken({
      profiles: session.profiles,
      name: session.name,
      app: { appKey: grant.appKey, appSecret: grant.appSecret },
      refreshToken: grant.refreshToken,
      tokenUrl: session.values.tokenUrl,
      ...(session.secrets.writable ? { onNewRefreshToken: (rt: string) => session.secrets.set(session.name, { refresh_token: rt }) } : {}),
    }),
  );
}
