// A trickling answer (headers at once, the body dribbled out over a while) and the grant a token request named,
// which the request log keeps so that requests for one grant can be counted.
import { describe, expect, it } from 'vitest';
import { basicAuth, emulator, obtainTokens } from './helpers.js';

async function refresh(url: string, refreshToken: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basicAuth() },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken }).toString(),
  });
}

describe('a trickling answer', () => {
  it('sends the status and headers at once, then the whole body slowly', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    emu.setFaults([{ route: 'token', trickleMs: 800, times: 1 }]);
    const started = Date.now();
    const res = await refresh(emu.tokenUrl, tokens.refresh_token as string);
    const headersAfter = Date.now() - started;
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const chunks: Uint8Array[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
    }
    const bodyAfter = Date.now() - started;
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { access_token: string; expires_in: number };
    expect(headersAfter).toBeLessThan(400);
    expect(bodyAfter).toBeGreaterThanOrEqual(700);
    // Dribbled, not one write after a pause.
    expect(chunks.length).toBeGreaterThan(3);
    expect(emu.state.accessTokens.has(body.access_token)).toBe(true);
    // The rule ran out: the next answer is whole at once.
    const again = Date.now();
    await (await refresh(emu.tokenUrl, tokens.refresh_token as string)).json();
    expect(Date.now() - again).toBeLessThan(300);
  });

  it('trickles a fault status too, and refuses a negative trickle', async () => {
    const emu = await emulator();
    expect(() => emu.setFaults([{ route: 'token', trickleMs: -1 }])).toThrow(/trickleMs/);
    emu.setFaults([{ route: 'sources', status: 503, trickleMs: 400 }]);
    const started = Date.now();
    const res = await fetch(`${emu.url}/api/v1/sources/`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ detail: 'Service Unavailable' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
  });
});

describe('the request log of the token endpoint', () => {
  it('names the grant a refresh named, before and after it was revoked, and none for an unknown token', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    const grant = [...emu.state.grants.values()].find((g) => g.refreshToken === tokens.refresh_token);
    expect((await refresh(emu.tokenUrl, tokens.refresh_token as string)).status).toBe(200);
    emu.revokeGrant(tokens.refresh_token as string);
    expect((await refresh(emu.tokenUrl, tokens.refresh_token as string)).status).toBe(400);
    expect((await refresh(emu.tokenUrl, 'not-a-refresh-token')).status).toBe(400);
    const logged = emu.state.requests.filter((r) => r.route === 'token').slice(-3);
    expect(logged.map((r) => [r.status, r.grantId])).toEqual([[200, grant?.id], [400, grant?.id], [400, undefined]]);
  });
});
