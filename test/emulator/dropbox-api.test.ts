import { describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import type { EmulatorApp } from '../../src/emulator/index.js';
import { basicAuth, emulator, manualClock, obtainTokens, postToken, rpc } from './helpers.js';

const INVALID_TOKEN = { error_summary: 'invalid_access_token/...', error: { '.tag': 'invalid_access_token' } };
const EXPIRED_TOKEN = { error_summary: 'expired_access_token/.', error: { '.tag': 'expired_access_token' } };

describe('bearer checks', () => {
  it('an unknown token is invalid_access_token with the Dropbox-API realm', async () => {
    const emu = await emulator();
    const answer = await rpc(emu, 'users/get_current_account', `sl.u.${'x'.repeat(200)}`);
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="Dropbox-API"');
    expect(answer.text).toBe(JSON.stringify(INVALID_TOKEN));
  });

  it('a token past its lifetime is expired_access_token', async () => {
    const clock = manualClock();
    const emu = await emulator({ autoApprove: true, tokenLifetimeSeconds: 60, now: clock.now });
    const tokens = await obtainTokens(emu);
    clock.advance(59_999);
    expect((await rpc(emu, 'users/get_current_account', tokens.access_token)).status).toBe(200);
    clock.advance(1);
    const expired = await rpc(emu, 'users/get_current_account', tokens.access_token);
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toBe('Bearer realm="Dropbox-API"');
    expect(expired.text).toBe(JSON.stringify(EXPIRED_TOKEN));
    // Renewal brings a working token again.
    const renewed = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }, { authorization: basicAuth() });
    expect((await rpc(emu, 'users/get_current_account', String(renewed.json?.access_token))).status).toBe(200);
  });

  it('a sub-second lifetime expires on the real clock', async () => {
    const emu = await emulator({ autoApprove: true, tokenLifetimeSeconds: 0.05 });
    const tokens = await obtainTokens(emu);
    expect(tokens.expires_in).toBe(0.05);
    await new Promise((r) => setTimeout(r, 80));
    expect((await rpc(emu, 'users/get_current_account', tokens.access_token)).json).toEqual(EXPIRED_TOKEN);
  });

  it('no Authorization header is a plain-text 400', async () => {
    const emu = await emulator();
    const answer = await rpc(emu, 'users/get_current_account', null);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(answer.text).toBe('Error in call to API function "users/get_current_account": Must provide HTTP header "Authorization" or URL parameter "authorization".');
  });

  it('a non-Bearer Authorization header is a plain-text 400 that does not echo it', async () => {
    const emu = await emulator();
    const answer = await rpc(emu, 'files/list_folder', null, { path: '' }, { authorization: basicAuth() });
    expect(answer.status).toBe(400);
    expect(answer.text).toMatch(/Expecting "Bearer <oauth2-access-token>"/);
    expect(answer.text).not.toContain(basicAuth().slice(6));
  });
});

describe('users/get_current_account', () => {
  it('returns the account the token belongs to', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const answer = await rpc(emu, 'users/get_current_account', tokens.access_token);
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({
      account_id: emu.state.account.accountId,
      email: emu.state.account.email,
      name: { display_name: emu.state.account.displayName },
      account_type: { '.tag': 'basic' },
      disabled: false,
    });
  });

  it('accepts a JSON null body and refuses any other argument', async () => {
    const emu = await emulator({ autoApprove: true });
    const { access_token: token } = await obtainTokens(emu);
    expect((await rpc(emu, 'users/get_current_account', token, 'null')).status).toBe(200);
    const withValue = await rpc(emu, 'users/get_current_account', token, { foo: 1 });
    expect(withValue.status).toBe(400);
    expect(withValue.text).toBe('Error in call to API function "users/get_current_account": request body: expected null, got value');
  });

  it('needs account_info.read', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu, { scope: 'files.metadata.read' });
    const answer = await rpc(emu, 'users/get_current_account', tokens.access_token);
    expect(answer.status).toBe(401);
    expect(answer.json).toEqual({ error_summary: 'missing_scope/..', error: { '.tag': 'missing_scope', required_scope: 'account_info.read' } });
  });
});

describe('files/list_folder', () => {
  async function token(options: Parameters<typeof emulator>[0] = {}): Promise<{ emu: Awaited<ReturnType<typeof emulator>>; token: string }> {
    const emu = await emulator({ autoApprove: true, ...options });
    return { emu, token: (await obtainTokens(emu)).access_token };
  }

  const names = (json: unknown): string[] => (json as { entries: { name: string }[] }).entries.map((e) => e.name).sort();

  it('lists the app-folder root with path ""', async () => {
    const { emu, token: t } = await token();
    const answer = await rpc(emu, 'files/list_folder', t, { path: '' });
    expect(answer.status).toBe(200);
    expect(names(answer.json)).toEqual(['data', 'inbox']);
    const body = answer.json as { entries: Record<string, unknown>[]; cursor: string; has_more: boolean };
    expect(body.has_more).toBe(false);
    expect(body.cursor).toEqual(expect.any(String));
    expect(body.entries[0]).toMatchObject({ '.tag': 'folder', path_lower: '/data', path_display: '/data' });
  });

  it('lists a subfolder, case-insensitively, with file metadata', async () => {
    const { emu, token: t } = await token();
    const answer = await rpc(emu, 'files/list_folder', t, { path: '/DATA' });
    expect(answer.status).toBe(200);
    expect(names(answer.json)).toEqual(['archive', 'customers.csv', 'meeting-notes.docx', 'quarterly-report.pdf']);
    const file = (answer.json as { entries: Record<string, unknown>[] }).entries.find((e) => e.name === 'customers.csv');
    expect(file).toMatchObject({ '.tag': 'file', path_lower: '/data/customers.csv', is_downloadable: true });
    expect(file?.size).toEqual(expect.any(Number));
    expect(String(file?.id)).toMatch(/^id:/);
  });

  it('lists recursively', async () => {
    const { emu, token: t } = await token();
    const answer = await rpc(emu, 'files/list_folder', t, { path: '/data', recursive: true });
    expect(names(answer.json)).toContain('2023-summary.pdf');
    expect((await rpc(emu, 'files/list_folder', t, { path: '/data', recursive: false })).text).not.toContain('2023-summary.pdf');
  });

  it('an empty folder has no entries', async () => {
    const { emu, token: t } = await token();
    expect(names((await rpc(emu, 'files/list_folder', t, { path: '/inbox' })).json)).toEqual([]);
  });

  it('lists the folders of the app the token was issued to', async () => {
    const app: EmulatorApp = { ...DEFAULT_APP, folders: { '/reports/2025': ['q1.pdf'] } };
    const { emu, token: t } = await token({ apps: [app] });
    expect(names((await rpc(emu, 'files/list_folder', t, { path: '' })).json)).toEqual(['reports']);
    expect(names((await rpc(emu, 'files/list_folder', t, { path: '/reports/2025' })).json)).toEqual(['q1.pdf']);
  });

  it('"/" is a plain-text 400 asking for the empty string', async () => {
    const { emu, token: t } = await token();
    const answer = await rpc(emu, 'files/list_folder', t, { path: '/' });
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(answer.text).toBe('Error in call to API function "files/list_folder": request body: path: Specify the root folder as an empty string rather than as "/".');
  });

  it('a missing folder is a 409 path/not_found', async () => {
    const { emu, token: t } = await token();
    const answer = await rpc(emu, 'files/list_folder', t, { path: '/nope' });
    expect(answer.status).toBe(409);
    expect(answer.json).toEqual({ error_summary: 'path/not_found/..', error: { '.tag': 'path', path: { '.tag': 'not_found' } } });
  });

  it('a file is a 409 path/not_folder', async () => {
    const { emu, token: t } = await token();
    const answer = await rpc(emu, 'files/list_folder', t, { path: '/data/customers.csv' });
    expect(answer.status).toBe(409);
    expect((answer.json as { error: { path: { '.tag': string } } }).error.path['.tag']).toBe('not_folder');
  });

  it('refuses bad arguments with plain-text 400s', async () => {
    const { emu, token: t } = await token();
    const cases: [unknown, RegExp][] = [
      [{ path: 'data' }, /path: 'data' did not match pattern/],
      [{}, /missing required field 'path'/],
      [{ path: 5 }, /path: expected string, got integer/],
      [{ path: '/data', recursive: 'yes' }, /recursive: expected boolean, got string/],
      ['{not json', /could not decode input as JSON/],
      [[1], /expected object, got list/],
    ];
    for (const [body, text] of cases) {
      const answer = await rpc(emu, 'files/list_folder', t, body);
      expect(answer.status, String(text)).toBe(400);
      expect(answer.text).toMatch(text);
    }
  });

  it('needs a JSON content type', async () => {
    const { emu, token: t } = await token();
    const answer = await rpc(emu, 'files/list_folder', t, 'path=', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(answer.status).toBe(400);
    expect(answer.text).toMatch(/Bad HTTP "Content-Type" header: "application\/x-www-form-urlencoded"/);
    expect((await rpc(emu, 'files/list_folder', t, '{"path":""}', { 'content-type': 'application/json; charset=utf-8' })).status).toBe(200);
  });

  it('needs files.metadata.read', async () => {
    const { emu } = await token();
    const narrow = (await obtainTokens(emu, { scope: 'account_info.read files.content.read' })).access_token;
    const answer = await rpc(emu, 'files/list_folder', narrow, { path: '' });
    expect(answer.status).toBe(401);
    expect(answer.json).toEqual({ error_summary: 'missing_scope/..', error: { '.tag': 'missing_scope', required_scope: 'files.metadata.read' } });
  });
});

describe('auth/token/revoke', () => {
  it('revokes the grant: the refresh token and every access token of it', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const renewed = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }, { authorization: basicAuth() });
    const second = String(renewed.json?.access_token);
    const other = await obtainTokens(emu);

    const answer = await rpc(emu, 'auth/token/revoke', second);
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('null');
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);

    expect((await rpc(emu, 'users/get_current_account', tokens.access_token)).json).toEqual(INVALID_TOKEN);
    expect((await rpc(emu, 'users/get_current_account', second)).json).toEqual(INVALID_TOKEN);
    const refresh = await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }, { authorization: basicAuth() });
    expect(refresh.json).toEqual({ error: 'invalid_grant', error_description: 'refresh token is invalid or revoked' });
    expect((await rpc(emu, 'users/get_current_account', other.access_token)).status).toBe(200);
    expect([...emu.state.grants.values()].filter((g) => g.revokedAt !== null)).toHaveLength(1);
  });

  it('a revoked token cannot revoke again, and an expired one cannot revoke at all', async () => {
    const clock = manualClock();
    const emu = await emulator({ autoApprove: true, now: clock.now });
    const tokens = await obtainTokens(emu);
    expect((await rpc(emu, 'auth/token/revoke', tokens.access_token)).status).toBe(200);
    expect((await rpc(emu, 'auth/token/revoke', tokens.access_token)).json).toEqual(INVALID_TOKEN);
    const later = await obtainTokens(emu);
    clock.advance(14_400_000);
    expect((await rpc(emu, 'auth/token/revoke', later.access_token)).json).toEqual(EXPIRED_TOKEN);
  });
});

it('an unknown v2 route is a plain-text 404', async () => {
  const emu = await emulator();
  const res = await fetch(`${emu.apiUrl}/2/files/list_folder/continue`, { method: 'POST' });
  expect(res.status).toBe(404);
  expect(await res.text()).toBe('Unknown API function: "files/list_folder/continue"');
});
