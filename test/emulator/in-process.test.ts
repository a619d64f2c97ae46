// The emulator's in-process dispatcher: the Dropbox v2 API and the service answered within the caller's process
// as its server answers over HTTP (status, headers, body, the request log), while the token endpoint and any
// route a fault rule names still go over HTTP, where the faults act.
import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, type RunningEmulator } from '../../src/emulator/index.js';
import { post } from '../../src/net/post.js';
import { getCurrentAccount, listFolder } from '../../src/oauth/api.js';
import { ServiceClient } from '../../src/service/index.js';
import { basicAuth, emulator, obtainTokens } from './helpers.js';

/** One POST to the emulator, through its in-process dispatcher or (without) over HTTP, as syncauth sends it. */
async function call(emu: RunningEmulator, route: string, token: string | null, inProcess: boolean, body?: string) {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const answer = await post({
    url: new URL(`${emu.apiUrl}/${route}`),
    headers,
    ...(body !== undefined ? { body } : {}),
    peer: 'the Dropbox API',
    ...(inProcess ? { dispatcher: emu.dispatcher as unknown as Dispatcher } : {}),
  });
  const logged = emu.state.requests.at(-1);
  // A listing's cursor is drawn afresh for each answer.
  const text = answer.text.replace(/"cursor":"[^"]*"/, '"cursor":"…"');
  return { status: answer.status, type: answer.headers['content-type'], realm: answer.headers['www-authenticate'], text, logged: logged && { ...logged, at: 0 } };
}

describe('the emulator in-process', () => {
  it('answers the API routes as its server does, and logs them as the server does', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const cases: [string, string | null, string?][] = [
      ['2/users/get_current_account', tokens.access_token],
      ['2/users/get_current_account', 'sl.u.unknown-token-value-0000000000'],
      ['2/users/get_current_account', null],
      ['2/users/get_current_account', tokens.access_token, '{"not":"void"}'],
      ['2/files/list_folder', tokens.access_token, '{"path":""}'],
      ['2/no/such_route', tokens.access_token],
    ];
    for (const [route, token, body] of cases) {
      const overHttp = await call(emu, route, token, false, body);
      const inProcess = await call(emu, route, token, true, body);
      expect(inProcess, route).toEqual(overHttp);
    }
    // The daemon's own call, through the seam it takes.
    const account = await getCurrentAccount({ apiUrl: emu.apiUrl, accessToken: tokens.access_token, dispatcher: emu.dispatcher as unknown as Dispatcher });
    expect(account.accountId).toBe(emu.state.account.accountId);
    const listed = await listFolder({ apiUrl: emu.apiUrl, accessToken: tokens.access_token, path: '', dispatcher: emu.dispatcher as unknown as Dispatcher });
    expect(Array.isArray(listed.entries)).toBe(true);
    // No socket between: with the server closed, the API still answers in-process.
    await emu.close();
    expect((await call(emu, '2/users/get_current_account', tokens.access_token, true)).status).toBe(200);
  });

  it('answers the service as its server does: the same connectors made, found, changed and refused', async () => {
    const runs = [];
    for (const inProcess of [false, true]) {
      // An emulator each, so that each sees the same workspace.
      const emu = await emulator({ autoApprove: true });
      const tokens = await obtainTokens(emu);
      const client = new ServiceClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, ...(inProcess ? { dispatcher: emu.dispatcher as unknown as Dispatcher } : {}) });
      const made = await client.createSourceUntyped({ name: 'conn-p1', type: 'dropbox', config: { token: tokens.access_token, remote_url: 'dropbox://data', recursive: false } });
      const found = await client.findSourceByName('conn-p1', 'dropbox');
      const changed = await client.updateSourceUntyped(made.id, { token: `${tokens.access_token}`, remote_url: 'dropbox://data', recursive: true }, 'dropbox');
      const refused = await client.getSource('00000000-0000-4000-8000-000000000000').catch((error: unknown) => error);
      const logged = emu.state.requests.slice(-4).map((r) => ({ ...r, at: 0, path: r.path.replace(made.id, 'ID') }));
      const same = (value: unknown) =>
        JSON.parse(JSON.stringify(value).replaceAll(made.id, 'ID').replaceAll(tokens.access_token, 'TOKEN').replace(/"(created_at|updated_at)":"[^"]*"/g, '"$1":"T"'));
      runs.push({ made: same(made), found: same(found), changed: same(changed), refused: String(refused), logged });
      await client.close();
    }
    expect(runs[1]).toEqual(runs[0]);
  });

  it('sends a route a fault rule names over HTTP, where the fault answers', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    emu.setFaults([{ route: 'account', status: 503, times: 1 }]);
    expect((await call(emu, '2/users/get_current_account', tokens.access_token, true)).status).toBe(503);
    // The rule is spent: the next call is answered in-process again.
    expect((await call(emu, '2/users/get_current_account', tokens.access_token, true)).status).toBe(200);
  });

  it('sends the token endpoint over HTTP', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const answer = await post({
      url: new URL(emu.tokenUrl),
      headers: { authorization: basicAuth(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }).toString(),
      peer: "Dropbox's token endpoint",
      dispatcher: emu.dispatcher as unknown as Dispatcher,
    });
    expect(answer.status).toBe(200);
    expect(emu.state.requests.at(-1)).toMatchObject({ route: 'token', status: 200 });
  });
});
