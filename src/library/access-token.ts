// `getAccessToken`: a profile's fresh access token for a program that imports syncauth, the way `syncauth
// token` gets it. The profile is one `syncauth setup` made (or one made of SYNCAUTH_* variables with
// SYNCAUTH_STORE=env); the token kept in its secret store is reused while it has more than the renew margin
// left, otherwise renewed under the profile's lock, so that callers in several processes (a daemon, `syncauth
// token`, this) cost one renewal between them. Within one process, concurrent calls for a profile share one
// flight.
import { createFactory } from '../cli/factory.js';
import { resolveSettings, type SettingInputs, type SettingName } from '../config.js';
import type { CommandContext } from '../cli/context.js';
import { sessionAccessToken } from '../cli/commands/shared.js';
import { openSession, readSecrets, requireGrant } from '../cli/session.js';

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

const inFlight = new Map<string, Promise<AccessToken>>();

/** A fresh access token of the profile: cached, single-flight, and safe across processes. */
export async function getAccessToken(options: GetAccessTokenOptions = {}): Promise<AccessToken> {
  const context = await libraryContext(options);
  const { configDir, profile } = context.settings.values;
  const key = `${configDir}\0${profile}\0${options.force === true}`;
  const running = inFlight.get(key);
  if (running) return running;
  const flight = (async (): Promise<AccessToken> => {
    const session = await openSession(context);
    const grant = requireGrant(session, await readSecrets(session));
    const token = await sessionAccessToken(session, grant, options.force === true ? 'never' : 'margin');
    return { accessToken: token.accessToken, expiresAt: new Date(token.expiresAt) };
  })();
  inFlight.set(key, flight);
  try {
    return await flight;
  } finally {
    inFlight.delete(key);
  }
}

/** Settings as a command would resolve them, from the options and the environment given (never a `.env`). */
async function libraryContext(options: GetAccessTokenOptions): Promise<CommandContext> {
  const flags: Partial<Record<SettingName, unknown>> = {};
  if (options.profile !== undefined) flags.profile = options.profile;
  if (options.configDir !== undefined) flags.configDir = options.configDir;
  if (options.store !== undefined) flags.store = options.store;
  const { default: envPaths } = await import('env-paths');
  const inputs: SettingInputs = { flags, env: { ...(options.env ?? process.env) }, dotenv: {}, defaultConfigDir: envPaths('syncauth', { suffix: '' }).config };
  const silent = { write: () => true } as unknown as NodeJS.WritableStream;
  const io = { stdout: silent, stderr: silent };
  return { settings: resolveSettings(inputs), inputs, json: false, io, stdin: process.stdin, factory: createFactory({ env: () => ({ ...inputs.env }), io }) };
}
