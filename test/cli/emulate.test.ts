// `syncauth emulate` as a user runs it: it prints where it listens and how to point syncauth at it, answers
// on that address with the printed key, injects the faults asked for, accepts the redirect URIs it is given
// (the re-authorization page's callback), unlinks the app as the account's owner would, and stops cleanly on
// SIGTERM.
import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { createAuthorizationRequest, exchangeCode } from '../../src/oauth/index.js';
import { CLI, tempDir } from '../helpers/cli.js';

function startEmulate(args: string[]) {
  const child = spawn(process.execPath, [CLI, 'emulate', '--port', '0', ...args], { cwd: tempDir(), env: { PATH: process.env.PATH ?? '' } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const ready = new Promise<{ url: string; key: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address printed: ${stdout}${stderr}`)), 10_000);
    child.stdout.on('data', () => {
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1];
      const key = /SYNCAUTH_API_KEY=(\S+)/.exec(stdout)?.[1];
      if (url && key) {
        clearTimeout(timer);
        resolve({ url, key });
      }
    });
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, ready, exited, output: () => ({ stdout, stderr }) };
}

describe('syncauth emulate', () => {
  it('serves the printed address with the printed key and stops on SIGTERM with exit 0', async () => {
    const emulate = startEmulate([]);
    const { url, key } = await emulate.ready;
    const ok = await fetch(`${url}/api/v1/workflows/`, { headers: { 'service-api-key': key } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as unknown[]).length).toBe(1);
    const refused = await fetch(`${url}/api/v1/workflows/`);
    expect(refused.status).toBe(401);
    expect(emulate.output().stdout).toMatch(/SYNCAUTH_TOKEN_URL=http:\/\/127\.0\.0\.1:\d+\/oauth2\/token/);
    emulate.child.kill('SIGTERM');
    expect(await emulate.exited).toBe(0);
    expect(emulate.output().stderr).toContain('emulator stopped');
  });

  it('injects the faults given with --fault', async () => {
    const emulate = startEmulate(['--fault', 'sources:503', '--fault', 'token:429:1:7']);
    const { url, key } = await emulate.ready;
    try {
      const sources = await fetch(`${url}/api/v1/sources/`, { headers: { 'service-api-key': key } });
      expect(sources.status).toBe(503);
      const workflows = await fetch(`${url}/api/v1/workflows/`, { headers: { 'service-api-key': key } });
      expect(workflows.status).toBe(200);
      const token = await fetch(`${url}/oauth2/token`, { method: 'POST' });
      expect(token.status).toBe(429);
      expect(token.headers.get('retry-after')).toBe('7');
    } finally {
      emulate.child.kill('SIGTERM');
      await emulate.exited;
    }
  });

  it('accepts the redirect URIs given with --redirect-uri, and unlinks the app as its owner would: its grants meet invalid_grant', async () => {
    const callback = 'http://127.0.0.1:8443/reauthorize/callback';
    const emulate = startEmulate(['--auto-approve', '--redirect-uri', callback]);
    const { url } = await emulate.ready;
    try {
      // Printed after the address, maybe in a later chunk.
      await expect.poll(() => emulate.output().stdout, { timeout: 10_000 }).toContain('Unlink the app');
      expect(emulate.output().stdout).toContain(`Registered redirect URIs: ${DEFAULT_APP.redirectUris[0]}, ${callback};`);
      expect(emulate.output().stdout).toContain(`Unlink the app (revoke its grants) at ${url}/account/connected_apps`);
      const authorizeUrl = `${url}/oauth2/authorize`;
      // The page's callback is registered: Dropbox sends the browser back to it with a code.
      const request = createAuthorizationRequest({ authorizeUrl, appKey: DEFAULT_APP.appKey, redirectUri: callback });
      const approved = await fetch(request.url, { redirect: 'manual' });
      expect(approved.status).toBe(302);
      const location = new URL(approved.headers.get('location') as string);
      expect(`${location.origin}${location.pathname}`).toBe(callback);
      // Any other is not.
      const other = createAuthorizationRequest({ authorizeUrl, appKey: DEFAULT_APP.appKey, redirectUri: 'http://127.0.0.1:8444/reauthorize/callback' });
      const refused = await fetch(other.url, { redirect: 'manual' });
      expect(refused.status).toBe(400);
      expect(await refused.text()).toContain('Invalid redirect_uri');

      const tokens = await exchangeCode({
        tokenUrl: `${url}/oauth2/token`, app: DEFAULT_APP, code: location.searchParams.get('code') as string, redirectUri: callback, codeVerifier: request.codeVerifier,
      });
      const renew = () => fetch(`${url}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refreshToken, client_id: DEFAULT_APP.appKey, client_secret: DEFAULT_APP.appSecret }).toString(),
      });
      expect((await renew()).status).toBe(200);
      const listed = await (await fetch(`${url}/account/connected_apps`)).text();
      expect(listed).toContain(`<span class="app">${DEFAULT_APP.name}</span>`);

      // The line of --help and docs/commands.md, as printed.
      const curl = spawnSync('sh', ['-c', `curl -s -X POST -d app_key=${DEFAULT_APP.appKey} ${url}/account/connected_apps/disconnect`], { encoding: 'utf8' });
      expect(curl.status, curl.stderr).toBe(0);
      expect(JSON.parse(curl.stdout)).toMatchObject({ app_key: DEFAULT_APP.appKey, grants_revoked: 1 });
      const after = await renew();
      expect(after.status).toBe(400);
      expect(await after.json()).toMatchObject({ error: 'invalid_grant' });
      expect(await (await fetch(`${url}/account/connected_apps`)).text()).toContain('No app has access');
      // An unknown app key is named, not ignored.
      const unknown = await fetch(`${url}/account/connected_apps/disconnect`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'app_key=nosuch' });
      expect(unknown.status).toBe(400);
    } finally {
      emulate.child.kill('SIGTERM');
      await emulate.exited;
    }
  });

  it('--help says how to add a redirect URI and how to unlink the app', () => {
    const help = spawnSync(process.execPath, [CLI, 'emulate', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--redirect-uri <url>');
    expect(help.stdout).toContain('URL/account/connected_apps/disconnect');
    expect(help.stdout).toContain('/2/auth/token/revoke');
  });

  it('refuses a --redirect-uri that is not an absolute http(s) URL, naming it, and starts nothing', async () => {
    const emulate = startEmulate(['--redirect-uri', 'localhost:8443/cb', '--redirect-uri', 'ftp://127.0.0.1/cb']);
    expect(await emulate.exited).toBe(2);
    expect(emulate.output().stderr).toContain('--redirect-uri localhost:8443/cb');
    expect(emulate.output().stderr).toContain('--redirect-uri ftp://127.0.0.1/cb: must be an http or https URL');
    expect(emulate.output().stdout).not.toContain('listening');
  });
});
