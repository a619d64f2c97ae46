import { describe, expect, it } from 'vitest';
import { REDIRECT, approvedCode, basicAuth, call, emulator, obtainTokens, postToken, rpc } from './helpers.js';

describe('fault injection', () => {
  it('500 on the service answers like Starlette, then the rule runs out', async () => {
    const emu = await emulator({ faults: [{ route: 'sources', status: 500, times: 1 }] });
    const failed = await call(emu, 'GET', '/api/v1/sources/');
    expect(failed.status).toBe(500);
    expect(failed.text).toBe('Internal Server Error');
    expect(failed.headers.get('content-type')).toMatch(/^text\/plain/);
    expect((await call(emu, 'GET', '/api/v1/sources/')).status).toBe(200);
    expect(emu.state.requests.map((r) => [r.route, r.status])).toEqual([['sources', 500], ['sources', 200]]);
  });

  it('applies only to its route', async () => {
    const emu = await emulator({ faults: [{ route: 'workflows', status: 503 }] });
    expect((await call(emu, 'GET', '/api/v1/sources/')).status).toBe(200);
    const failed = await call(emu, 'GET', '/api/v1/workflows/');
    expect(failed.status).toBe(503);
    expect(failed.body).toEqual({ detail: 'Service Unavailable' });
  });

  it('fails before the route is handled: nothing is created', async () => {
    const emu = await emulator({ faults: [{ route: 'sources', status: 500 }] });
    await call(emu, 'POST', '/api/v1/sources/', { body: { name: 'x', type: 'dropbox', config: {} } });
    expect(emu.state.workspaces.get('default')?.sources.size).toBe(0);
  });

  it('429 on the token endpoint has Retry-After and an empty body, and does not consume the code', async () => {
    const emu = await emulator({ autoApprove: true, faults: [{ route: 'token', status: 429, retryAfterSeconds: 7, times: 1 }] });
    const code = await approvedCode(emu);
    const form = { code, grant_type: 'authorization_code', redirect_uri: REDIRECT };
    const limited = await postToken(emu, form, { authorization: basicAuth() });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(limited.text).toBe('');
    expect((await postToken(emu, form, { authorization: basicAuth() })).status).toBe(200);
  });

  it('429 on a v2 route has Retry-After (1 by default) and the too_many_requests JSON', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    emu.setFaults([{ route: 'list_folder', status: 429 }]);
    const answer = await rpc(emu, 'files/list_folder', tokens.access_token, { path: '' });
    expect(answer.status).toBe(429);
    expect(answer.headers.get('retry-after')).toBe('1');
    expect(answer.json).toEqual({ error_summary: 'too_many_requests/.', error: { reason: { '.tag': 'too_many_requests' }, retry_after: 1 } });
  });

  it('500 on the token endpoint carries Dropbox\'s server-error JSON', async () => {
    const emu = await emulator({ faults: [{ route: 'token', status: 500 }] });
    const answer = await postToken(emu, { grant_type: 'refresh_token', refresh_token: 'x' }, { authorization: basicAuth() });
    expect(answer.status).toBe(500);
    expect(answer.json).toEqual({ error: 'The server has either erred or is incapable of performing the requested operation.' });
  });

  it('a fault on the authorize page is an HTML error page', async () => {
    const emu = await emulator({ faults: [{ route: 'authorize', status: 503, retryAfterSeconds: 2 }] });
    const res = await fetch(`${emu.authorizeUrl}?client_id=x`);
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(await res.text()).toContain('Error (503)');
  });

  it('latency delays the answer, and then the request is handled normally', async () => {
    const emu = await emulator({ faults: [{ route: 'sources', latencyMs: 150 }] });
    const started = performance.now();
    const answer = await call(emu, 'GET', '/api/v1/sources/');
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect(answer.status).toBe(200);
  });

  it('latency and a status together: delayed, then failed', async () => {
    const emu = await emulator({ faults: [{ route: 'workflows', latencyMs: 100, status: 500 }] });
    const started = performance.now();
    expect((await call(emu, 'GET', '/api/v1/workflows/')).status).toBe(500);
    expect(performance.now() - started).toBeGreaterThanOrEqual(90);
  });

  it('times counts down across rules; the first rule with a status answers', async () => {
    const emu = await emulator({
      faults: [
        { route: 'sources', status: 503, times: 2 },
        { route: '*', status: 500, times: 3 },
      ],
    });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await call(emu, 'GET', '/api/v1/sources/')).status);
    // Requests 1-2 match both rules (503 wins, both count down); request 3 meets the last `*` use.
    expect(statuses).toEqual([503, 503, 500, 200, 200]);
  });

  it('`*` matches every route', async () => {
    const emu = await emulator({ faults: [{ route: '*', status: 502 }] });
    expect((await call(emu, 'GET', '/api/v1/sources/')).status).toBe(502);
    expect((await rpc(emu, 'users/get_current_account', 'x')).status).toBe(502);
    expect((await fetch(`${emu.url}/elsewhere`)).status).toBe(502);
  });

  it('errorRate decides the share of matching requests that fail', async () => {
    const emu = await emulator({ faults: [{ route: 'sources', status: 500, errorRate: 0 }] });
    for (let i = 0; i < 20; i++) expect((await call(emu, 'GET', '/api/v1/sources/')).status).toBe(200);
    emu.setFaults([{ route: 'sources', status: 500, errorRate: 0.5 }]);
    let failures = 0;
    for (let i = 0; i < 100; i++) if ((await fetch(`${emu.url}/api/v1/sources/`, { headers: { 'service-api-key': 'k' } })).status === 500) failures++;
    // Binomial(100, 0.5): outside 20..80 has a probability below 1e-9.
    expect(failures).toBeGreaterThan(20);
    expect(failures).toBeLessThan(80);
  });

  it('errorRate follows the random source given in the options', async () => {
    let fill = 0;
    const random = (size: number): Buffer => Buffer.alloc(size, fill);
    const emu = await emulator({ random, seed: false, faults: [{ route: 'sources', status: 500, errorRate: 0.3 }] });
    const statuses: number[] = [];
    // A roll is the first four bytes read as a fraction: fill 0 -> 0, 76 -> 0.298, 77 -> 0.302, 255 -> 0.99.
    for (const value of [0, 76, 77, 255]) {
      fill = value;
      statuses.push((await call(emu, 'GET', '/api/v1/sources/')).status);
    }
    expect(statuses).toEqual([500, 500, 200, 200]);
  });

  it('setFaults replaces the rules; an empty list clears them', async () => {
    const emu = await emulator({ faults: [{ route: 'sources', status: 500 }] });
    emu.setFaults([{ route: 'workflows', status: 429, retryAfterSeconds: 3 }]);
    expect((await call(emu, 'GET', '/api/v1/sources/')).status).toBe(200);
    const limited = await call(emu, 'GET', '/api/v1/workflows/');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('3');
    emu.setFaults([]);
    expect((await call(emu, 'GET', '/api/v1/workflows/')).status).toBe(200);
  });

  it('refuses nonsensical rules', async () => {
    const emu = await emulator();
    expect(() => emu.setFaults([{ route: 'token', errorRate: 2 }])).toThrow(/errorRate/);
    expect(() => emu.setFaults([{ route: 'token', status: 200 }])).toThrow(/status/);
    expect(() => emu.setFaults([{ route: 'tokens' as 'token', status: 500 }])).toThrow(/unknown fault route/);
  });
});
