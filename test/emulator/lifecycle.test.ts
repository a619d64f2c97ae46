import { describe, expect, it } from 'vitest';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator } from '../../src/emulator/index.js';
import { validConfigs } from '../fixtures/source-configs.js';
import { freePort } from '../helpers/ports.mjs';
import { basicAuth, call, emulator, obtainTokens, postToken } from './helpers.js';


describe('startEmulator', () => {
  it('binds 127.0.0.1 on an ephemeral port and names its endpoints', async () => {
    const emu = await emulator();
    expect(emu.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(emu.options.port).toBe(Number(new URL(emu.url).port));
    expect(emu.options.port).toBeGreaterThan(0);
    expect(emu.authorizeUrl).toBe(`${emu.url}/oauth2/authorize`);
    expect(emu.tokenUrl).toBe(`${emu.url}/oauth2/token`);
    expect(emu.apiUrl).toBe(emu.url);
    expect(emu.serviceUrl).toBe(emu.url);
    expect(emu.options).toMatchObject({ apiKeyHeader: 'service-api-key', tokenLifetimeSeconds: 14_400, codeLifetimeSeconds: 300, autoApprove: false, seed: true });
  });

  it('binds a given port', async () => {
    const port = await freePort();
    const emu = await emulator({ port });
    expect(emu.url).toBe(`http://127.0.0.1:${port}`);
  });

  it('rejects when the port is taken', async () => {
    const first = await emulator();
    await expect(startEmulator({ port: first.options.port })).rejects.toThrow(/EADDRINUSE/);
  });

  it('close releases the port, is idempotent, and does not wait for keep-alive connections or pending delays', async () => {
    const emu = await startEmulator({ faults: [{ route: 'workflows', latencyMs: 60_000 }] });
    expect((await fetch(`${emu.url}/api/v1/sources/`, { headers: { 'service-api-key': DEFAULT_EMULATOR_API_KEY } })).status).toBe(200);
    const hanging = fetch(`${emu.url}/api/v1/workflows/`).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 20));
    const started = performance.now();
    await Promise.all([emu.close(), emu.close()]);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(await hanging).toBeInstanceOf(Error);
    await expect(fetch(`${emu.url}/api/v1/sources/`)).rejects.toThrow();
  });

  it('refuses an API key shared by two workspaces, a duplicated app key, and bad lifetimes', async () => {
    await expect(startEmulator({ workspaces: [{ name: 'a', apiKeys: ['k'] }, { name: 'b', apiKeys: ['k'] }] })).rejects.toThrow(/two workspaces/);
    await expect(startEmulator({ apps: [DEFAULT_APP, DEFAULT_APP] })).rejects.toThrow(/defined twice/);
    await expect(startEmulator({ tokenLifetimeSeconds: 0 })).rejects.toThrow(/tokenLifetimeSeconds/);
  });

  it('does not share state between instances, nor with the options object', async () => {
    const apps = [{ ...DEFAULT_APP, redirectUris: [...DEFAULT_APP.redirectUris] }];
    const a = await emulator({ apps });
    apps[0]?.redirectUris.push('http://127.0.0.1:1/x');
    expect(a.options.apps[0]?.redirectUris).toEqual(DEFAULT_APP.redirectUris);
    const b = await emulator();
    expect((await call(a, 'POST', '/api/v1/sources/', { body: { name: 'only-in-a', type: 's3', config: validConfigs.s3 } })).status).toBe(200);
    expect((await call(b, 'GET', '/api/v1/sources/')).body).toEqual([]);
    expect(a.seeded?.workflowId).not.toBe(b.seeded?.workflowId);
  });

  it('the default app is the documented one', () => {
    expect(DEFAULT_APP.redirectUris).toEqual(['http://127.0.0.1:53682/callback']);
    expect(DEFAULT_APP.scopes).toEqual(['account_info.read', 'files.content.read', 'files.metadata.read']);
    expect(Object.keys(DEFAULT_APP.folders ?? {})).toContain('/data');
    expect(Object.isFrozen(DEFAULT_APP)).toBe(true);
  });
});

describe('state and request log', () => {
  it('records route, method, path, status and time of every request, and no secret', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    await postToken(emu, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token ?? '' }, { authorization: basicAuth() });
    await call(emu, 'GET', '/api/v1/workflows/');
    expect(emu.state.requests.map((r) => [r.route, r.method, r.path, r.status])).toEqual([
      ['authorize', 'GET', '/oauth2/authorize', 302],
      ['token', 'POST', '/oauth2/token', 200],
      ['token', 'POST', '/oauth2/token', 200],
      ['workflows', 'GET', '/api/v1/workflows/', 200],
    ]);
    expect(emu.state.requests.every((r) => typeof r.at === 'number')).toBe(true);
    const log = JSON.stringify(emu.state.requests);
    for (const secret of [DEFAULT_APP.appSecret, tokens.refresh_token ?? '', tokens.access_token, DEFAULT_EMULATOR_API_KEY]) {
      expect(log).not.toContain(secret);
    }
  });

  it('exposes issued codes, grants and access tokens for inspection', async () => {
    const emu = await emulator({ autoApprove: true });
    const tokens = await obtainTokens(emu);
    expect([...emu.state.codes.values()].map((c) => c.used)).toEqual([true]);
    const grants = [...emu.state.grants.values()];
    expect(grants).toHaveLength(1);
    expect(grants[0]).toMatchObject({ appKey: DEFAULT_APP.appKey, refreshToken: tokens.refresh_token, revokedAt: null, publicClient: false });
    expect(emu.state.accessTokens.get(tokens.access_token)?.grantId).toBe(grants[0]?.id);
  });

  it('writes nothing to the console', async () => {
    const calls: unknown[] = [];
    const original = { log: console.log, error: console.error, warn: console.warn, info: console.info };
    for (const name of ['log', 'error', 'warn', 'info'] as const) console[name] = (...args: unknown[]) => calls.push(args);
    try {
      const emu = await emulator({ autoApprove: true });
      await obtainTokens(emu);
      await call(emu, 'POST', '/api/v1/sources/', { rawBody: '{' });
      await fetch(`${emu.url}/oauth2/token`, { method: 'POST', body: 'x'.repeat(2_000_000) });
    } finally {
      Object.assign(console, original);
    }
    expect(calls).toEqual([]);
  });
});
