// One profile opened for use, by the CLI's commands and by the library alike: settings resolved with the
// profile's saved state, its state store and its secret store, and the secrets merged: the environment first,
// then the store, then `.env`, which may supply secrets only to a profile that has none stored (see
// readSecrets). It takes plain options, never a command's context: what it has to say on the way (a store's
// warning, a setup it finished or undid, a `.env` setting it passed over) goes to `onNotice`, and the caller
// decides where that is shown.
import { existsSync } from 'node:fs';
import path from 'node:path';
import {
  ENDPOINT_OVERRIDE_ENV, ENDPOINT_SETTINGS, resolveSettings, SETTINGS,
  type IgnoredDotenv, type ResolvedSettings, type SettingInputs, type Settings,
} from '../config.js';
import type { OpenSecretStoreOptions, ProfileSecrets, SecretStore } from '../credentials/index.js';
import { ExitCode, SyncauthError } from '../errors.js';
import { configFileOf, readConfigFile } from '../profile/config-file.js';
import { openProfileStore, type ProfileState, type ProfileStore } from '../profile/index.js';
import { remedyHint } from '../remedy.js';
import { registerAppCredentials, registerSecrets, registerSlotSecret } from '../redact.js';
import { recoverInterruptedSetup } from './setup-journal.js';

/** What opening a profile and reading its secrets has to say; none of it carries a secret's value. */
export type SessionNotice =
  /** A warning of the secret store (a file store opened with a short key). */
  | { kind: 'warning'; message: string }
  /** A setup killed between its writes, finished or undone before the profile was read. */
  | { kind: 'recovery'; message: string }
  /** Settings a `.env` set that were passed over, and why (see DOTENV_DESTINATIONS in config.ts). */
  | { kind: 'ignored-dotenv'; ignored: readonly IgnoredDotenv[] }
  /** The profile's stored secrets were used rather than those a `.env` offered; said once per profile. */
  | { kind: 'note'; message: string };

export interface OpenProfileSessionOptions {
  /** What settings are resolved from (flags, environment, `.env` and its trust); the profile's state is added. */
  inputs: SettingInputs;
  /** The profile; default the one `inputs` resolve to. */
  name?: string;
  /** How the secret store is opened; default `openSecretStore`. */
  openSecretStore?: (options: OpenSecretStoreOptions) => Promise<SecretStore>;
  /**
   * The user asked, explicitly, to send the profile's secrets to endpoints other than the recorded ones
   * (--endpoint-override, SYNCAUTH_ENDPOINT_OVERRIDE=1 in the process environment, never from `.env`).
   */
  endpointOverride?: boolean;
  /** The caller records the profile's endpoints (setup): an endpoint set by flag or environment replaces the recorded one. */
  recordsEndpoints?: boolean;
  /** Where notices go; default nowhere. */
  onNotice?: (notice: SessionNotice) => void;
  /**
   * The caller uses a profile that must exist already (token, refresh, a daemon's named profile, the library):
   * one that exists nowhere is refused by name, with the profiles there are, before its secret store is opened.
   */
  existing?: boolean;
}

export interface ProfileSession {
  name: string;
  settings: ResolvedSettings;
  values: Settings;
  profiles: ProfileStore;
  secrets: SecretStore;
  state: ProfileState | undefined;
  /** Where readSecrets says, once, that it passed over secrets from `.env`. */
  onNotice?: (notice: SessionNotice) => void;
}

const STATE_SETTINGS = [
  'baseUrl', 'apiKeyHeader', 'remoteUrl', 'recursive', 'access', 'connectorName', 'workflowId', 'schedule',
  'authorizeUrl', 'tokenUrl', 'dropboxApiUrl', 'redirectUri',
] as const;

async function defaultSecretStore(options: OpenSecretStoreOptions): Promise<SecretStore> {
  // Loaded when a profile is opened, not when the package is imported.
  const { openSecretStore } = await import('../credentials/index.js');
  return openSecretStore(options);
}

export async function openProfileSession(options: OpenProfileSessionOptions): Promise<ProfileSession> {
  const { onNotice } = options;
  // Settings are resolved in stages: the command's (only when the caller has not given the profile or the config
  // file, which a daemon loading thousands of profiles has), the profile's store, then its state.
  const first = options.name === undefined || options.inputs.configFile === undefined ? resolveSettings(options.inputs).values : undefined;
  const name = options.name ?? (first as Settings).profile;
  // What setup recorded in the config dir (a caller that has read it, the CLI, hands it in; the library does not).
  const configFile = options.inputs.configFile ?? (await readConfigFile((first as Settings).configDir));
  const given: SettingInputs = configFile ? { ...options.inputs, configFile } : options.inputs;
  // Resolved for this profile: the store its config file entry names (unless a flag or the environment says
  // otherwise) decides where its secrets are, so it is known before anything of the profile is read.
  const resolvedBase = resolveSettings({ ...given, flags: { ...given.flags, profile: name } });
  const base = resolvedBase.values;
  const { configDir, store, storeKey } = base;
  const profiles = openProfileStore(configDir);
  if (options.existing) await requireKnownProfile(profiles, configFile, name, base);
  const secrets = await (options.openSecretStore ?? defaultSecretStore)({
    kind: store, configDir, env: options.inputs.env, ...(storeKey ? { storeKey } : {}),
    ...(resolvedBase.sources.store === 'config' ? { chosenBy: `the ${store} store, which ${configFileOf(configDir)} records for profile "${name}",` } : {}),
    onWarning: (message) => onNotice?.({ kind: 'warning', message }),
  });
  // A setup killed between its writes is finished or undone before anything reads the profile.
  await recoverInterruptedSetup(profiles, secrets, name, (message) => onNotice?.({ kind: 'recovery', message }));
  const state = await profiles.read(name);
  const profile: Record<string, unknown> = {};
  for (const key of STATE_SETTINGS) if (state?.[key] !== undefined) profile[key] = state[key];
  const inputs = { ...given, flags: { ...given.flags, profile: name }, profile };
  let settings = resolveSettings(inputs);
  checkRecordedEndpoints(options, name, state, settings);
  // A `.env` endpoint still in use directs only the `.env`'s own secrets: once the profile's store holds any,
  // those are what would be sent (readSecrets prefers them), so the endpoint is passed over.
  if (ENDPOINT_SETTINGS.some((setting) => settings.sources[setting] === 'dotenv')) {
    const held = await storeHolding(secrets, name);
    if (held) settings = resolveSettings({ ...inputs, dotenvTrust: { ...inputs.dotenvTrust, store: held } });
  }
  if (settings.ignoredDotenv.length > 0) onNotice?.({ kind: 'ignored-dotenv', ignored: settings.ignoredDotenv });
  return { name, settings, values: settings.values, profiles, secrets, state, ...(onNotice ? { onNotice } : {}) };
}

/**
 * A profile exists when it has a state file or a renewal record, config.json records it, a setup of it was
 * interrupted, or the environment (or `.env`) hands in a grant (a profile made of SYNCAUTH_* variables, and every
 * profile of the env store). Otherwise nothing of it can be read, and asking its secret store (a keychain that is
 * not there, say) would only report on the store: it is refused by name, kind `configuration` (retrying cannot
 * help) and exit 2 (the name is the input at fault), as `status --profile` refuses it.
 */
async function requireKnownProfile(profiles: ProfileStore, configFile: { profiles: Readonly<Record<string, unknown>> } | undefined, name: string, values: Settings): Promise<void> {
  if (values.store === 'env' || values.refreshToken || configFile?.profiles[name] !== undefined) return;
  const traces = [profiles.fileOf(name), profiles.recordFileOf(name), path.join(profiles.dir, `${name}.setup-pending`)];
  if (traces.some((file) => existsSync(file))) return;
  const known = [...new Set([...(await profiles.names()), ...Object.keys(configFile?.profiles ?? {})])].sort();
  throw new SyncauthError('SYNCAUTH_NO_PROFILE', `no profile named "${name}" in ${values.configDir}`, {
    kind: 'configuration',
    // The one exception to the kind's exit code: the name given is what is wrong, as for any input refused (2).
    exitCode: ExitCode.usage,
    hint: known.length > 0
      ? `the profiles there are: ${known.join(', ')}`
      : remedyHint({ action: 'reauthorize', profile: name }, (command) => `no profile is set up there yet: run \`${command}\` to make one`),
  });
}

/** Whose secrets the store holds for the profile, for a note; a store that cannot be read may hold some. */
async function storeHolding(secrets: SecretStore, name: string): Promise<string | undefined> {
  const where = `profile "${name}"'s ${secrets.kind === 'env' ? 'environment' : `${secrets.kind} store`}`;
  try {
    const stored = await secrets.get(name);
    return Object.values(stored).some(Boolean) ? where : undefined;
  } catch {
    return `${where}, which could not be read`;
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'an unreadable URL';
  }
}

/**
 * A profile's secrets go only to the endpoints recorded with them at setup. A different endpoint is used only
 * when the user asked for it in a way they can see: setup run again with it in the environment or a flag (which
 * records it), or --endpoint-override / SYNCAUTH_ENDPOINT_OVERRIDE=1. A `.env` can never move a profile: it may
 * have come with a cloned repository. A profile without recorded endpoints (one made of environment variables)
 * has nothing to compare with.
 */
function checkRecordedEndpoints(
  options: OpenProfileSessionOptions,
  name: string,
  state: ProfileState | undefined,
  settings: ResolvedSettings,
): void {
  if (!state || options.endpointOverride) return;
  const problems: string[] = [];
  let dotenvAsked = false;
  for (const setting of ENDPOINT_SETTINGS) {
    const recorded = state[setting];
    let wanted = settings.values[setting];
    let source = settings.sources[setting];
    // What a `.env` asks for counts even where resolution passed it over: such a file is refused outright here.
    const asked = source === 'flag' || source === 'env' ? undefined : options.inputs.dotenv?.[SETTINGS[setting].env];
    if (asked) {
      try {
        wanted = SETTINGS[setting].parse(asked);
        source = 'dotenv';
      } catch {
        // Not a URL: resolution has refused it already or passed it over.
      }
    }
    if (recorded === undefined || wanted === undefined || wanted === recorded) continue;
    if (options.recordsEndpoints && (source === 'flag' || source === 'env')) continue;
    const spec = SETTINGS[setting];
    const where = source === 'flag' ? `--${spec.flag}` : source === 'dotenv' ? `${spec.env} (in .env)` : spec.env;
    const [from, to] = [hostOf(recorded), hostOf(wanted)];
    problems.push(from === to ? `${where} points at a different path on ${to} than the one recorded` : `${where} points at ${to}, not the recorded ${from}`);
    if (source === 'dotenv') dotenvAsked = true;
  }
  if (problems.length === 0) return;
  throw new SyncauthError(
    'SYNCAUTH_ENDPOINT_MISMATCH',
    `profile "${name}" sends its secrets only to the endpoints recorded at setup: ${problems.join('; ')}`,
    {
      // Refused before anything is sent: exit 2.
      kind: 'bad_input',
      hint: remedyHint({ action: 'reauthorize', profile: name }, (command) =>
        `${dotenvAsked ? 'if the .env is not yours, remove it or run elsewhere; ' : ''}to move the profile, run ` +
        `\`${command}\` with the new endpoint as a flag or in the environment; to use it for this run ` +
        `only, add --endpoint-override or set ${ENDPOINT_OVERRIDE_ENV}=1 in the environment (never read from .env)`),
    },
  );
}

export interface ResolvedSecrets {
  appKey?: string;
  appSecret?: string;
  refreshToken?: string;
  apiKey?: string;
}

const SECRET_FIELDS = ['appKey', 'appSecret', 'refreshToken', 'apiKey'] as const;
const noted = new Set<string>();

/**
 * Secrets from the environment first, then the store, then `.env`. A `.env` supplies secrets only to a profile
 * whose store holds none: mixed into stored ones, a key from someone else's `.env` would send this profile's
 * other secrets where that key leads (a service API key decides the workspace the connector, app secret and
 * refresh token go to). The store is read only when the environment lacks something, or always with
 * `readStore` (a caller that will write to it wants to know now that it works).
 */
export async function readSecrets(session: ProfileSession, options: { readStore?: boolean } = {}): Promise<ResolvedSecrets> {
  const fromEnv: ResolvedSecrets = {};
  const fromDotenv: ResolvedSecrets = {};
  for (const field of SECRET_FIELDS) {
    const value = session.values[field];
    if (value) (session.settings.sources[field] === 'dotenv' ? fromDotenv : fromEnv)[field] = value;
  }
  if (!options.readStore && SECRET_FIELDS.every((field) => fromEnv[field])) return fromEnv;
  const stored: ProfileSecrets = await session.secrets.get(session.name);
  const fromStore: ResolvedSecrets = {
    ...(stored.app_key ? { appKey: stored.app_key } : {}),
    ...(stored.app_secret ? { appSecret: stored.app_secret } : {}),
    ...(stored.refresh_token ? { refreshToken: stored.refresh_token } : {}),
    ...(stored.api_key ? { apiKey: stored.api_key } : {}),
  };
  const storeHasSome = Object.keys(fromStore).length > 0;
  const passedOver = storeHasSome ? SECRET_FIELDS.filter((field) => fromDotenv[field] && !fromEnv[field]) : [];
  if (passedOver.length > 0 && !noted.has(session.name)) {
    noted.add(session.name);
    session.onNotice?.({
      kind: 'note',
      message:
        `profile "${session.name}" uses its stored secrets, not ${passedOver.map((f) => SETTINGS[f].env).join(', ')} from .env ` +
        '(to replace them, set them in the environment and run setup)',
    });
  }
  const secrets = { ...(storeHasSome ? {} : fromDotenv), ...fromStore, ...fromEnv };
  registerSecrets(secrets.apiKey);
  // The profile's own slot: a daemon that lets the profile go (a fleet replica that does not serve it) releases it.
  registerSlotSecret(refreshTokenSlot(session.name), secrets.refreshToken, { keepReplaced: true });
  registerAppCredentials(secrets.appKey, secrets.appSecret);
  return secrets;
}

/** Where a profile's refresh token, as read from its store, is registered with the redaction. */
export function refreshTokenSlot(profile: string): string {
  return `refresh-token:${profile}`;
}

/** The Dropbox grant and the app credentials a renewal needs. */
export interface Grant {
  appKey: string;
  appSecret: string;
  refreshToken: string;
}

/**
 * The grant and app credentials a renewal needs, or a `terminal` error (exit 4: authorization required) that
 * says how to get them. A profile that does not exist has none.
 */
export function requireGrant(session: Pick<ProfileSession, 'name'>, secrets: ResolvedSecrets): Grant {
  const missing = [
    !secrets.appKey && 'SYNCAUTH_APP_KEY',
    !secrets.appSecret && 'SYNCAUTH_APP_SECRET',
    !secrets.refreshToken && 'SYNCAUTH_REFRESH_TOKEN',
  ].filter(Boolean);
  if (missing.length > 0) {
    throw new SyncauthError('SYNCAUTH_NOT_AUTHORIZED', `profile "${session.name}" has no Dropbox grant (missing ${missing.join(', ')})`, {
      kind: 'terminal',
      hint: remedyHint({ action: 'reauthorize', profile: session.name }, (command) => `run \`${command}\`, or set ${missing.join(', ')} in the environment`),
    });
  }
  return { appKey: secrets.appKey as string, appSecret: secrets.appSecret as string, refreshToken: secrets.refreshToken as string };
}
