// What the daemon keeps of each loaded profile for its life: closures that write the profile's tokens back.
// They write through stores shared by the whole load, not through stores of their own: a store is some fifty
// closures, and one kept per profile held ten thousand of each on the heap of a 10,000-profile daemon.
import { beforeAll, describe, expect, test } from 'vitest';
import { loadProfiles } from '../../src/cli/commands/daemon.js';
import type { CommandContext } from '../../src/cli/context.js';
import { openSecretStore, type SecretStore, type StoredSecrets } from '../../src/credentials/index.js';
import type { DaemonProfile } from '../../src/daemon/index.js';
import type { TokenSet } from '../../src/oauth/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { recordProfileChoices } from '../../src/profile/config-file.js';
import type { Home } from '../helpers/onboarding.js';
import { fileStoreContext, storedProfilesHome } from './stored-profiles-home.js';

const PROFILES = 40;
let home: Home;
let names: string[];

beforeAll(async () => {
  ({ home, names } = await storedProfilesHome(PROFILES));
});

/** A command context whose secret stores are numbered as they are opened; `writers` records which one wrote each profile. */
function context(writers: Map<string, Set<number>>): CommandContext {
  let opened = 0;
  return fileStoreContext(home, (factory) => {
    factory.secretStore = async (options) => {
      const store = openSecretStore(options);
      const id = ++opened;
      const numbered: SecretStore = {
        kind: store.kind,
        writable: store.writable,
        get: (profile) => store.get(profile),
        set: (profile, secrets) => {
          writers.set(profile, (writers.get(profile) ?? new Set()).add(id));
          return store.set(profile, secrets);
        },
        delete: (profile) => store.delete(profile),
        listProfiles: () => store.listProfiles(),
      };
      return numbered;
    };
  });
}

function tokens(name: string): TokenSet {
  return { accessToken: `sl.at-${name}`, refreshToken: `rt-${name}`, expiresAt: Date.now() + 3_600_000, expiresIn: 3600, scopes: [], tokenType: 'bearer', warnings: [] };
}

describe('the stores a loaded profile keeps', () => {
  test('every profile of a load writes through one secret store, and each write lands in its own profile', async () => {
    const writers = new Map<string, Set<number>>();
    const loaded = await loadProfiles(context(writers), openProfileStore(home.configDir), undefined);
    const profiles = loaded.filter((entry): entry is DaemonProfile => !('error' in entry));
    expect(profiles.map((p) => p.name)).toEqual(names);

    for (const profile of profiles) await profile.storeAccessToken?.(tokens(profile.name), profile.grant);
    for (const profile of profiles) await profile.storeRefreshToken?.(`rt2-${profile.name}`);

    // One store wrote for all of them, not one store per profile kept alive by its closures.
    expect(writers.size).toBe(PROFILES);
    const stores = new Set([...writers.values()].flatMap((ids) => [...ids]));
    expect(stores.size).toBe(1);

    // Each profile's token and grant went to that profile, and its state was told of the new grant.
    const check = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
    const state = openProfileStore(home.configDir);
    for (const profile of profiles) {
      const stored = await check.get(profile.name);
      expect(stored.refresh_token).toBe(`rt2-${profile.name}`);
      expect(stored.access_token).toContain(`sl.at-${profile.name}`);
      expect((await state.read(profile.name))?.secretsVersion).toEqual(expect.any(String));
    }
  });
});

describe('profiles of one load kept in different stores (config.json names each one)', () => {
  test('each profile writes through the store of its own kind, one store per kind', async () => {
    const mixed = await storedProfilesHome(6);
    const inKeychain = mixed.names.filter((_, i) => i % 2 === 1);
    for (const name of mixed.names) await recordProfileChoices(mixed.home.configDir, name, { store: inKeychain.includes(name) ? 'keychain' : 'file' });
    // The keychain stands in memory here; the file store is the real one.
    const keychain = new Map<string, StoredSecrets>();
    for (const name of inKeychain) keychain.set(name, { app_key: `ak-${name}`, app_secret: `as-${name}`, refresh_token: `rt-${name}` });
    const opened: string[] = [];
    const ctx = fileStoreContext(mixed.home, (factory) => {
      const real = factory.secretStore;
      factory.secretStore = async (options) => {
        opened.push(options.kind);
        if (options.kind !== 'keychain') return real(options);
        return {
          kind: 'keychain',
          writable: true,
          get: async (profile) => ({ ...keychain.get(profile) }),
          set: async (profile, secrets) => void keychain.set(profile, { ...keychain.get(profile), ...secrets }),
          delete: async (profile) => void keychain.delete(profile),
          listProfiles: async () => [...keychain.keys()].sort(),
        };
      };
    }, { storeFromConfig: true });
    const loaded = await loadProfiles(ctx, openProfileStore(mixed.home.configDir), undefined);
    const profiles = loaded.filter((entry): entry is DaemonProfile => !('error' in entry));
    expect(profiles.map((p) => p.name)).toEqual(mixed.names);
    for (const profile of profiles) await profile.storeRefreshToken?.(`rt2-${profile.name}`);

    const file = openSecretStore({ kind: 'file', configDir: mixed.home.configDir, storeKey: mixed.home.storeKey, env: {} });
    for (const name of mixed.names) {
      const own = inKeychain.includes(name) ? keychain.get(name) : await file.get(name);
      expect({ name, refresh: own?.refresh_token }).toEqual({ name, refresh: `rt2-${name}` });
    }
    // The file store's copy of a keychain profile (written by the fixture) was not touched.
    for (const name of inKeychain) expect((await file.get(name)).refresh_token).toBe(`rt-${name}`);
    expect(new Set(opened)).toEqual(new Set(['file', 'keychain']));
  });
});
