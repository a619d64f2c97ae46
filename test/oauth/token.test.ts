import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { exchangeCode, renewAccessToken } from '../../src/oauth/index.js';
import type { OAuthErrorCode, OAuthErrorKind } from '../../src/oauth/index.js';
import { TOKEN_URL, mockDropbox, renderings, failure } from './helpers.js';
import type { MockDropbox, MockReply } from './helpers.js';

const APP = { appKey: 'k3yabcdefgh1234', appSecret: 's3cretabcdef987' };
const NOW = 1_700_000_000_000;
const ACCESS = 'sl.u.AbX9y6Fe3AuH5o66-gmJpR032jwAwQPIVVzWXZNkdzcYT02akC2de219dZi6gxYPVnYPrpvISRSf9lxKWJz';
const REFRESH = 'nBiM85CZALsAAAAAAAAAAQXHBoNpNutK4ngsXHsqW4iGz9tisb3JyjGqikMJIYbd';
const CODE = 'bTCiUTzxe6kAAAAAAAAAGN1NMZIxyqETKr4o7OS2dU8';
const VERIFIER = 'v'.repeat(43) + 'erifier-abcdefghijklmnopqrstuvwxyz0123456789';
const REDIRECT = 'http://127.0.0.1:53682/callback';

const EXCHANGE_BODY = {
  access_token: ACCESS,
  expires_in: 14400,
  token_type: 'bearer',
  scope: 'account_info.read files.content.read files.content.write files.metadata.read',
  refresh_token: REFRESH,
  account_id: 'dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc',
  uid: '12345',
};

let dropbox: MockDropbox;
beforeEach(() => {
  dropbox = mockDropbox();
});
afterEach(async () => {
  await dropbox.close();
});

function exchange(extra: Partial<Parameters<typeof exchangeCode>[0]> = {}) {
  return exchangeCode({
    tokenUrl: TOKEN_URL,
    app: APP,
    code: CODE,
    redirectUri: REDIRECT,
    codeVerifier: VERIFIER,
    dispatcher: dropbox.agent,
    now: () => NOW,
    ...extra,
  });
}

function renew(extra: Partial<Parameters<typeof renewAccessToken>[0]> = {}) {
  return renewAccessToken({
    tokenUrl: TOKEN_URL,
    app: APP,
    refreshToken: REFRESH,
    dispatcher: dropbox.agent,
    now: () => NOW,
    ...extra,
  });
}


describe('exchangeCode', () => {
  it('sends the code with HTTP Basic app credentials, the redirect URI and the PKCE verifier', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: EXCHANGE_BODY });
    const tokens = await exchange();

    expect(dropbox.requests).toHaveLength(1);
    const [req] = dropbox.requests;
    expect(req?.method).toBe('POST');
    expect(req?.path).toBe('/oauth2/token');
    expect(req?.headers.authorization).toBe(`Basic ${Buffer.from('k3yabcdefgh1234:s3cretabcdef987').toString('base64')}`);
    expect(req?.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(new URLSearchParams(req?.body))).toEqual({
      code: CODE,
      grant_type: 'authorization_code',
      redirect_uri: REDIRECT,
      code_verifier: VERIFIER,
    });
    // Dropbox refuses client credentials in the header and the body at once.
    expect(req?.body).not.toContain('client_secret');
    expect(req?.body).not.toContain('client_id');

    expect(tokens).toEqual({
      accessToken: ACCESS,
      refreshToken: REFRESH,
      expiresAt: NOW + 14_400_000,
      expiresIn: 14400,
      scopes: ['account_info.read', 'files.content.read', 'files.content.write', 'files.metadata.read'],
      accountId: 'dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc',
      uid: '12345',
      tokenType: 'bearer',
      warnings: [],
    });
  });

  it('leaves redirect_uri and code_verifier out when the authorize request had none (paste mode)', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: EXCHANGE_BODY });
    await exchange({ redirectUri: undefined, codeVerifier: undefined, code: `  ${CODE}\n` });
    expect(dropbox.requests[0]?.body).toBe(`code=${CODE}&grant_type=authorization_code`);
  });

  it('measures expiresAt from when the request was sent', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: EXCHANGE_BODY });
    let t = NOW;
    const tokens = await exchange({ now: () => (t += 5000) });
    expect(tokens.expiresAt).toBe(NOW + 5000 + 14_400_000);
  });

  it('refuses a response without refresh_token and explains token_access_type=offline', async () => {
    const { refresh_token: _dropped, ...online } = EXCHANGE_BODY;
    dropbox.on('/oauth2/token', { status: 200, body: online });
    const err = await failure(exchange());
    expect(err.code).toBe('OAUTH_BAD_RESPONSE');
    expect(err.kind).toBe('protocol');
    expect(err.message).toContain('token_access_type=offline');
    // The body is kept for debugging, without the live access token, and not enumerable.
    expect(Object.keys(err)).not.toContain('body');
    expect(JSON.stringify(err.body)).not.toContain(ACCESS);
    expect(renderings(err).join('\n')).not.toContain(ACCESS);
  });

  it('accepts a numeric uid and reports a token without the sl. prefix as a warning', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: { ...EXCHANGE_BODY, access_token: 'legacy-token-value', uid: 12345 } });
    const tokens = await exchange();
    expect(tokens.uid).toBe('12345');
    expect(tokens.warnings).toHaveLength(1);
    expect(tokens.warnings[0]).toContain('"sl."');
    expect(tokens.warnings[0]).not.toContain('legacy-token-value');
  });

  it('refuses an access token pasted instead of a code without sending anything', async () => {
    const err = await exchange({ code: ACCESS }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues[0]?.field).toBe('code');
    expect(String(err)).not.toContain(ACCESS);
    expect(dropbox.requests).toHaveLength(0);
  });

  it('refuses empty or malformed app credentials without echoing them', async () => {
    await expect(exchange({ app: { appKey: APP.appKey, appSecret: '' } })).rejects.toBeInstanceOf(ValidationError);
    const err = await exchange({ app: { appKey: 'bad key:x', appSecret: APP.appSecret } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect(String(err)).not.toContain('bad key');
    await expect(exchange({ tokenUrl: 'not a url' })).rejects.toBeInstanceOf(ValidationError);
    expect(dropbox.requests).toHaveLength(0);
  });
});

describe('renewAccessToken', () => {
  const RENEW_BODY = { access_token: 'sl.B2M8yVLTS_ojO3UsFs2t-new', token_type: 'bearer', expires_in: 14400 };

  it('sends the refresh token with client_id and client_secret in the body and no Authorization header', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: RENEW_BODY });
    const tokens = await renew();

    const [req] = dropbox.requests;
    expect(req?.method).toBe('POST');
    expect(req?.path).toBe('/oauth2/token');
    expect(req?.headers.authorization).toBeUndefined();
    expect(req?.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(req?.body).toBe(
      `refresh_token=${REFRESH}&grant_type=refresh_token&client_id=${APP.appKey}&client_secret=${APP.appSecret}`,
    );
    // Dropbox usually returns no refresh token: the old one stays valid and is kept.
    expect(tokens).toEqual({
      accessToken: 'sl.B2M8yVLTS_ojO3UsFs2t-new',
      refreshToken: REFRESH,
      expiresAt: NOW + 14_400_000,
      expiresIn: 14400,
      scopes: [],
      tokenType: 'bearer',
      warnings: [],
    });
  });

  it('takes a new refresh token when one is returned', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: { ...RENEW_BODY, refresh_token: 'rotated-refresh-token-value', scope: 'files.content.read' } });
    const tokens = await renew();
    expect(tokens.refreshToken).toBe('rotated-refresh-token-value');
    expect(tokens.scopes).toEqual(['files.content.read']);
  });

  it('form-encodes values with reserved characters', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: RENEW_BODY });
    await renew({ refreshToken: 'a+b/c=d&e' });
    expect(new URLSearchParams(dropbox.requests[0]?.body).get('refresh_token')).toBe('a+b/c=d&e');
  });
});

interface ErrorCase {
  name: string;
  call: 'exchange' | 'renew';
  reply: MockReply;
  code: OAuthErrorCode;
  kind: OAuthErrorKind;
  exitCode: number;
  error?: string;
  errorDescription?: string;
  retryAfterMs?: number;
  hint: RegExp;
}

// Bodies as Dropbox sends them (dropbox-oauth.md §2.5).
const ERROR_CASES: ErrorCase[] = [
  {
    name: 'a used or expired code',
    call: 'exchange',
    reply: { status: 400, body: { error: 'invalid_grant', error_description: "code doesn't exist or has expired" } },
    code: 'OAUTH_INVALID_GRANT', kind: 'terminal', exitCode: 4,
    error: 'invalid_grant', errorDescription: "code doesn't exist or has expired",
    hint: /works once.*run `syncauth setup` to authorize again/,
  },
  {
    name: 'a redirect URI that differs from the authorize request',
    call: 'exchange',
    reply: { status: 400, body: { error_description: 'redirect_uri mismatch', error: 'invalid_grant' } },
    code: 'OAUTH_INVALID_GRANT', kind: 'terminal', exitCode: 4,
    error: 'invalid_grant', errorDescription: 'redirect_uri mismatch',
    hint: /redirect URI.*syncauth setup/,
  },
  {
    name: 'a revoked refresh token',
    call: 'renew',
    reply: { status: 400, body: { error: 'invalid_grant', error_description: 'refresh token is invalid or revoked' } },
    code: 'OAUTH_INVALID_GRANT', kind: 'terminal', exitCode: 4,
    error: 'invalid_grant', errorDescription: 'refresh token is invalid or revoked',
    hint: /^run `syncauth setup` to authorize again$/,
  },
  {
    name: 'a malformed refresh token, as plain text',
    call: 'renew',
    reply: { status: 400, body: 'invalid_grant : refresh token is malformed', headers: { 'content-type': 'text/plain' } },
    code: 'OAUTH_INVALID_GRANT', kind: 'terminal', exitCode: 4,
    error: 'invalid_grant', errorDescription: 'refresh token is malformed',
    hint: /syncauth setup/,
  },
  {
    name: 'a wrong key or secret (code and text both in error)',
    call: 'renew',
    reply: { status: 400, body: { error: 'invalid_client: Invalid client_id or client_secret' } },
    code: 'OAUTH_INVALID_CLIENT', kind: 'configuration', exitCode: 1,
    error: 'invalid_client', errorDescription: 'Invalid client_id or client_secret',
    hint: /check the app key and app secret/,
  },
  {
    name: 'a missing secret',
    call: 'renew',
    reply: { status: 400, body: { error_description: 'No auth function available for given request', error: 'invalid_request' } },
    code: 'OAUTH_INVALID_REQUEST', kind: 'configuration', exitCode: 1,
    error: 'invalid_request', errorDescription: 'No auth function available for given request',
    hint: /check the app key and app secret/,
  },
  {
    name: 'a missing field',
    call: 'exchange',
    reply: { status: 400, body: { error: 'invalid_request', error_description: 'missing required field "refresh_token"' } },
    code: 'OAUTH_INVALID_REQUEST', kind: 'configuration', exitCode: 1,
    error: 'invalid_request', errorDescription: 'missing required field "refresh_token"',
    hint: /check the app key and app secret/,
  },
  {
    name: 'an unsupported grant type',
    call: 'renew',
    reply: { status: 400, body: { error: 'unsupported_grant_type' } },
    code: 'OAUTH_INVALID_REQUEST', kind: 'configuration', exitCode: 1,
    error: 'unsupported_grant_type',
    hint: /check/,
  },
  {
    name: 'a server error whose error is a sentence',
    call: 'renew',
    reply: { status: 500, body: { error: 'The server has either erred or is incapable of performing the requested operation.' } },
    code: 'OAUTH_SERVER_ERROR', kind: 'transient', exitCode: 1,
    errorDescription: 'The server has either erred or is incapable of performing the requested operation.',
    hint: /try again/,
  },
  {
    name: 'a 503 HTML page',
    call: 'renew',
    reply: { status: 503, body: '<html><body>Service Unavailable</body></html>', headers: { 'content-type': 'text/html' } },
    code: 'OAUTH_SERVER_ERROR', kind: 'transient', exitCode: 1,
    hint: /try again/,
  },
  {
    name: 'a 429 with an empty body and Retry-After',
    call: 'exchange',
    reply: { status: 429, headers: { 'retry-after': '7', 'content-length': '0' } },
    code: 'OAUTH_RATE_LIMITED', kind: 'rate_limited', exitCode: 1,
    retryAfterMs: 7000,
    hint: /in 7 s/,
  },
  {
    name: 'a 429 with an HTTP-date Retry-After',
    call: 'renew',
    reply: { status: 429, headers: { 'retry-after': new Date(NOW + 30_000).toUTCString() } },
    code: 'OAUTH_RATE_LIMITED', kind: 'rate_limited', exitCode: 1,
    retryAfterMs: 30_000,
    hint: /in 30 s/,
  },
  {
    name: 'a 429 without Retry-After',
    call: 'renew',
    reply: { status: 429 },
    code: 'OAUTH_RATE_LIMITED', kind: 'rate_limited', exitCode: 1,
    hint: /later/,
  },
  {
    name: 'a URL that is not a token endpoint',
    call: 'renew',
    reply: { status: 404, body: '<html>Not Found</html>', headers: { 'content-type': 'text/html' } },
    code: 'OAUTH_HTTP_ERROR', kind: 'configuration', exitCode: 1,
    hint: /token URL/,
  },
  {
    name: 'an unknown OAuth error',
    call: 'renew',
    reply: { status: 400, body: { error: 'something_new', error_description: 'a new failure' } },
    code: 'OAUTH_PROVIDER_ERROR', kind: 'protocol', exitCode: 1,
    error: 'something_new', errorDescription: 'a new failure',
    hint: /check/,
  },
  {
    name: 'a 200 that is not JSON',
    call: 'exchange',
    reply: { status: 200, body: '<html>Dropbox</html>', headers: { 'content-type': 'text/html' } },
    code: 'OAUTH_BAD_RESPONSE', kind: 'protocol', exitCode: 1,
    hint: /token URL/,
  },
  {
    name: 'a 200 with an absurd expires_in (1e300)',
    call: 'renew',
    reply: { status: 200, body: { access_token: 'sl.x', token_type: 'bearer', expires_in: 1e300 } },
    code: 'OAUTH_BAD_RESPONSE', kind: 'protocol', exitCode: 1,
    hint: /token URL/,
  },
  {
    name: 'a 200 with expires_in past a day',
    call: 'exchange',
    reply: { status: 200, body: { access_token: 'sl.x', token_type: 'bearer', refresh_token: 'r', expires_in: 86_401 } },
    code: 'OAUTH_BAD_RESPONSE', kind: 'protocol', exitCode: 1,
    hint: /token URL/,
  },
  {
    name: 'a 200 with expires_in as a string',
    call: 'renew',
    reply: { status: 200, body: { access_token: 'sl.x', token_type: 'bearer', expires_in: '14400' } },
    code: 'OAUTH_BAD_RESPONSE', kind: 'protocol', exitCode: 1,
    hint: /token URL/,
  },
];

describe('token endpoint failures', () => {
  it.each(ERROR_CASES)('classifies $name', async (c) => {
    dropbox.on('/oauth2/token', c.reply);
    const err = await failure(c.call === 'exchange' ? exchange() : renew());
    expect(err.name).toBe('OAuthError');
    expect(err.code).toBe(c.code);
    expect(err.kind).toBe(c.kind);
    expect(err.exitCode).toBe(c.exitCode);
    expect(err.status).toBe(c.reply.status);
    expect(err.error).toBe(c.error);
    expect(err.errorDescription).toBe(c.errorDescription);
    expect(err.retryAfterMs).toBe(c.retryAfterMs);
    expect(err.hint).toMatch(c.hint);
    expect(Object.getOwnPropertyDescriptor(err, 'body')?.enumerable).toBe(false);
    expect(JSON.stringify(err)).not.toContain('"body"');
  });

  it('names the fields a token response lacks, never their values', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: { access_token: ACCESS, token_type: 'bearer' } });
    const err = await failure(renew());
    expect(err.message).toContain('expires_in');
    expect(renderings(err).join('\n')).not.toContain(ACCESS);
  });

  it('refuses a token type other than bearer', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: { ...EXCHANGE_BODY, token_type: 'mac' } });
    const err = await failure(exchange());
    expect(err.code).toBe('OAUTH_BAD_RESPONSE');
    expect(err.message).toContain('"mac"');
  });

  it('turns a network failure into a transient OAUTH_NETWORK error', async () => {
    const cause = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    dropbox.failNetwork('/oauth2/token', cause);
    const err = await failure(renew());
    expect(err.code).toBe('OAUTH_NETWORK');
    expect(err.kind).toBe('transient');
    expect(err.message).toContain('https://api.dropboxapi.com');
    expect(err.message).toContain('ECONNREFUSED');
  });

  it('gives up after timeoutMs with a transient OAUTH_TIMEOUT error', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: EXCHANGE_BODY, delayMs: 2000 });
    const started = Date.now();
    const err = await failure(exchange({ timeoutMs: 50 }));
    expect(err.code).toBe('OAUTH_TIMEOUT');
    expect(err.kind).toBe('transient');
    expect(err.message).toContain('50 ms');
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('stops when the signal aborts', async () => {
    dropbox.on('/oauth2/token', { status: 200, body: EXCHANGE_BODY, delayMs: 2000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const err = await failure(renew({ signal: controller.signal }));
    expect(err.code).toBe('OAUTH_ABORTED');
    const already = await failure(renew({ signal: AbortSignal.abort() }));
    expect(already.code).toBe('OAUTH_ABORTED');
  });
});

describe('secrets in token errors', () => {
  const CANARY = {
    appSecret: 'CANARY-app-secret-5f1e',
    refreshToken: 'CANARY-refresh-token-9a7c',
    code: 'CANARY-code-1b2d',
    codeVerifier: 'CANARY-verifier-0000000000000000000000000000000000',
  };

  // A provider that echoes every parameter it got is the worst case for a message built from its text.
  function echoing(status: number, sent: string[]): MockReply {
    return { status, body: { error: 'invalid_grant', error_description: `rejected ${sent.join(' ')}` } };
  }

  function expectClean(err: unknown): void {
    for (const text of [...renderings(err), inspect(err, { depth: 5 })]) {
      for (const secret of Object.values(CANARY)) expect(text).not.toContain(secret);
    }
  }

  it('keeps the app secret, code and verifier out of exchange errors', async () => {
    dropbox.on('/oauth2/token', echoing(400, [CANARY.appSecret, CANARY.code, CANARY.codeVerifier]));
    const err = await failure(
      exchange({ app: { appKey: APP.appKey, appSecret: CANARY.appSecret }, code: CANARY.code, codeVerifier: CANARY.codeVerifier }),
    );
    expect(err.errorDescription).toContain('[redacted]');
    expectClean(err);
  });

  it('keeps the app secret and refresh token out of renewal errors, whatever the status', async () => {
    for (const status of [400, 401, 429, 500]) {
      dropbox.on('/oauth2/token', echoing(status, [CANARY.appSecret, CANARY.refreshToken]));
      const err = await failure(
        renew({ app: { appKey: APP.appKey, appSecret: CANARY.appSecret }, refreshToken: CANARY.refreshToken }),
      );
      expectClean(err);
    }
  });

  it('keeps secrets out of network and timeout errors', async () => {
    dropbox.failNetwork('/oauth2/token', new Error('socket hang up'));
    expectClean(await failure(renew({ app: { appKey: APP.appKey, appSecret: CANARY.appSecret }, refreshToken: CANARY.refreshToken })));
    dropbox.on('/oauth2/token', { status: 200, body: EXCHANGE_BODY, delayMs: 1000 });
    expectClean(
      await failure(
        exchange({ app: { appKey: APP.appKey, appSecret: CANARY.appSecret }, code: CANARY.code, codeVerifier: CANARY.codeVerifier, timeoutMs: 20 }),
      ),
    );
  });
});
