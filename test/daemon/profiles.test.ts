// The daemon's profiles as the command serves them (src/daemon/profiles.ts), loaded with what the command
// hands over (its settings, how it opens a session), and a profile the daemon is given with a GrantStore alone.
import { afterEach, describe, expect, it } from 'vitest';
import { resolveSettings } from '../../src/config.js';
import { startDaemon, type DaemonProfile, type GrantStore, type RunningDaemon } from '../../src/daemon/index.js';
import { handOver, loadDaemonProfiles, PROFILES_LOADED_AT_ONCE } from '../../src/daemon/profiles.js';
import { openProfileStore } from '../../src/profile/index.js';
import type { ProfileSession } from '../../src/sync/profile-session.js';
import { loadProfiles } from '../../src/cli/commands/daemon.js';
import { captureLog, emulator, obtainGrant, profileOf, tempDir } from './helpers.js';
import { fileStoreContext, storedProfilesHome } from './stored-profiles-home.js';

const running: RunningDaemon[] = [];
afterEach(async () => {
  for (const daemon of running.splice(0)) await daemon.close();
});

const SIX = ['readGrant', 'storeGrant', 'recordAccount', 'storeRefreshToken', 'storeAccessToken', 'readAccessToken'] as const;

const ENV_GRANT = { SYNCAUTH_APP_KEY: 'profiles-app-key', SYNCAUTH_APP_SECRET: 'profiles-app-secret', SYNCAUTH_REFRESH_TOKEN: 'profiles-refresh-token' };

describe('loading the daemon\'s profiles', () => {
  it('the environment\'s grant serves a name stored nowhere, read-only but for the account; a stored one that cannot open is an entry with its error', async () => {
    const configDir = tempDir();
    const store = openProfileStore(configDir);
    await store.update('stored', () => ({ tokenUrl: 'http://127.0.0.1:1/oauth2/token' }));
    const values = resolveSettings({
      flags: {},
      env: { ...ENV_GRANT, SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_BASE_URL: 'http://127.0.0.1:2', SYNCAUTH_API_KEY: 'profiles-api-key', SYNCAUTH_REMOTE_URL: 'dropbox://data' },
      dotenv: {},
    }).values;
    const opened: string[] = [];
    const open = async (name: string): Promise<{ session: ProfileSession; secrets: never }> => {
      opened.push(name);
      throw new Error(`profile "${name}" cannot be opened here`);
    };
    const loaded = await loadDaemonProfiles({ values, store, open }, ['a', 'stored', 'b']);
    expect(loaded.map((entry) => entry.name)).toEqual(['a', 'stored', 'b']);
    expect(opened).toEqual(['stored']);
    expect((loaded[1] as { error: Error }).error.message).toMatch(/cannot be opened/);
    const [a, , b] = loaded as DaemonProfile[];
    for (const profile of [a, b] as DaemonProfile[]) {
      expect(profile.grant).toEqual({ appKey: ENV_GRANT.SYNCAUTH_APP_KEY, appSecret: ENV_GRANT.SYNCAUTH_APP_SECRET, refreshToken: ENV_GRANT.SYNCAUTH_REFRESH_TOKEN });
      expect({ writable: profile.grants?.writable, rereads: profile.grants?.rereads, recordsAccount: profile.grants?.recordsAccount }).toEqual({ writable: false, rereads: false, recordsAccount: true });
      // What the public profile offered before the store: the account recorder alone.
      expect(SIX.filter((key) => profile[key] !== undefined)).toEqual(['recordAccount']);
      expect(profile.reconcile).toMatchObject({ baseUrl: 'http://127.0.0.1:2', apiKey: 'profiles-api-key', remoteUrl: 'dropbox://data' });
    }
    // The settings the environment's profiles share are resolved once for the load.
    expect(a?.reconcile).toBe(b?.reconcile);
  });

  it('no profile stored or requested: the environment\'s one, under the profile name of the settings; with no grant there, none', async () => {
    const configDir = tempDir();
    const store = openProfileStore(configDir);
    const open = async (): Promise<never> => {
      throw new Error('not opened');
    };
    const withGrant = resolveSettings({ flags: {}, env: { ...ENV_GRANT, SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_PROFILE: 'container' }, dotenv: {} }).values;
    expect((await loadDaemonProfiles({ values: withGrant, store, open }, undefined)).map((entry) => entry.name)).toEqual(['container']);
    const without = resolveSettings({ flags: {}, env: { SYNCAUTH_CONFIG_DIR: configDir }, dotenv: {} }).values;
    expect(await loadDaemonProfiles({ values: without, store, open }, undefined)).toEqual([]);
    expect(PROFILES_LOADED_AT_ONCE).toBe(16);
  });

  it('a stored profile is served with its GrantStore, and the six functions of the public profile reach it', async () => {
    const { home, names } = await storedProfilesHome(2);
    const loaded = (await loadProfiles(fileStoreContext(home), openProfileStore(home.configDir), undefined)) as DaemonProfile[];
    expect(loaded.map((profile) => profile.name)).toEqual(names);
    const [first] = loaded as [DaemonProfile];
    expect({ writable: first.grants?.writable, rereads: first.grants?.rereads, recordsAccount: first.grants?.recordsAccount }).toEqual({ writable: true, rereads: true, recordsAccount: true });
    expect(SIX.filter((key) => first[key] !== undefined)).toEqual([...SIX]);
    await first.storeRefreshToken?.('profiles-rotated-refresh-token');
    expect((await first.grants?.readGrant())?.refreshToken).toBe('profiles-rotated-refresh-token');
    expect(await first.readGrant?.()).toEqual(await first.grants?.readGrant());
    // Nothing of the profile's own but its fields: the functions are the class's.
    expect(Object.keys(first).sort()).toEqual(['dropboxApiUrl', 'grant', 'grants', 'name', 'reconcile', 'tokenUrl']);
  });

  it('handOver answers the first load once, then loads anew', async () => {
    let loads = 0;
    const first = [{ name: 'first', error: new Error('x') }];
    const loader = handOver(first, async () => [{ name: `load-${++loads}`, error: new Error('y') }]);
    expect(await loader()).toBe(first);
    expect((await loader())[0]?.name).toBe('load-1');
    expect((await loader())[0]?.name).toBe('load-2');
  });
});

describe('a profile given with a GrantStore alone', () => {
  it('renews through the store: the access token kept there, the account recorded there, nothing of the grant written', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const calls: string[] = [];
    const grants: GrantStore = {
      writable: true,
      rereads: true,
      recordsAccount: true,
      readGrant: async () => (calls.push('readGrant'), grant),
      keepRefreshToken: async () => void calls.push('keepRefreshToken'),
      storeGrant: async () => void calls.push('storeGrant'),
      keepAccessToken: async (tokens) => void calls.push(`keepAccessToken:${tokens.accessToken === '' ? 'empty' : 'token'}`),
      readAccessToken: async () => (calls.push('readAccessToken'), undefined),
      recordAccount: async () => void calls.push('recordAccount'),
    };
    const daemon = await startDaemon({
      profiles: [{ ...profileOf(emu, { name: 'port', grant }), dropboxApiUrl: emu.apiUrl, grants }],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 5_000,
      schedule: false,
      tokenFile: `${tempDir()}/{profile}.token`,
      logger: captureLog('info').logger,
    });
    running.push(daemon);
    const report = await daemon.sweep();
    expect(report.profiles[0]?.renewal).toBe('renewed');
    expect(calls).toContain('keepAccessToken:token');
    await expect.poll(() => calls.includes('recordAccount')).toBe(true);
    expect(calls).not.toContain('keepRefreshToken');
    expect(calls).not.toContain('storeGrant');
  });
});
