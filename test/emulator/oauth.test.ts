import { describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import type { EmulatorApp } from '../../src/emulator/index.js';
import {
  REDIRECT,
  approvedCode,
  authorizeUrl,
  basicAuth,
  emulator,
  manualClock,
  obtainTokens,
  pkcePair,
  postToken,
  rpc,
} from './helpers.js';

const INVALID_CLIENT = { error: 'invalid_client: Invalid client_id or client_secret' };
const NO_AUTH_FUNCTION = { error_description: 'No auth function available for given request', error: 'invalid_request' };
const BAD_CODE = { error: 'invalid_grant', error_description: "code doesn't exist or has expired" };
const REVOKED = { error: 'invalid_grant', error_description: 'refresh token is invalid or revoked' };

function nonceOf(html: string): string {
  const m = /name="nonce" value="([^"]+)"/.exec(html);
  expect(m, 'the page carries a nonce').not.toBeNull();
  return m?.[1] ?? '';
}

async function decide(emuUrl: string, nonce: string, decision: string): Promise<Response> {
  return fetch(`${emuUrl}/oauth2/authorize`, {
    method: 'POST',
    body: new URLSearchParams({ nonce, decision }),
    redirect: 'manual',
  });
}

describe('authorize page', () => {
  it('shows the app, its folder, the requested scopes and Allow/Deny buttons', async () => {
    const emu = await emulator();
    const res = await fetch(authorizeUrl(emu));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain(DEFAULT_APP.name);
    expect(html).toContain(`Apps/${DEFAULT_APP.folderName}`);
    for (const scope of DEFAULT_APP.scopes) expect(html).toContain(`data-scope="${scope}"`);
    expect(html).toMatch(/<button id="allow"[^>]*>Allow<\/button>/);
    expect(html).toMatch(/<button id="deny"[^>]*>Deny<\/button>/);
    expect(html).toMatch(/<form method="post" action="\/oauth2\/authorize">/);
    nonceOf(html);
    // The Allow button must not be clickjackable.
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  });

  it('lists only the requested subset of scopes', async () => {
    const emu = await emulator();
    const html = await (await fetch(authorizeUrl(emu, { scope: 'files.metadata.read' }))).text();
    expect(html).toContain('data-scope="files.metadata.read"');
    expect(html).not.toContain('data-scope="account_info.read"');
  });

  it('escapes what it shows', async () => {
    const app: EmulatorApp = { ...DEFAULT_APP, name: '<script>alert(1)</script>', redirectUris: [REDIRECT], scopes: ['files.metadata.read'] };
    const emu = await emulator({ apps: [app] });
    const html = await (await fetch(authorizeUrl(emu))).text();
    expect(html).not.toContain('<script>alert(1)</script>');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
  });

  it('Allow redirects with the code and the state', async () => {
    const emu = await emulator();
    const nonce = nonceOf(await (await fetch(authorizeUrl(emu, { state: 'csrf token/+=' }))).text());
    const res = await decide(emu.url, nonce, 'allow');
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get('location') ?? '');
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
    expect(location.searchParams.get('state')).toBe('csrf token/+=');
    const code = location.searchParams.get('code') ?? '';
    expect(emu.state.codes.get(code)?.redirectUri).toBe(REDIRECT);
  });

  it('Deny redirects with access_denied and the state, and issues no code', async () => {
    const emu = await emulator();
    const nonce = nonceOf(await (await fetch(authorizeUrl(emu))).text());
    const res = await decide(emu.url, nonce, 'deny');
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get('location') ?? '');
    expect(location.searchParams.get('error')).toBe('access_denied');
    expect(location.searchParams.get('error_description')).toMatch(/chose not to give/);
    expect(location.searchParams.get('state')).toBe('state-123');
    expect(location.searchParams.has('code')).toBe(false);
    expect(emu.state.codes.size).toBe(0);
  });

  it('ties the decision to the page: a nonce works once, and an unknown one is refused', async () => {
    const emu = await emulator();
    const nonce = nonceOf(await (await fetch(authorizeUrl(emu))).text());
    expect((await decide(emu.url, nonce, 'allow')).status).toBe(302);
    const again = await decide(emu.url, nonce, 'allow');
    expect(again.status).toBe(400);
    expect(await again.text()).toMatch(/expired or was already answered/);
    expect((await decide(emu.url, 'made-up', 'allow')).status).toBe(400);
    expect(emu.state.codes.size).toBe(1);
  });

  it('refuses a decision that is neither allow nor deny, keeping the request answerable', async () => {
    const emu = await emulator();
    const nonce = nonceOf(await (await fetch(authorizeUrl(emu))).text());
    expect((await decide(emu.url, nonce, 'maybe')).status).toBe(400);
    expect((await decide(emu.url, nonce, 'allow')).status).toBe(302);
  });

  it('without redirect_uri shows the code to copy, or a denial page', async () => {
    const emu = await emulator();
    const page = await (await fetch(authorizeUrl(emu, { redirect_uri: null, state: null }))).text();
    const allowed = await decide(emu.url, nonceOf(page), 'allow');
    expect(allowed.status).toBe(200);
    const html = await allowed.text();
    expect(html).toContain('Access code generated');
    const code = /<code id="code">([^<]+)<\/code>/.exec(html)?.[1] ?? '';
    expect(emu.state.codes.get(code)?.redirectUri).toBeNull();

    const page2 = await (await fetch(authorizeUrl(emu, { redirect_uri: null }))).text();
    const denied = await decide(emu.url, nonceOf(page2), 'deny');
    expect(denied.status).toBe(200);
    expect(await denied.text()).toContain('id="denied"');
  });

  it('autoApprove redirects at once, or shows the code when there is no redirect_uri', async () => {
    const emu = await emulator({ autoApprove: true });
    const res = await fetch(authorizeUrl(emu), { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(new URL(res.headers.get('location') ?? '').searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const page = await fetch(authorizeUrl(emu, { redirect_uri: null }));
    expect(await page.text()).toMatch(/<code id="code">[A-Za-z0-9_-]{43}<\/code>/);
  });

  describe('refuses a bad request with a 400 page', () => {
    const cases: [string, Record<string, string | null>, RegExp][] = [
      ['unknown client_id', { client_id: 'nope' }, /Invalid client_id: &quot;nope&quot;/],
      ['missing client_id', { client_id: null }, /Invalid client_id/],
      ['redirect_uri with another path', { redirect_uri: 'http://127.0.0.1:53682/callback/' }, /Invalid redirect_uri\. It must exactly match one of the redirect URIs you&#39;ve pre-configured for your app \(including the path\)\./],
      ['redirect_uri with another port', { redirect_uri: 'http://127.0.0.1:53683/callback' }, /Invalid redirect_uri/],
      ['localhost instead of 127.0.0.1', { redirect_uri: 'http://localhost:53682/callback' }, /Invalid redirect_uri/],
      ['missing response_type', { response_type: null }, /response_type/],
      ['implicit grant', { response_type: 'token' }, /Invalid response_type/],
      ['legacy token_access_type', { token_access_type: 'legacy' }, /long-lived/],
      ['unknown token_access_type', { token_access_type: 'forever' }, /Invalid token_access_type/],
      ['state over 500 bytes', { state: 'é'.repeat(251) }, /500 bytes/],
      ['plain PKCE', { code_challenge: 'a'.repeat(43), code_challenge_method: 'plain' }, /code_challenge_method/],
      ['PKCE without method', { code_challenge: 'a'.repeat(43) }, /code_challenge_method/],
      ['method without challenge', { code_challenge_method: 'S256' }, /code_challenge/],
      ['short challenge', { code_challenge: 'abc', code_challenge_method: 'S256' }, /Invalid code_challenge/],
      ['scope not enabled', { scope: 'files.content.write' }, /Invalid scope/],
    ];
    for (const [name, params, text] of cases) {
      it(name, async () => {
        const emu = await emulator({ autoApprove: true });
        const res = await fetch(authorizeUrl(emu, params), { redirect: 'manual' });
        expect(res.status).toBe(400);
        expect(res.headers.get('content-type')).toMatch(/^text\/html/);
        const html = await res.text();
        expect(html).toContain('Error (400)');
        expect(html).toMatch(text);
        expect(emu.state.codes.size).toBe(0);
      });
    }

    it('state of exactly 500 bytes is fine', async () => {
      const emu = await emulator({ autoApprove: true });
      const res = await fetch(authorizeUrl(emu, { state: 'x'.repeat(500) }), { redirect: 'manual' });
      expect(res.status).toBe(302);
    });
  });
});

describe('code exchange', () => {
  it('returns the Dropbox token response, with a refresh token for offline access', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const answer = await postToken(emu, { code, grant_type: 'authorization_code', redirect_uri: REDIRECT }, { authorization: basicAuth() });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    const body = answer.json ?? {};
    expect(Object.keys(body)).toEqual(['access_token', 'expires_in', 'token_type', 'scope', 'refresh_token', 'account_id', 'uid']);
    expect(body.access_token).toMatch(/^sl\.u\.[A-Za-z0-9_-]{150,}$/);
    expect(body.token_type).toBe('bearer');
    expect(body.expires_in).toBe(14_400);
    expect(body.scope).toBe('account_info.read files.content.read files.metadata.read');
    expect(body.refresh_token).toMatch(/^[A-Za-z0-9_-]{64}$/);
    expect(body.account_id).toBe(emu.state.account.accountId);
    expect(body.account_id).toMatch(/^dbid:/);
    expect(body.uid).toMatch(/^\d+$/);
  });

  it('takes the credentials in the body instead of Basic auth', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const answer = await postToken(emu, {
      code,
      grant_type: 'authorization_code',
      redirect_uri: REDIRECT,
      client_id: DEFAULT_APP.appKey,
      client_secret: DEFAULT_APP.appSecret,
    });
    expect(answer.status).toBe(200);
    expect(answer.json?.refresh_token).toEqual(expect.any(String));
  });

  it('takes the parameters in the query string, as the Dropbox JS SDK sends them', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const q = new URLSearchParams({ code, grant_type: 'authorization_code', redirect_uri: REDIRECT, client_id: DEFAULT_APP.appKey, client_secret: DEFAULT_APP.appSecret });
    const res = await fetch(`${emu.tokenUrl}?${q.toString()}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(200);
    // The request log keeps the path alone: the query held the secret.
    expect(emu.state.requests.at(-1)?.path).toBe('/oauth2/token');
  });

  it('gives no refresh token for online access or when token_access_type is absent', async () => {
    const emu = await emulator({ autoApprove: true });
    for (const type of ['online', null]) {
      const tokens = await obtainTokens(emu, { token_access_type: type });
      expect(tokens.access_token).toMatch(/^sl\./);
      expect(tokens).not.toHaveProperty('refresh_token');
    }
  });

  it('grants only the requested scopes', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu, { scope: 'files.metadata.read account_info.read' });
    expect(tokens.scope).toBe('account_info.read files.metadata.read');
  });

  it('honours tokenLifetimeSeconds', async () => {
    const emu = await emulator({ autoApprove: true, tokenLifetimeSeconds: 60 });
    expect((await obtainTokens(emu)).expires_in).toBe(60);
  });

  it('a code is single-use', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const form = { code, grant_type: 'authorization_code', redirect_uri: REDIRECT };
    expect((await postToken(emu, form, { authorization: basicAuth() })).status).toBe(200);
    const reuse = await postToken(emu, form, { authorization: basicAuth() });
    expect(reuse.status).toBe(400);
    expect(reuse.text).toBe(JSON.stringify(BAD_CODE));
  });

  it('a code expires after codeLifetimeSeconds', async () => {
    const clock = manualClock();
    const emu = await emulator({ autoApprove: true, codeLifetimeSeconds: 30, now: clock.now });
    const fresh = await approvedCode(emu);
    const stale = await approvedCode(emu);
    clock.advance(29_999);
    expect((await postToken(emu, { code: fresh, grant_type: 'authorization_code', redirect_uri: REDIRECT }, { authorization: basicAuth() })).status).toBe(200);
    clock.advance(1);
    const late = await postToken(emu, { code: stale, grant_type: 'authorization_code', redirect_uri: REDIRECT }, { authorization: basicAuth() });
    expect(late.status).toBe(400);
    expect(late.json).toEqual(BAD_CODE);
  });

  it('an unknown code, or one issued to another app, does not exist', async () => {
    const other: EmulatorApp = { ...DEFAULT_APP, appKey: 'otherappkey0001', appSecret: 'othersecret0001' };
    const emu = await emulator({ autoApprove: true, apps: [DEFAULT_APP, other] });
    const code = await approvedCode(emu);
    const wrongApp = await postToken(emu, { code, grant_type: 'authorization_code', redirect_uri: REDIRECT }, { authorization: basicAuth(other.appKey, other.appSecret) });
    expect(wrongApp.json).toEqual(BAD_CODE);
    const unknown = await postToken(emu, { code: 'x'.repeat(43), grant_type: 'authorization_code', redirect_uri: REDIRECT }, { authorization: basicAuth() });
    expect(unknown.json).toEqual(BAD_CODE);
  });

  it('redirect_uri must be the one used at authorize, and absent when none was used', async () => {
    const emu = await emulator({ autoApprove: true });
    const mismatch = '{"error_description":"redirect_uri mismatch","error":"invalid_grant"}';
    const code = await approvedCode(emu);
    const different = await postToken(emu, { code, grant_type: 'authorization_code', redirect_uri: `${REDIRECT}x` }, { authorization: basicAuth() });
    expect(different.status).toBe(400);
    expect(different.text).toBe(mismatch);
    const absent = await postToken(emu, { code, grant_type: 'authorization_code' }, { authorization: basicAuth() });
    expect(absent.text).toBe(mismatch);
    // A refused attempt does not burn the code.
    expect((await postToken(emu, { code, grant_type: 'authorization_code', redirect_uri: REDIRECT }, { authorization: basicAuth() })).status).toBe(200);

    const page = await fetch(authorizeUrl(emu, { redirect_uri: null }));
    const pasted = /<code id="code">([^<]+)</.exec(await page.text())?.[1] ?? '';
    const extra = await postToken(emu, { code: pasted, grant_type: 'authorization_code', redirect_uri: REDIRECT }, { authorization: basicAuth() });
    expect(extra.text).toBe(mismatch);
    expect((await postToken(emu, { code: pasted, grant_type: 'authorization_code' }, { authorization: basicAuth() })).status).toBe(200);
  });

  it('refuses Basic auth and body credentials together', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const both = await postToken(
      emu,
      { code, grant_type: 'authorization_code', redirect_uri: REDIRECT, client_id: DEFAULT_APP.appKey, client_secret: DEFAULT_APP.appSecret },
      { authorization: basicAuth() },
    );
    expect(both.status).toBe(400);
    expect(both.json?.error).toBe('invalid_request');
    expect(String(both.json?.error_description)).toMatch(/not both/);
    expect(emu.state.codes.get(code)?.used).toBe(false);
  });

  it('a wrong secret or unknown key is invalid_client, with code and text both in `error`', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const form = { code, grant_type: 'authorization_code', redirect_uri: REDIRECT };
    for (const headers of [{ authorization: basicAuth(DEFAULT_APP.appKey, 'wrong') }, { authorization: basicAuth('unknownkey', DEFAULT_APP.appSecret) }]) {
      const answer = await postToken(emu, form, headers);
      expect(answer.status).toBe(400);
      expect(answer.text).toBe(JSON.stringify(INVALID_CLIENT));
    }
    const inBody = await postToken(emu, { ...form, client_id: DEFAULT_APP.appKey, client_secret: 'wrong' });
    expect(inBody.json).toEqual(INVALID_CLIENT);
    expect(emu.state.codes.get(code)?.used).toBe(false);
  });

  it('without any client credentials there is no auth function', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const none = await postToken(emu, { code, grant_type: 'authorization_code', redirect_uri: REDIRECT });
    expect(none.text).toBe(JSON.stringify(NO_AUTH_FUNCTION));
    // client_id alone only works for a PKCE code.
    const idOnly = await postToken(emu, { code, grant_type: 'authorization_code', redirect_uri: REDIRECT, client_id: DEFAULT_APP.appKey });
    expect(idOnly.json).toEqual(NO_AUTH_FUNCTION);
  });

  it('names a missing field', async () => {
    const emu = await emulator();
    const noGrant = await postToken(emu, { code: 'abc' }, { authorization: basicAuth() });
    expect(noGrant.json).toEqual({ error: 'invalid_request', error_description: 'missing required field "grant_type"' });
    const noCode = await postToken(emu, { grant_type: 'authorization_code' }, { authorization: basicAuth() });
    expect(noCode.json).toEqual({ error: 'invalid_request', error_description: 'missing required field "code"' });
    const noRefresh = await postToken(emu, { grant_type: 'refresh_token' }, { authorization: basicAuth() });
    expect(noRefresh.json).toEqual({ error: 'invalid_request', error_description: 'missing required field "refresh_token"' });
  });

  it('refuses an unsupported grant type', async () => {
    const emu = await emulator();
    const answer = await postToken(emu, { grant_type: 'client_credentials' }, { authorization: basicAuth() });
    expect(answer.status).toBe(400);
    expect(answer.json?.error).toBe('unsupported_grant_type');
  });

  it('ignores a form body sent with another content type', async () => {
    const emu = await emulator({ autoApprove: true });
    const code = await approvedCode(emu);
    const res = await fetch(emu.tokenUrl, {
      method: 'POST',
      headers: { authorization: basicAuth(), 'content-type': 'application/json' },
      body: JSON.stringify({ code, grant_type: 'authorization_code', redirect_uri: REDIRECT }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'invalid_request', error_description: 'missing required field "grant_type"' });
  });
});

describe('PKCE', () => {
  it('a public client exchanges with client_id and code_verifier, and renews with client_id alone', async () => {
    const emu = await emulator({ autoApprove: true });
    const { verifier, challenge } = pkcePair();
    const code = await approvedCode(emu, { code_challenge: challenge, code_challenge_method: 'S256' });
    const answer = await postToken(emu, { code, grant_type: 'authorization_code', redirect_uri: REDIRECT, client_id: DEFAULT_APP.appKey, code_verifier: verifier });
    expect(answer.status, answer.text).toBe(200);
    const refreshToken = String(answer.json?.refresh_token);
    const renewed = await postToken(emu, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: DEFAULT_APP.appKey });
    expect(renewed.status, renewed.text).toBe(200);
    expect(renewed.json?.access_token).toMatch(/^sl\.u\./);
  });

  it('a confidential client with a challenge must also send the verifier', async () => {
    const emu = await emulator({ autoApprove: true });
    const { verifier, challenge } = pkcePair();
    const code = await approvedCode(emu, { code_challenge: challenge, code_challenge_method: 'S256' });
    const form = { code, grant_type: 'authorization_code', redirect_uri: REDIRECT };
    const missing = await postToken(emu, form, { authorization: basicAuth() });
    expect(missing.json).toEqual({ error: 'invalid_request', error_description: 'missing required field "code_verifier"' });
    expect((await postToken(emu, { ...form, code_verifier: verifier }, { authorization: basicAuth() })).status).toBe(200);
  });

  it('a wrong verifier is refused and leaves the code usable', async () => {
    const emu = await emulator({ autoApprove: true });
    const { verifier, challenge } = pkcePair();
    const code = await approvedCode(emu, { code_challenge: challenge, code_challenge_method: 'S256' });
    const form = { code, grant_type: 'authorization_code', redirect_uri: REDIRECT, client_id: DEFAULT_APP.appKey };
    const wrong = await postToken(emu, { ...form, code_verifier: pkcePair().verifier });
    expect(wrong.status).toBe(400);
    expect(wrong.json).toEqual({ error: 'invalid_grant', error_description: 'invalid code verifier' });
    const tooShort = await postToken(emu, { ...form, code_verifier: 'short' });
    expect(tooShort.json?.error).toBe('invalid_grant');
    expect((await postToken(emu, { ...form, code_verifier: verifier })).status).toBe(200);
  });

  it('the refresh token of a confidential grant cannot be renewed with client_id alone', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const answer = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '', client_id: DEFAULT_APP.appKey });
    expect(answer.status).toBe(400);
    expect(answer.text).toBe(JSON.stringify(NO_AUTH_FUNCTION));
  });
});

describe('renewal', () => {
  it('returns a new access token and no refresh token; the old refresh token keeps working', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const form = { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '', client_id: DEFAULT_APP.appKey, client_secret: DEFAULT_APP.appSecret };
    const first = await postToken(emu, form);
    expect(first.status).toBe(200);
    expect(Object.keys(first.json ?? {})).toEqual(['access_token', 'token_type', 'expires_in']);
    expect(first.json?.access_token).not.toBe(tokens.access_token);
    expect(first.json?.expires_in).toBe(14_400);
    const second = await postToken(emu, form);
    expect(second.status).toBe(200);
    expect(second.json).not.toHaveProperty('refresh_token');
    // Renewal does not end the earlier access tokens.
    expect((await rpc(emu, 'users/get_current_account', tokens.access_token)).status).toBe(200);
  });

  it('also takes Basic auth', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const answer = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }, { authorization: basicAuth() });
    expect(answer.status).toBe(200);
  });

  it('renews with a subset of the scopes and reports them', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const answer = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '', scope: 'files.metadata.read' }, { authorization: basicAuth() });
    expect(answer.json?.scope).toBe('files.metadata.read');
    const access = String(answer.json?.access_token);
    expect((await rpc(emu, 'users/get_current_account', access)).status).toBe(401);
    const wider = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '', scope: 'files.content.write' }, { authorization: basicAuth() });
    expect(wider.status).toBe(400);
    expect(wider.json?.error).toBe('invalid_scope');
  });

  it('an unknown refresh token is invalid or revoked', async () => {
    const emu = await emulator();
    const answer = await postToken(emu, { grant_type: 'refresh_token', refresh_token: 'x'.repeat(64) }, { authorization: basicAuth() });
    expect(answer.status).toBe(400);
    expect(answer.text).toBe(JSON.stringify(REVOKED));
  });

  it('a refresh token of one app is refused for another', async () => {
    const other: EmulatorApp = { ...DEFAULT_APP, appKey: 'otherappkey0001', appSecret: 'othersecret0001' };
    const emu = await emulator({ autoApprove: true, apps: [DEFAULT_APP, other] });
    const tokens = await obtainTokens(emu);
    const answer = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }, { authorization: basicAuth(other.appKey, other.appSecret) });
    expect(answer.json).toEqual(REVOKED);
  });

  it('revokeGrant (the user unlinks the app) kills the refresh token and its access tokens', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const keep = await obtainTokens(emu);
    emu.revokeGrant(tokens.refresh_token ?? '');
    const answer = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }, { authorization: basicAuth() });
    expect(answer.json).toEqual(REVOKED);
    expect((await rpc(emu, 'users/get_current_account', tokens.access_token)).status).toBe(401);
    // Another grant of the same user is untouched.
    expect((await rpc(emu, 'users/get_current_account', keep.access_token)).status).toBe(200);
    expect(() => emu.revokeGrant('unknown')).toThrow(/no grant/);
  });
});
