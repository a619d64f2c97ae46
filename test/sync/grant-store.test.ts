// Where a profile's grant is kept, as the daemon uses it (src/sync/grant-store.ts): the stored profile's store
// writes the secret store and the state as setup left them, the environment's refuses every write but the
// account, and a caller's six functions are answered through the same port.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import type { TokenSet } from '../../src/oauth/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import {
  environmentGrants,
  grantStoreFromFunctions,
  GrantStoreReadOnlyError,
  isGrantStoreReadOnly,
  storedGrants,
} from '../../src/sync/grant-store.js';
import { decodeAccessToken } from '../../src/sync/token-cache.js';
import { tempDir } from '../helpers/cli.js';

const STORE_KEY = 'grant store test key, long enough to pass';
const GRANT = { appKey: 'gs-app-key-1234', appSecret: 'gs-app-secret-5678', refreshToken: 'gs-refresh-token-abcdefgh' };

function tokens(accessToken: string, refreshToken = GRANT.refreshToken): TokenSet {
  return { accessToken, refreshToken, expiresAt: Date.now() + 3_600_000, expiresIn: 3600, scopes: [], tokenType: 'bearer', warnings: [] };
}

/** A config dir holding profile `docs` as setup leaves it: its grant in the encrypted file store, its state written. */
async function storedHome(): Promise<{ configDir: string; secrets: ReturnType<typeof openSecretStore>; profiles: ReturnType<typeof openProfileStore> }> {
  const configDir = path.join(tempDir('syncauth-grant-store-'), 'config');
  const secrets = openSecretStore({ kind: 'file', configDir, storeKey: STORE_KEY, env: {} });
  const profiles = openProfileStore(configDir);
  await secrets.set('docs', { app_key: GRANT.appKey, app_secret: GRANT.appSecret, refresh_token: GRANT.refreshToken });
  await profiles.update('docs', () => ({ tokenUrl: 'http://127.0.0.1:1/oauth2/token', secretsVersion: 'v-setup', accessTokenExpiresAt: new Date(Date.now() + 60_000).toISOString() }));
  return { configDir, secrets, profiles };
}

describe('the stored profile\'s grant store', () => {
  it('reads the grant anew, keeps a rotated refresh token and tells other processes by a new secrets version', async () => {
    const { secrets, profiles } = await storedHome();
    const reread: string[] = [];
    const store = storedGrants('docs', secrets, profiles, async (name) => {
      reread.push(name);
      const kept = await secrets.get(name);
      return { appKey: kept.app_key as string, appSecret: kept.app_secret as string, refreshToken: kept.refresh_token as string };
    });
    expect({ writable: store.writable, rereads: store.rereads, recordsAccount: store.recordsAccount }).toEqual({ writable: true, rereads: true, recordsAccount: true });
    expect(await store.readGrant()).toEqual(GRANT);
    expect(reread).toEqual(['docs']);

    await store.keepRefreshToken('gs-rotated-refresh-token');
    expect((await secrets.get('docs')).refresh_token).toBe('gs-rotated-refresh-token');
    expect((await secrets.get('docs')).app_secret).toBe(GRANT.appSecret);
    const state = await profiles.read('docs');
    expect(state?.secretsVersion).toEqual(expect.any(String));
    expect(state?.secretsVersion).not.toBe('v-setup');
    expect(state?.tokenUrl).toBe('http://127.0.0.1:1/oauth2/token');
  });

  it('keeps the access token of the grant it belongs to, and reads it back for that grant only', async () => {
    const { secrets, profiles } = await storedHome();
    const store = storedGrants('docs', secrets, profiles, async () => GRANT);
    expect(await store.readAccessToken(GRANT)).toBeUndefined();
    await store.keepAccessToken(tokens('sl.gs-access-token-1'), GRANT);
    expect((await store.readAccessToken(GRANT))?.accessToken).toBe('sl.gs-access-token-1');
    expect(decodeAccessToken((await secrets.get('docs')).access_token, GRANT)?.accessToken).toBe('sl.gs-access-token-1');
    // Another grant's reader finds none: a token is never handed out for a grant it did not come from.
    expect(await store.readAccessToken({ ...GRANT, refreshToken: 'gs-another-refresh-token' })).toBeUndefined();
  });

  it('stores a new grant whole, with its account: the kept access token cleared, the old grant\'s trouble and expiry forgotten', async () => {
    const { secrets, profiles } = await storedHome();
    const store = storedGrants('docs', secrets, profiles, async () => GRANT);
    await store.keepAccessToken(tokens('sl.gs-access-token-old'), GRANT);
    await profiles.update('docs', (current) => ({ ...current, needsReauthorization: true, lastError: { code: 'OAUTH_INVALID_GRANT', message: 'revoked', at: new Date().toISOString(), terminal: true } }));
    const fresh = { appKey: 'gs-app-key-new1', appSecret: 'gs-app-secret-new', refreshToken: 'gs-refresh-token-new-1234' };

    await store.storeGrant(fresh, 'dbid:gs-account');

    const kept = await secrets.get('docs');
    expect({ app_key: kept.app_key, app_secret: kept.app_secret, refresh_token: kept.refresh_token }).toEqual({ app_key: fresh.appKey, app_secret: fresh.appSecret, refresh_token: fresh.refreshToken });
    expect(await store.readAccessToken(GRANT)).toBeUndefined();
    expect(await store.readAccessToken(fresh)).toBeUndefined();
    const state = await profiles.read('docs');
    expect(state?.secretsVersion).not.toBe('v-setup');
    expect(state?.needsReauthorization).toBe(false);
    expect(state?.lastError).toBeUndefined();
    expect(state?.accessTokenExpiresAt).toBeUndefined();
    expect(state?.accountId).toBe('dbid:gs-account');
  });

  it('records the account only when none is recorded', async () => {
    const { secrets, profiles } = await storedHome();
    const store = storedGrants('docs', secrets, profiles, async () => GRANT);
    await store.recordAccount('dbid:first');
    await store.recordAccount('dbid:second');
    expect((await profiles.read('docs'))?.accountId).toBe('dbid:first');
  });

  it('over a read-only secret store (the env store): says so, refuses the grant\'s writes, keeps and finds no access token', async () => {
    const { profiles } = await storedHome();
    const env = openSecretStore({ kind: 'env', configDir: '/nonexistent', env: { SYNCAUTH_APP_KEY: GRANT.appKey, SYNCAUTH_APP_SECRET: GRANT.appSecret, SYNCAUTH_REFRESH_TOKEN: GRANT.refreshToken } });
    const store = storedGrants('docs', env, profiles, async () => GRANT);
    expect(store.writable).toBe(false);
    await expect(store.keepRefreshToken('gs-rotated-refresh-token')).rejects.toBeInstanceOf(GrantStoreReadOnlyError);
    await expect(store.storeGrant(GRANT, undefined)).rejects.toSatisfy(isGrantStoreReadOnly);
    await store.keepAccessToken(tokens('sl.gs-access-token-env'), GRANT);
    expect(await store.readAccessToken(GRANT)).toBeUndefined();
    expect((await profiles.read('docs'))?.secretsVersion).toBe('v-setup');
  });
});

describe('the environment\'s grant store', () => {
  it('gives the environment\'s grant, refuses every write of it by name, and records the account in the state', async () => {
    const { profiles } = await storedHome();
    const store = environmentGrants('docs', GRANT, profiles);
    expect({ writable: store.writable, rereads: store.rereads, recordsAccount: store.recordsAccount }).toEqual({ writable: false, rereads: false, recordsAccount: true });
    expect(await store.readGrant()).toEqual(GRANT);
    const refused = await store.keepRefreshToken('gs-rotated-refresh-token').then(() => undefined, (error: unknown) => error);
    expect(isGrantStoreReadOnly(refused)).toBe(true);
    expect((refused as Error).message).toMatch(/profile "docs" is read-only here: a rotated refresh token cannot be kept/);
    await expect(store.storeGrant(GRANT, 'dbid:x')).rejects.toThrow(/profile "docs" is read-only here: a new grant cannot be kept/);
    await store.keepAccessToken(tokens('sl.gs-access-token-env'), GRANT);
    expect(await store.readAccessToken(GRANT)).toBeUndefined();
    await store.recordAccount('dbid:env-account');
    const state = await profiles.read('docs');
    expect(state?.accountId).toBe('dbid:env-account');
    expect(state?.secretsVersion).toBe('v-setup');
  });
});

describe('a store answered by a profile\'s six functions', () => {
  it('calls each function given, with what the daemon passes', async () => {
    const calls: unknown[][] = [];
    const kept = { accessToken: 'sl.gs-kept', expiresAt: 2, renewedAt: 1 };
    const store = grantStoreFromFunctions({
      name: 'lib',
      grant: GRANT,
      readGrant: async () => ({ ...GRANT, refreshToken: 'gs-reread-refresh-token' }),
      storeGrant: async (grant, accountId) => void calls.push(['storeGrant', grant, accountId]),
      recordAccount: async (accountId) => void calls.push(['recordAccount', accountId]),
      storeRefreshToken: async (token) => void calls.push(['storeRefreshToken', token]),
      storeAccessToken: async (set, grant) => void calls.push(['storeAccessToken', set.accessToken, grant]),
      readAccessToken: async (grant) => (calls.push(['readAccessToken', grant]), kept),
    });
    expect({ writable: store.writable, rereads: store.rereads, recordsAccount: store.recordsAccount }).toEqual({ writable: true, rereads: true, recordsAccount: true });
    expect((await store.readGrant()).refreshToken).toBe('gs-reread-refresh-token');
    await store.keepRefreshToken('gs-rotated');
    await store.storeGrant(GRANT, 'dbid:lib');
    await store.keepAccessToken(tokens('sl.gs-new'), GRANT);
    expect(await store.readAccessToken(GRANT)).toBe(kept);
    await store.recordAccount('dbid:lib');
    expect(calls).toEqual([
      ['storeRefreshToken', 'gs-rotated'],
      ['storeGrant', GRANT, 'dbid:lib'],
      ['storeAccessToken', 'sl.gs-new', GRANT],
      ['readAccessToken', GRANT],
      ['recordAccount', 'dbid:lib'],
    ]);
  });

  it('none given: a read-only store of the profile\'s grant, which refuses the grant\'s writes and keeps nothing', async () => {
    const store = grantStoreFromFunctions({ name: 'lib', grant: GRANT });
    expect({ writable: store.writable, rereads: store.rereads, recordsAccount: store.recordsAccount }).toEqual({ writable: false, rereads: false, recordsAccount: false });
    expect(await store.readGrant()).toEqual(GRANT);
    await expect(store.keepRefreshToken('gs-rotated')).rejects.toSatisfy(isGrantStoreReadOnly);
    await expect(store.storeGrant(GRANT, undefined)).rejects.toSatisfy(isGrantStoreReadOnly);
    await store.keepAccessToken(tokens('sl.gs-new'), GRANT);
    expect(await store.readAccessToken(GRANT)).toBeUndefined();
    await store.recordAccount('dbid:lib');
  });

  it('a rotated refresh token kept though no new grant may be stored: each function stands alone', async () => {
    const rotated: string[] = [];
    const store = grantStoreFromFunctions({ name: 'lib', grant: GRANT, storeRefreshToken: async (token) => void rotated.push(token) });
    expect(store.writable).toBe(false);
    await store.keepRefreshToken('gs-rotated');
    expect(rotated).toEqual(['gs-rotated']);
    await expect(store.storeGrant(GRANT, undefined)).rejects.toSatisfy(isGrantStoreReadOnly);
  });
});
