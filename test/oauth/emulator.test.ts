// The whole OAuth flow against the emulator on an ephemeral loopback port: authorize URL, the browser's
// redirect (followed by hand) into the loopback server, code exchange, renewal, revoke.
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_APP, startEmulator } from '../../src/emulator/index.js';
import type { EmulatorOptions, RunningEmulator } from '../../src/emulator/index.js';
import {
  checkGrantedScopes,
  createAuthorizationRequest,
  exchangeCode,
  getCurrentAccount,
  listFolder,
  renewAccessToken,
  revokeToken,
  startLoopbackServer,
} from '../../src/oauth/index.js';
import type { AppCredentials, LoopbackServer } from '../../src/oauth/index.js';
import { freePort, failure } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

const APP: AppCredentials = { appKey: DEFAULT_APP.appKey, appSecret: DEFAULT_APP.appSecret };

async function setup(options: EmulatorOptions = {}) {
  const port = await freePort();
  const redirectUri = `http://127.0.0.1:${port}/callback`;
  const emu: RunningEmulator = await startEmulator({
    apps: [{ ...DEFAULT_APP, redirectUris: [redirectUri] }],
    ...options,
  });
  cleanups.push(() => emu.close());
  return { emu, redirectUri };
}

async function loopback(redirectUri: string, state: string): Promise<LoopbackServer> {
  const server = await startLoopbackServer({ redirectUri, state, timeoutMs: 10_000 });
  cleanups.push(() => server.close());
  return server;
}

/** What the browser does after Allow: follow Dropbox's redirect to the loopback server. */
async function followRedirect(response: Response): Promise<Response> {
  expect(response.status).toBe(302);
  const location = response.headers.get('location') ?? '';
  expect(location.startsWith('http://127.0.0.1:')).toBe(true);
  return fetch(location, { redirect: 'manual' });
}


describe('OAuth flow against the emulator', () => {
  it('authorizes, exchanges, renews and revokes; after revoke renewal is terminal', async () => {
    const { emu, redirectUri } = await setup({ autoApprove: true });
    const auth = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: APP.appKey, redirectUri });
    const server = await loopback(redirectUri, auth.state);

    const landing = await followRedirect(await fetch(auth.url, { redirect: 'manual' }));
    expect(landing.status).toBe(200);
    expect(await landing.text()).toContain('syncauth is authorized; you can close this tab');
    const { code } = await server.result;

    const tokens = await exchangeCode({
      tokenUrl: emu.tokenUrl,
      app: APP,
      code,
      redirectUri: auth.redirectUri,
      codeVerifier: auth.codeVerifier,
    });
    expect(tokens.accessToken.startsWith('sl.')).toBe(true);
    expect(tokens.warnings).toEqual([]);
    expect(tokens.refreshToken).toBeTruthy();
    expect(tokens.expiresIn).toBe(14400);
    expect(tokens.accountId).toBe(emu.state.account.accountId);
    expect(checkGrantedScopes(tokens.scopes, 'read').missing).toEqual([]);
    expect(checkGrantedScopes(tokens.scopes, 'read-write').missing).toEqual(['files.content.write']);

    const account = await getCurrentAccount({ apiUrl: emu.apiUrl, accessToken: tokens.accessToken });
    expect(account.accountId).toBe(emu.state.account.accountId);
    expect(account.email).toBe(emu.state.account.email);
    const listing = await listFolder({ apiUrl: emu.apiUrl, accessToken: tokens.accessToken, path: '/data' });
    expect(listing.entries.map((e) => e.name)).toEqual(expect.arrayContaining(['quarterly-report.pdf', 'customers.csv']));
    expect((await failure(listFolder({ apiUrl: emu.apiUrl, accessToken: tokens.accessToken, path: '/missing' }))).code).toBe(
      'OAUTH_PATH_NOT_FOUND',
    );

    // A code works once.
    const reuse = await failure(
      exchangeCode({ tokenUrl: emu.tokenUrl, app: APP, code, redirectUri: auth.redirectUri, codeVerifier: auth.codeVerifier }),
    );
    expect(reuse.code).toBe('OAUTH_INVALID_GRANT');

    const renewed = await renewAccessToken({ tokenUrl: emu.tokenUrl, app: APP, refreshToken: tokens.refreshToken });
    expect(renewed.accessToken).not.toBe(tokens.accessToken);
    expect(renewed.refreshToken).toBe(tokens.refreshToken);

    await revokeToken({ apiUrl: emu.apiUrl, accessToken: renewed.accessToken });
    const dead = await failure(renewAccessToken({ tokenUrl: emu.tokenUrl, app: APP, refreshToken: tokens.refreshToken }));
    expect(dead.code).toBe('OAUTH_INVALID_GRANT');
    expect(dead.kind).toBe('terminal');
    expect(dead.exitCode).toBe(4);
    expect(dead.hint).toContain('syncauth setup');
    const old = await failure(getCurrentAccount({ apiUrl: emu.apiUrl, accessToken: tokens.accessToken }));
    expect(old.code).toBe('OAUTH_INVALID_ACCESS_TOKEN');
  });

  it('rejects the flow when the user clicks Deny on the authorize page', async () => {
    const { emu, redirectUri } = await setup();
    const auth = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: APP.appKey, redirectUri });
    const server = await loopback(redirectUri, auth.state);

    const page = await (await fetch(auth.url)).text();
    expect(page).toContain('id="deny"');
    const nonce = /name="nonce" value="([^"]+)"/.exec(page)?.[1] ?? '';
    const decision = await fetch(new URL('/oauth2/authorize', emu.url), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ nonce, decision: 'deny' }).toString(),
      redirect: 'manual',
    });
    const landing = await followRedirect(decision);
    expect(landing.status).toBe(403);
    expect(await landing.text()).toContain('you clicked Deny');
    const err = await failure(server.result);
    expect(err.code).toBe('OAUTH_ACCESS_DENIED');
  });

  it('exchanges a pasted code in paste mode (no redirect URI anywhere)', async () => {
    const { emu } = await setup({ autoApprove: true });
    const auth = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: APP.appKey });
    const page = await (await fetch(auth.url)).text();
    const code = /<code id="code">([^<]+)<\/code>/.exec(page)?.[1] ?? '';
    expect(code).not.toBe('');
    const tokens = await exchangeCode({ tokenUrl: emu.tokenUrl, app: APP, code: ` ${code} `, codeVerifier: auth.codeVerifier });
    expect(tokens.refreshToken).toBeTruthy();
  });

  it('classifies the emulator’s refusals: wrong secret, expired access token, rate limit, server error', async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const { emu, redirectUri } = await setup({ autoApprove: true, tokenLifetimeSeconds: 60, now: () => now });
    const auth = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: APP.appKey, redirectUri });
    const server = await loopback(redirectUri, auth.state);
    await followRedirect(await fetch(auth.url, { redirect: 'manual' }));
    const { code } = await server.result;

    const wrongSecret = await failure(
      exchangeCode({ tokenUrl: emu.tokenUrl, app: { ...APP, appSecret: 'not-the-secret' }, code, redirectUri, codeVerifier: auth.codeVerifier }),
    );
    expect(wrongSecret.code).toBe('OAUTH_INVALID_CLIENT');
    expect(wrongSecret.error).toBe('invalid_client');

    const tokens = await exchangeCode({ tokenUrl: emu.tokenUrl, app: APP, code, redirectUri, codeVerifier: auth.codeVerifier, now: () => now });
    expect(tokens.expiresAt).toBe(now + 60_000);
    now += 61_000;
    const expired = await failure(getCurrentAccount({ apiUrl: emu.apiUrl, accessToken: tokens.accessToken }));
    expect(expired.code).toBe('OAUTH_EXPIRED_ACCESS_TOKEN');

    emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 2, times: 1 }]);
    const limited = await failure(renewAccessToken({ tokenUrl: emu.tokenUrl, app: APP, refreshToken: tokens.refreshToken }));
    expect(limited.code).toBe('OAUTH_RATE_LIMITED');
    expect(limited.retryAfterMs).toBe(2000);

    emu.setFaults([{ route: 'token', status: 503, times: 1 }]);
    const down = await failure(renewAccessToken({ tokenUrl: emu.tokenUrl, app: APP, refreshToken: tokens.refreshToken }));
    expect(down.code).toBe('OAUTH_SERVER_ERROR');
    expect(down.kind).toBe('transient');

    const fresh = await renewAccessToken({ tokenUrl: emu.tokenUrl, app: APP, refreshToken: tokens.refreshToken });
    expect((await getCurrentAccount({ apiUrl: emu.apiUrl, accessToken: fresh.accessToken })).accountId).toBeTruthy();
  });
});
