// `syncauth token` and `refresh` with the access token kept in the profile's secret store, in-process against
// the emulator: a fresh kept token is printed without a token request, one inside the margin or expired is
// renewed, `--force` renews, the read-only env store renews every time, and the kept token never reaches the
// plaintext state.
import { createFactory } from '../../src/cli/factory.js';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { token } from '../../src/cli/commands/token.js';
import { RECENT_RENEWAL_MS, sessionAccessToken } from '../../src/cli/commands/shared.js';
import type { CommandContext } from '../../src/cli/context.js';
import { openSession, readSecrets, requireGrant } from '../../src/cli/session.js';
import { resolveSettings, type SettingInputs } from '../../src/config.js';
import { openSecretStore } from '../../src/credentials/index.js';
import { connectionSettings } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { decodeAccessToken, encodeAccessToken } from '../../src/sync/token-cache.js';
import { grantRefreshToken, newHome, renewAtEmulator, startOnboarding, type Home, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;

// 1200 s tokens: more than the default 900 s margin, less than a margin of 1200 s.
beforeAll(async () => {
  ob = await startOnboarding({ emulator: { tokenLifetimeSeconds: 1200 } });
});
afterAll(async () => ob.emulator.close());

interface Profile {
  home: Home;
  name: string;
  refreshToken: string;
  env: Record<string, string>;
}

/** A profile as setup leaves it, with the file store: the secrets stored, the endpoints in the state. */
async function profile(name: string): Promise<Profile> {
  const home = newHome();
  const refreshToken = await grantRefreshToken(ob);
  const { SYNCAUTH_TOKEN_URL } = connectionSettings(ob.emulator);
  await openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} }).set(name, {
    app_key: ob.app.appKey, app_secret: ob.app.appSecret, refresh_token: refreshToken, api_key: ob.apiKey,
  });
  await openProfileStore(home.configDir).update(name, () => ({ tokenUrl: SYNCAUTH_TOKEN_URL, remoteUrl: 'dropbox://data' }));
  return { home, name, refreshToken, env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey } };
}

function contextOf(p: Profile, env: Record<string, string> = {}): CommandContext & { out: () => string } {
  const inputs: SettingInputs = { flags: { profile: p.name }, env: { ...p.env, ...env }, dotenv: {} };
  const stdout = new PassThrough();
  let out = '';
  stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const io = { stdout, stderr: new PassThrough() };
  return { settings: resolveSettings(inputs), inputs, json: false, io, stdin: new PassThrough(), factory: createFactory({ env: () => ({ ...inputs.env }), io }), out: () => out };
}

async function printed(p: Profile, options: { force?: boolean } = {}, env: Record<string, string> = {}): Promise<string> {
  const context = contextOf(p, env);
  await token(context, options);
  await new Promise((resolve) => setImmediate(resolve));
  expect(context.out()).toMatch(/^sl\.u\.\S+\n$/);
  return context.out().trimEnd();
}

/** Token requests that renewed this grant, counted from the emulator's own log of issued tokens. */
function renewalsOf(p: Profile): number {
  const grant = [...ob.emulator.state.grants.values()].find((g) => g.refreshToken === p.refreshToken);
  return [...ob.emulator.state.accessTokens.values()].filter((t) => t.grantId === grant?.id).length - 1;
}

async function keptToken(p: Profile): Promise<string | undefined> {
  const stored = await openSecretStore({ kind: 'file', configDir: p.home.configDir, storeKey: p.home.storeKey, env: {} }).get(p.name);
  return decodeAccessToken(stored.access_token, { appKey: ob.app.appKey, refreshToken: p.refreshToken })?.accessToken;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((f) => path.join(dir, f)).filter((f) => statSync(f).isFile());
}

describe.concurrent('syncauth token with a kept access token', () => {
  it('prints the kept token while it has more than the margin left, with no token request', async () => {
    const p = await profile('hit');
    const first = await printed(p);
    expect(renewalsOf(p)).toBe(1);
    expect(await keptToken(p)).toBe(first);
    expect(await printed(p)).toBe(first);
    expect(await printed(p)).toBe(first);
    expect(renewalsOf(p)).toBe(1);
  });

  it('renews a kept token inside the margin, and one that has expired', async () => {
    const p = await profile('margin');
    const first = await printed(p);
    // 1200 s tokens are inside a 1200 s margin from the start.
    const second = await printed(p, {}, { SYNCAUTH_RENEW_MARGIN: '1200' });
    expect(second).not.toBe(first);
    expect(renewalsOf(p)).toBe(2);
    expect(await keptToken(p)).toBe(second);

    const store = openSecretStore({ kind: 'file', configDir: p.home.configDir, storeKey: p.home.storeKey, env: {} });
    const grant = { appKey: ob.app.appKey, refreshToken: p.refreshToken };
    await store.set(p.name, { access_token: encodeAccessToken({ accessToken: second, expiresAt: Date.now() - 1_000, renewedAt: Date.now() - 1_201_000 }, grant) });
    const third = await printed(p);
    expect(third).not.toBe(second);
    expect(renewalsOf(p)).toBe(3);
  });

  it('--force renews even when the kept token is fresh, and keeps the new one', async () => {
    const p = await profile('force');
    const first = await printed(p);
    const forced = await printed(p, { force: true });
    expect(forced).not.toBe(first);
    expect(renewalsOf(p)).toBe(2);
    expect(await keptToken(p)).toBe(forced);
    expect(await printed(p)).toBe(forced);
    expect(renewalsOf(p)).toBe(2);
  });

  it('ignores a kept token of another grant (setup stored a new one)', async () => {
    const p = await profile('regrant');
    const old = await printed(p);
    const refreshToken = await grantRefreshToken(ob);
    await openSecretStore({ kind: 'file', configDir: p.home.configDir, storeKey: p.home.storeKey, env: {} }).set(p.name, { refresh_token: refreshToken });
    const fresh = await printed(p);
    expect(fresh).not.toBe(old);
    const issued = ob.emulator.state.accessTokens.get(fresh);
    expect([...ob.emulator.state.grants.values()].find((g) => g.id === issued?.grantId)?.refreshToken).toBe(refreshToken);
  });

  it('with the read-only env store keeps nothing and renews every time', async () => {
    const p = await profile('env');
    const env = { SYNCAUTH_STORE: 'env', SYNCAUTH_APP_KEY: ob.app.appKey, SYNCAUTH_APP_SECRET: ob.app.appSecret, SYNCAUTH_REFRESH_TOKEN: p.refreshToken };
    const first = await printed(p, {}, env);
    const second = await printed(p, {}, env);
    expect(second).not.toBe(first);
    expect(renewalsOf(p)).toBe(2);
    // The file store the profile was made with is not written to either.
    expect(await keptToken(p)).toBeUndefined();
  });

  it('canary: the kept token appears in no file in the clear, the state file included', async () => {
    const p = await profile('canary');
    const kept = await printed(p);
    const forced = await printed(p, { force: true });
    const files = filesUnder(p.home.configDir);
    expect(files.map((f) => path.relative(p.home.configDir, f)).sort()).toEqual(['profiles/canary.json', 'profiles/canary.renewed', 'secrets.enc', 'secrets/canary.enc', 'secrets/canary.token']);
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const secret of [kept, forced, p.refreshToken, ob.app.appSecret]) expect(text, file).not.toContain(secret);
    }
    // The state file keeps nothing of the token; the renewal record the expiry, which a read of the state shows.
    const store = openProfileStore(p.home.configDir);
    const state = JSON.parse(readFileSync(store.fileOf(p.name), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(state)).not.toContain('access_token');
    expect((await store.read(p.name))?.accessTokenExpiresAt).toEqual(expect.any(String));
  });
});

describe.concurrent('refresh reuses only a renewal that finished while it waited for the lock', () => {
  async function sessionToken(p: Profile, now: () => number = Date.now) {
    const session = await openSession(contextOf(p));
    return sessionAccessToken(session, requireGrant(session, await readSecrets(session)), 'recent', now);
  }

  it('renews although `token` kept a token a moment before it was asked', async () => {
    const p = await profile('recent-before');
    const kept = await printed(p);
    expect(renewalsOf(p)).toBe(1);
    const renewed = await sessionToken(p);
    expect(renewed.accessToken).not.toBe(kept);
    expect(renewalsOf(p)).toBe(2);
    expect(await keptToken(p)).toBe(renewed.accessToken);
  });

  it(`takes a renewal that finished while it waited, unless that was over ${RECENT_RENEWAL_MS / 1000} s ago`, async () => {
    for (const late of [false, true]) {
      const p = await profile(late ? 'recent-late' : 'recent-waited');
      await printed(p);
      let began!: () => void;
      const waiting = new Promise<void>((resolve) => (began = resolve));
      let shift = 0;
      // The first reading of the clock is when it begins to wait for the lock.
      const now = (): number => {
        began();
        return Date.now() + shift;
      };
      let result: ReturnType<typeof sessionToken> | undefined;
      let renewedMeanwhile = '';
      // Another process holds the profile's lock, renews and keeps its token while this one waits.
      await openProfileStore(p.home.configDir).withLock(p.name, async () => {
        result = sessionToken(p, now);
        result.catch(() => undefined);
        await waiting;
        const renewal = await renewAtEmulator(ob, p.refreshToken);
        renewedMeanwhile = renewal.body.access_token as string;
        const kept = { accessToken: renewedMeanwhile, expiresAt: Date.now() + (renewal.body.expires_in as number) * 1000, renewedAt: Date.now() };
        await openSecretStore({ kind: 'file', configDir: p.home.configDir, storeKey: p.home.storeKey, env: {} }).set(p.name, {
          access_token: encodeAccessToken(kept, { appKey: ob.app.appKey, refreshToken: p.refreshToken }),
        });
        if (late) shift = RECENT_RENEWAL_MS + 1_000;
      });
      const got = await (result as ReturnType<typeof sessionToken>);
      expect(renewalsOf(p)).toBe(late ? 3 : 2);
      if (late) expect(got.accessToken).not.toBe(renewedMeanwhile);
      else expect(got.accessToken).toBe(renewedMeanwhile);
    }
  });
});
