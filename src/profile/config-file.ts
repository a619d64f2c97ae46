// `<configDir>/config.json`: what setup chose for each profile that a later command must know before it can open
// the profile, today the secret store (the store decides where the rest of the profile's secrets are, so it
// cannot live among them, and the daemon opens every profile with the store each one names). Non-secret and
// small; the other non-secret settings stay in each profile's state file. A config dir without this file (one the
// previous release wrote) reads as an empty one: every profile then uses the default store, as it did.
import path from 'node:path';
import type * as z from 'zod';
import type { configFileSchema } from './config-file-schema.js';
import { SyncauthError } from '../errors.js';
import { ensurePrivateDir, readTextIfExists, writePrivateFile } from './files.js';
import { withFileLock } from './lock.js';
import { syncauthCommand } from './name.js';

export const CONFIG_FILE_NAME = 'config.json';
const VERSION = 1;

export type ConfigFile = z.infer<ReturnType<typeof configFileSchema<typeof VERSION>>>;
export type ProfileChoices = ConfigFile['profiles'][string];

export function configFileOf(configDir: string): string {
  return path.join(configDir, CONFIG_FILE_NAME);
}

function invalid(file: string, reason: string): SyncauthError {
  return new SyncauthError(
    'SYNCAUTH_CONFIG_FILE_INVALID',
    `the config file ${file} is not valid (${reason}); it holds no secrets`,
    { kind: 'configuration', hint: `fix it by hand, or delete it and run \`${syncauthCommand('setup')}\` again (until then each profile uses SYNCAUTH_STORE or the default keychain)` },
  );
}

/** The config file of `configDir`, or undefined when there is none (a config dir of the previous release). */
export async function readConfigFile(configDir: string): Promise<ConfigFile | undefined> {
  const file = configFileOf(configDir);
  const text = await readTextIfExists(file);
  if (text === undefined) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw invalid(file, 'it is not JSON');
  }
  const version = (data as { version?: unknown } | null)?.version;
  if (typeof version === 'number' && version > VERSION) {
    throw invalid(file, `it was written by a newer syncauth (version ${version}); upgrade syncauth to read it`);
  }
  const parsed = (await import('./config-file-schema.js')).configFileSchema(VERSION).safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join('.');
    throw invalid(file, `${where ? `${where}: ` : ''}${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}

/**
 * Records `choices` for `profile`, keeping every other profile's. The file is replaced atomically (0600, in the
 * config dir setup made 0700), so a reader sees the old file or the new one, never a part.
 */
export async function recordProfileChoices(configDir: string, profile: string, choices: ProfileChoices): Promise<void> {
  await ensurePrivateDir(configDir);
  // Read, changed and written under a lock of its own: two setups of different profiles at once keep both.
  await withFileLock(
    `${configFileOf(configDir)}.lock`,
    async () => {
      const current = (await readConfigFile(configDir)) ?? { version: VERSION, profiles: {} };
      const next: ConfigFile = { version: VERSION, profiles: { ...current.profiles, [profile]: { ...current.profiles[profile], ...choices } } };
      await writePrivateFile(configFileOf(configDir), `${JSON.stringify(next, null, 2)}\n`);
    },
    {
      waitMs: 15_000,
      staleMs: 10_000,
      recordOwner: true,
      timeoutError: () => new SyncauthError('CONFIG_LOCK_TIMEOUT', `${configFileOf(configDir)} stayed locked by another syncauth for 15 s`, { kind: 'transient' }),
    },
  );
}
