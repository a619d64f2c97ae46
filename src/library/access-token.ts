// `getAccessToken`: a profile's fresh access token for a program that imports syncauth, the way `syncauth
// token` gets it. The profile is one `syncauth setup` made (or one made of SYNCAUTH_* variables with
// SYNCAUTH_STORE=env); the token kept in its secret store is reused while it has more than the renew margin
// left, otherwise renewed under the profile's lock, so that callers in several processes (a daemon, `syncauth
// token`, this) cost one renewal between them. Within one process, concurrent calls for a profile share one
// flight. The logic is sync/access-token.ts's, which the CLI uses too; this only maps the options.
import { checkOptions } from '../service/options.js';
import { profileAccessToken } from '../sync/access-token.js';
import { libraryInputs } from './inputs.js';

export interface GetAccessTokenOptions {
  /** The profile; default `SYNCAUTH_PROFILE` from `env`, else `default`. */
  profile?: string;
  /** Where profile state lives; default `SYNCAUTH_CONFIG_DIR`, else the user's config directory. */
  configDir?: string;
  /** The secret store: `keychain`, `file` (with `SYNCAUTH_STORE_KEY` in `env`) or `env`; default `SYNCAUTH_STORE`, else `keychain`. */
  store?: 'keychain' | 'file' | 'env';
  /** Renew even when the kept token has more than the margin left. */
  force?: boolean;
  /** Where SYNCAUTH_* settings and secrets are read; default `process.env`. No `.env` file is read. */
  env?: NodeJS.ProcessEnv;
}

export interface AccessToken {
  accessToken: string;
  expiresAt: Date;
}

/** A fresh access token of the profile: cached, single-flight, and safe across processes. */
export async function getAccessToken(options: GetAccessTokenOptions = {}): Promise<AccessToken> {
  checkOptions('getAccessToken', options, ['profile', 'configDir', 'store', 'force', 'env'] satisfies (keyof GetAccessTokenOptions)[]);
  const { inputs } = await libraryInputs(options);
  const token = await profileAccessToken({ inputs, reuse: options.force === true ? 'never' : 'margin' });
  return { accessToken: token.accessToken, expiresAt: new Date(token.expiresAt) };
}
