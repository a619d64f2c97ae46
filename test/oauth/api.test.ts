import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { getCurrentAccount, listFolder, revokeToken } from '../../src/oauth/index.js';
import type { OAuthErrorCode, OAuthErrorKind } from '../../src/oauth/index.js';
import { DROPBOX_API, mockDropbox, renderings, failure } from './helpers.js';
import type { MockDropbox, MockReply } from './helpers.js';

const TOKEN = 'sl.u.CANARY-access-token-7d3e';

let dropbox: MockDropbox;
beforeEach(() => {
  dropbox = mockDropbox();
});
afterEach(async () => {
  await dropbox.close();
});

const base = () => ({ apiUrl: DROPBOX_API, accessToken: TOKEN, dispatcher: dropbox.agent });


describe('revokeToken', () => {
  it('POSTs /2/auth/token/revoke with the bearer token and no body', async () => {
    dropbox.on('/2/auth/token/revoke', { status: 200, body: 'null', headers: { 'content-type': 'application/json' } });
    await expect(revokeToken(base())).resolves.toBeUndefined();
    const [req] = dropbox.requests;
    expect(req?.method).toBe('POST');
    expect(req?.path).toBe('/2/auth/token/revoke');
    expect(req?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    // Dropbox refuses a JSON content type without a body on void routes.
    expect(req?.headers['content-type']).toBeUndefined();
    expect(req?.body ?? '').toBe('');
  });

  it('keeps a path prefix of the API URL and tolerates a trailing slash', async () => {
    const proxied = mockDropbox('http://127.0.0.1:9');
    proxied.on('/dropbox/2/auth/token/revoke', { status: 200, body: 'null' });
    await revokeToken({ apiUrl: 'http://127.0.0.1:9/dropbox/', accessToken: TOKEN, dispatcher: proxied.agent });
    expect(proxied.requests[0]?.path).toBe('/dropbox/2/auth/token/revoke');
    await proxied.close();
  });
});

describe('getCurrentAccount', () => {
  it('POSTs /2/users/get_current_account with no body and reads the account', async () => {
    dropbox.on('/2/users/get_current_account', {
      status: 200,
      body: {
        account_id: 'dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc',
        name: { given_name: 'Franz', surname: 'Ferdinand', display_name: 'Franz Ferdinand (Personal)' },
        email: 'franz@example.com',
        email_verified: true,
        account_type: { '.tag': 'basic' },
      },
    });
    expect(await getCurrentAccount(base())).toEqual({
      accountId: 'dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc',
      email: 'franz@example.com',
      name: 'Franz Ferdinand (Personal)',
    });
    const [req] = dropbox.requests;
    expect(req?.path).toBe('/2/users/get_current_account');
    expect(req?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(req?.headers['content-type']).toBeUndefined();
    expect(req?.body ?? '').toBe('');
  });

  it('refuses an answer without account_id', async () => {
    dropbox.on('/2/users/get_current_account', { status: 200, body: { email: 'x@example.com' } });
    const err = await failure(getCurrentAccount(base()));
    expect(err.code).toBe('OAUTH_BAD_RESPONSE');
    expect(err.message).toContain('account_id');
  });
});

describe('listFolder', () => {
  const LISTING = {
    entries: [
      { '.tag': 'file', name: 'a.pdf', id: 'id:1', path_display: '/data/a.pdf' },
      { '.tag': 'folder', name: '2024', id: 'id:2', path_display: '/data/2024' },
    ],
    cursor: 'AAH',
    has_more: false,
  };

  it('POSTs the path as JSON and maps the entries', async () => {
    dropbox.on('/2/files/list_folder', { status: 200, body: LISTING });
    const result = await listFolder({ ...base(), path: '/data' });
    expect(result).toEqual({
      entries: [
        { name: 'a.pdf', tag: 'file' },
        { name: '2024', tag: 'folder' },
      ],
      hasMore: false,
    });
    const [req] = dropbox.requests;
    expect(req?.method).toBe('POST');
    expect(req?.path).toBe('/2/files/list_folder');
    expect(req?.headers['content-type']).toBe('application/json');
    expect(req?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(JSON.parse(req?.body ?? '')).toEqual({ path: '/data', recursive: false });
  });

  it("lists the app folder itself with path '' (Dropbox refuses '/')", async () => {
    dropbox.on('/2/files/list_folder', { status: 200, body: { entries: [], cursor: 'x', has_more: true } });
    dropbox.on('/2/files/list_folder', { status: 200, body: { entries: [], cursor: 'x', has_more: false } });
    expect((await listFolder({ ...base(), path: '', limit: 10 })).hasMore).toBe(true);
    await listFolder({ ...base(), path: '/' });
    expect(JSON.parse(dropbox.requests[0]?.body ?? '')).toEqual({ path: '', recursive: false, limit: 10 });
    expect(JSON.parse(dropbox.requests[1]?.body ?? '')).toEqual({ path: '', recursive: false });
  });

  it('refuses a path without a leading slash and a bad limit before sending', async () => {
    await expect(listFolder({ ...base(), path: 'data' })).rejects.toBeInstanceOf(ValidationError);
    await expect(listFolder({ ...base(), path: '/data', limit: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(listFolder({ ...base(), accessToken: '', path: '' })).rejects.toBeInstanceOf(ValidationError);
    expect(dropbox.requests).toHaveLength(0);
  });
});

interface ApiErrorCase {
  name: string;
  reply: MockReply;
  code: OAuthErrorCode;
  kind: OAuthErrorKind;
  exitCode: number;
  error?: string;
  requiredScope?: string;
  retryAfterMs?: number;
  message?: RegExp;
  hint?: RegExp;
}

// Bodies as Dropbox sends them (dropbox-oauth.md §3.2).
const API_ERRORS: ApiErrorCase[] = [
  {
    name: 'an expired access token',
    reply: { status: 401, body: { error_summary: 'expired_access_token/.', error: { '.tag': 'expired_access_token' } } },
    code: 'OAUTH_EXPIRED_ACCESS_TOKEN', kind: 'transient', exitCode: 1, error: 'expired_access_token',
    hint: /renew/,
  },
  {
    name: 'an expired access token (newer serialisation)',
    reply: { status: 401, body: '{"error":{".tag":"expired_access_token"},"error_summary":"expired_access_token/"}', headers: { 'content-type': 'application/json', 'www-authenticate': 'Bearer realm="Dropbox-API"' } },
    code: 'OAUTH_EXPIRED_ACCESS_TOKEN', kind: 'transient', exitCode: 1, error: 'expired_access_token',
  },
  {
    name: 'a revoked access token',
    reply: { status: 401, body: { error_summary: 'invalid_access_token/...', error: { '.tag': 'invalid_access_token' } } },
    code: 'OAUTH_INVALID_ACCESS_TOKEN', kind: 'terminal', exitCode: 4, error: 'invalid_access_token',
    hint: /syncauth setup/,
  },
  {
    name: 'a suspended user',
    reply: { status: 401, body: { error_summary: 'user_suspended/', error: { '.tag': 'user_suspended' } } },
    code: 'OAUTH_INVALID_ACCESS_TOKEN', kind: 'terminal', exitCode: 4, error: 'user_suspended',
  },
  {
    name: 'a missing permission',
    reply: { status: 401, body: { error_summary: 'missing_scope/...', error: { '.tag': 'missing_scope', required_scope: 'files.metadata.read' } } },
    code: 'OAUTH_MISSING_SCOPE', kind: 'configuration', exitCode: 1, error: 'missing_scope', requiredScope: 'files.metadata.read',
    message: /files\.metadata\.read/,
    hint: /Permissions tab.*files\.metadata\.read.*authorize again/,
  },
  {
    name: 'a plain-text 400',
    reply: { status: 400, body: 'Error in call to API function "files/list_folder": request body: path: expected string, got null', headers: { 'content-type': 'text/plain; charset=utf-8' } },
    code: 'OAUTH_HTTP_ERROR', kind: 'protocol', exitCode: 1,
    message: /Error in call to API function "files\/list_folder"/,
  },
  {
    name: 'a malformed access token (plain-text 400)',
    reply: { status: 400, body: 'Error in call to API function "files/list_folder": The given OAuth 2 access token is malformed.', headers: { 'content-type': 'text/plain' } },
    code: 'OAUTH_INVALID_ACCESS_TOKEN', kind: 'terminal', exitCode: 4,
  },
  {
    name: 'a 400 with a body that only looks like JSON',
    reply: { status: 400, body: '{not json', headers: { 'content-type': 'text/plain' } },
    code: 'OAUTH_HTTP_ERROR', kind: 'protocol', exitCode: 1,
  },
  {
    name: 'a missing folder',
    reply: { status: 409, body: { error_summary: 'path/not_found/..', error: { '.tag': 'path', path: { '.tag': 'not_found' } } } },
    code: 'OAUTH_PATH_NOT_FOUND', kind: 'configuration', exitCode: 1, error: 'path',
    message: /the folder \/data does not exist/,
  },
  {
    name: 'another route error',
    reply: { status: 409, body: { error_summary: 'path/malformed_path/', error: { '.tag': 'path', path: { '.tag': 'malformed_path' } } } },
    code: 'OAUTH_API_ERROR', kind: 'configuration', exitCode: 1, error: 'path',
    message: /path\/malformed_path/,
  },
  {
    name: 'an access error',
    reply: { status: 403, body: { error_summary: 'no_permission/', error: { '.tag': 'no_permission' } } },
    code: 'OAUTH_ACCESS_FORBIDDEN', kind: 'configuration', exitCode: 1, error: 'no_permission',
  },
  {
    name: 'a rate limit with Retry-After',
    reply: {
      status: 429,
      body: '{"error_summary": "too_many_write_operations/.", "error": {"reason": {".tag": "too_many_write_operations"}}}',
      headers: { 'content-type': 'application/json', 'retry-after': '1' },
    },
    code: 'OAUTH_RATE_LIMITED', kind: 'rate_limited', exitCode: 1, retryAfterMs: 1000,
  },
  {
    name: 'a rate limit with retry_after only in the body',
    reply: { status: 429, body: { error_summary: 'too_many_requests/', error: { reason: { '.tag': 'too_many_requests' }, retry_after: 3 } } },
    code: 'OAUTH_RATE_LIMITED', kind: 'rate_limited', exitCode: 1, retryAfterMs: 3000,
  },
  {
    name: 'a server error',
    reply: { status: 503, body: '' },
    code: 'OAUTH_SERVER_ERROR', kind: 'transient', exitCode: 1,
  },
  {
    name: 'an unexpected status',
    reply: { status: 404, body: 'Not Found', headers: { 'content-type': 'text/plain' } },
    code: 'OAUTH_HTTP_ERROR', kind: 'configuration', exitCode: 1,
    hint: /API URL/,
  },
];

describe('v2 API failures', () => {
  it.each(API_ERRORS)('classifies $name', async (c) => {
    dropbox.on('/2/files/list_folder', c.reply);
    const err = await failure(listFolder({ ...base(), path: '/data' }));
    expect(err.code).toBe(c.code);
    expect(err.kind).toBe(c.kind);
    expect(err.exitCode).toBe(c.exitCode);
    expect(err.status).toBe(c.reply.status);
    if (c.error !== undefined) expect(err.error).toBe(c.error);
    expect(err.requiredScope).toBe(c.requiredScope);
    expect(err.retryAfterMs).toBe(c.retryAfterMs);
    if (c.message) expect(err.message).toMatch(c.message);
    if (c.hint) expect(err.hint).toMatch(c.hint);
    expect(Object.getOwnPropertyDescriptor(err, 'body')?.enumerable).toBe(false);
  });

  it('fails an expired token on revoke, so that the caller renews first', async () => {
    dropbox.on('/2/auth/token/revoke', { status: 401, body: { error_summary: 'expired_access_token/', error: { '.tag': 'expired_access_token' } } });
    expect((await failure(revokeToken(base()))).code).toBe('OAUTH_EXPIRED_ACCESS_TOKEN');
  });

  it('never shows the access token, even when Dropbox echoes it', async () => {
    for (const status of [400, 401, 409, 500]) {
      dropbox.on('/2/files/list_folder', {
        status,
        body: status === 400 ? `bad token ${TOKEN}` : { error_summary: `x/${TOKEN}`, error: { '.tag': 'path', path: { '.tag': TOKEN } } },
      });
      const err = await failure(listFolder({ ...base(), path: '/data' }));
      for (const text of [...renderings(err), inspect(err)]) expect(text).not.toContain(TOKEN);
    }
    dropbox.failNetwork('/2/users/get_current_account', new Error('socket hang up'));
    const err = await failure(getCurrentAccount(base()));
    expect(err.code).toBe('OAUTH_NETWORK');
    for (const text of renderings(err)) expect(text).not.toContain(TOKEN);
  });
});
