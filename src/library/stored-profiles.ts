// `storedProfiles` for a program that runs `startDaemon` itself: the profiles `syncauth setup` stored in a config
// dir, loaded as `syncauth daemon` loads them (src/daemon/profiles.ts), each with the GrantStore that keeps its
// grant where it lives. A rotated refresh token, a grant from the re-authorization page and each fresh access
// token are then kept as the command keeps them, and `syncauth token` in another process reuses them. The config
// dir is judged first, as every command judges it (config-dir.ts). No `.env` file is read.
import type { SettingInputs } from '../config.js';
import { loadDaemonProfiles } from '../daemon/profiles.js';
import type { ProfileEntry } from '../daemon/types.js';
import { readConfigFile } from '../profile/config-file.js';
import { openProfileStore, type ProfileStore } from '../profile/index.js';
import { checkOptions } from '../service/options.js';
import { openProfileSession, readSecrets } from '../sync/profile-session.js';
import { libraryInputs } from './inputs.js';

export interface StoredProfilesOptions {
  /** The profiles to serve; default every stored one. */
  profiles?: string[];
  /** Where profile state lives; default `SYNCAUTH_CONFIG_DIR`, else the user's config directory. */
  configDir?: string;
  /** The secret store: `keychain`, `file` (with `SYNCAUTH_STORE_KEY` in `env`) or `env`; default as recorded per profile. */
  store?: 'keychain' | 'file' | 'env';
  /** Where SYNCAUTH_* settings and secrets are read; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** What `startDaemon` takes to serve stored profiles: spread it into its options. */
export interface StoredProfiles {
  /** Loads the profiles, at start and again on each `reload()`. */
  profiles: () => Promise<ProfileEntry[]>;
  /** Loads one profile again (one that failed to load is retried with it). */
  loadProfile: (name: string) => Promise<ProfileEntry>;
  /** The profiles' state and locks, shared with every other process using the config dir. */
  profileStore: ProfileStore;
}

export async function storedProfiles(options: StoredProfilesOptions = {}): Promise<StoredProfiles> {
  checkOptions('storedProfiles', options, ['profiles', 'configDir', 'store', 'env'] satisfies (keyof StoredProfilesOptions)[]);
  // The config dir is judged here, once: one others may write is refused before anything in it is read.
  const { inputs, values } = await libraryInputs(options);
  const profileStore = openProfileStore(values.configDir);
  // Each load reads what setup recorded in the config dir once (a reload sees a profile set up since), and hands
  // it to every profile's session.
  const loading = async () => {
    const configFile = await readConfigFile(values.configDir);
    const recorded: SettingInputs = configFile ? { ...inputs, configFile } : inputs;
    return {
      values,
      store: profileStore,
      open: async (name: string, opened: { existing?: boolean } = {}) => {
        const session = await openProfileSession({ inputs: recorded, name, ...(opened.existing ? { existing: true } : {}) });
        return { session, secrets: await readSecrets(session) };
      },
    };
  };
  const requested = options.profiles ? [...options.profiles] : undefined;
  return {
    profiles: async () => loadDaemonProfiles(await loading(), requested),
    loadProfile: async (name) => (await loadDaemonProfiles(await loading(), [name]))[0] ?? { name, error: new Error(`profile "${name}" is gone`) },
    profileStore,
  };
}
