// A command's view of one profile: settings resolved with the profile's saved state, its state store and its
// secret store, and the secrets merged in the order of SPEC §4 (environment and .env before the store).
import { resolveSettings, type ResolvedSettings, type Settings } from '../config.js';
import { openSecretStore, type ProfileSecrets, type SecretStore } from '../credentials/index.js';
import { ExitCode, SyncauthError } from '../errors.js';
import { openProfileStore, type ProfileState, type ProfileStore } from '../profile/index.js';
import type { CommandContext } from './context.js';

export interface ProfileSession {
  name: string;
  settings: ResolvedSettings;
  values: Settings;
  profiles: ProfileStore;
  secrets: SecretStore;
  state: ProfileState | undefined;
}

const STATE_SETTINGS = [
  'baseUrl', 'apiKeyHeader', 'remoteUrl', 'recursive', 'access', 'connectorName', 'workflowId', 'schedule',
  'authorizeUrl', 'tokenUrl', 'dropboxApiUrl', 'redirectUri',
] as const;

export async function openSession(context: CommandContext, name = context.settings.values.profile): Promise<ProfileSession> {
  const { configDir, store, storeKey } = context.settings.values;
  const profiles = openProfileStore(configDir);
  const state = await profiles.read(name);
  const profile: Record<string, unknown> = {};
  for (const key of STATE_SETTINGS) if (state?.[key] !== undefined) profile[key] = state[key];
  const settings = resolveSettings({ ...context.inputs, flags: { ...context.inputs.flags, profile: name }, profile });
  const secrets = openSecretStore({ kind: store, configDir, env: context.inputs.env, ...(storeKey ? { storeKey } : {}) });
  return { name, settings, values: settings.values, profiles, secrets, state };
}

export interface ResolvedSecrets {
  appKey?: string;
  appSecret?: string;
  refreshToken?: string;
  apiKey?: string;
}

/**
 * Secrets from the environment or .env first, then the store. The store is read only when something is missing,
 * or always with `readStore` (a caller that will write to it wants to know now that it works).
 */
export async function readSecrets(session: ProfileSession, options: { readStore?: boolean } = {}): Promise<ResolvedSecrets> {
  const v = session.values;
  const fromSettings: ResolvedSecrets = {
    ...(v.appKey ? { appKey: v.appKey } : {}),
    ...(v.appSecret ? { appSecret: v.appSecret } : {}),
    ...(v.refreshToken ? { refreshToken: v.refreshToken } : {}),
    ...(v.apiKey ? { apiKey: v.apiKey } : {}),
  };
  if (!options.readStore && fromSettings.appKey && fromSettings.appSecret && fromSettings.refreshToken && fromSettings.apiKey) return fromSettings;
  const stored: ProfileSecrets = await session.secrets.get(session.name);
  return {
    ...(stored.app_key ? { appKey: stored.app_key } : {}),
    ...(stored.app_secret ? { appSecret: stored.app_secret } : {}),
    ...(stored.refresh_token ? { refreshToken: stored.refresh_token } : {}),
    ...(stored.api_key ? { apiKey: stored.api_key } : {}),
    ...fromSettings,
  };
}

/** The grant and app credentials a renewal needs, or an exit-4 error that says how to get them. */
export function requireGrant(session: ProfileSession, secrets: ResolvedSecrets): { appKey: string; appSecret: string; refreshToken: string } {
  const missing = [
    !secrets.appKey && 'SYNCAUTH_APP_KEY',
    !secrets.appSecret && 'SYNCAUTH_APP_SECRET',
    !secrets.refreshToken && 'SYNCAUTH_REFRESH_TOKEN',
  ].filter(Boolean);
  if (missing.length > 0) {
    throw new SyncauthError('SYNCAUTH_NOT_AUTHORIZED', `profile "${session.name}" has no Dropbox grant (missing ${missing.join(', ')})`, {
      exitCode: ExitCode.authRequired,
      hint: `run \`syncauth setup --profile ${session.name}\`, or set ${missing.join(', ')} in the environment`,
    });
  }
  return { appKey: secrets.appKey as string, appSecret: secrets.appSecret as string, refreshToken: secrets.refreshToken as string };
}
