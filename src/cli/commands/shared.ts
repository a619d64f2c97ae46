// Small pieces several profile commands share.
import { SyncauthError } from '../../errors.js';
import { isOAuthError } from '../../oauth/index.js';

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
