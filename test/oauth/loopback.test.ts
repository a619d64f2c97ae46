import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { OAuthError, startLoopbackServer } from '../../src/oauth/index.js';
import { escapeHtml } from '../../src/oauth/pages.js';
import type { LoopbackOptions, LoopbackServer } from '../../src/oauth/index.js';
import { freePort, rawRequest } from './helpers.js';

const STATE = 'state-Zq8Yb3Kf0VxWm2Lr4Tn6';
const open: LoopbackServer[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function start(extra: Partial<LoopbackOptions> = {}, host = '127.0.0.1') {
  const port = await freePort();
  const redirectUri = `http://${host}:${port}/callback`;
  const server = await startLoopbackServer({ redirectUri, state: STATE, ...extra });
  open.push(server);
  return { server, port, redirectUri };
}

/** Settles within the test or reports that it has not. */
function peek<T>(promise: Promise<T>): Promise<'pending' | { value: T } | { error: unknown }> {
  return Promise.race([
    promise.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), 30)),
  ]);
}

async function rejection(promise: Promise<unknown>): Promise<OAuthError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OAuthError);
  return err as OAuthError;
}

describe('startLoopbackServer', () => {
  it('accepts the callback with the right state and shows the success page', async () => {
    const { server, port } = await start();
    expect(server.port).toBe(port);
    const res = await rawRequest(port, `/callback?code=the-code&state=${STATE}`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html; charset=utf-8/);
    expect(res.body).toContain('syncauth is authorized; you can close this tab');
    // The callback URL holds the code: no Referer may carry it anywhere.
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    expect(res.headers['x-powered-by']).toBeUndefined();
    await expect(server.result).resolves.toEqual({ code: 'the-code' });
  });

  it('answers a second callback with 410 and keeps the first result', async () => {
    const { server, port } = await start();
    await rawRequest(port, `/callback?code=first&state=${STATE}`);
    const again = await rawRequest(port, `/callback?code=second&state=${STATE}`);
    expect(again.status).toBe(410);
    expect(again.body).toContain('already finished');
    await expect(server.result).resolves.toEqual({ code: 'first' });
  });

  it('answers other paths with 404 and keeps waiting', async () => {
    const { server, port } = await start();
    for (const target of ['/', '/favicon.ico', '/callback/', '/Callback', `/callbackx?code=x&state=${STATE}`, `//callback?code=x&state=${STATE}`]) {
      const res = await rawRequest(port, target);
      expect(res.status, target).toBe(404);
    }
    expect(await peek(server.result)).toBe('pending');
    await rawRequest(port, `/callback?code=ok&state=${STATE}`);
    await expect(server.result).resolves.toEqual({ code: 'ok' });
  });

  it('answers a missing or wrong state with 400 and keeps waiting', async () => {
    const { server, port } = await start();
    for (const query of ['code=x', 'code=x&state=', 'code=x&state=other', `code=x&state=${STATE}x`, 'error=access_denied&state=other', `state=${STATE}`]) {
      const res = await rawRequest(port, `/callback?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body).toContain('still waiting');
    }
    expect(await peek(server.result)).toBe('pending');
    await rawRequest(port, `/callback?code=ok&state=${STATE}`);
    await expect(server.result).resolves.toEqual({ code: 'ok' });
  });

  it('refuses a request whose Host is not the redirect URI host (DNS rebinding) and keeps waiting', async () => {
    const { server, port } = await start();
    for (const host of ['evil.example:' + port, `localhost:${port}`, '127.0.0.1', `127.0.0.1:${port + 1}`, `127.0.0.1:${port}.evil.example`]) {
      const res = await rawRequest(port, `/callback?code=x&state=${STATE}`, { host });
      expect(res.status, host).toBe(421);
    }
    expect(await peek(server.result)).toBe('pending');
  });

  it('answers methods other than GET with 405 and keeps waiting', async () => {
    const { server, port } = await start();
    for (const method of ['POST', 'PUT', 'DELETE', 'HEAD']) {
      const res = await rawRequest(port, `/callback?code=x&state=${STATE}`, { method });
      expect(res.status, method).toBe(405);
      expect(res.headers.allow).toBe('GET');
    }
    expect(await peek(server.result)).toBe('pending');
  });

  it('rejects with OAUTH_ACCESS_DENIED when the user clicks Deny, and shows a failure page', async () => {
    const { server, port } = await start();
    const description = encodeURIComponent('The user chose not to give your app access to their Dropbox account.');
    const res = await rawRequest(port, `/callback?error=access_denied&error_description=${description}&state=${STATE}`);
    expect(res.status).toBe(403);
    expect(res.body).toContain('syncauth was not authorized');
    expect(res.body).toContain('you clicked Deny');
    const err = await rejection(server.result);
    expect(err.code).toBe('OAUTH_ACCESS_DENIED');
    expect(err.kind).toBe('denied');
    expect(err.message).toContain('you clicked Deny');
    const later = await rawRequest(port, `/callback?code=x&state=${STATE}`);
    expect(later.status).toBe(410);
  });

  it('rejects on any other error and escapes what Dropbox sent into the page', async () => {
    const { server, port } = await start();
    const nasty = '<script>alert("x")</script>&\'';
    const res = await rawRequest(
      port,
      `/callback?error=invalid_scope&error_description=${encodeURIComponent(nasty)}&state=${STATE}`,
    );
    expect(res.status).toBe(400);
    expect(res.body).not.toContain('<script>');
    expect(res.body).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;');
    const err = await rejection(server.result);
    expect(err.code).toBe('OAUTH_INVALID_SCOPE');
    expect(err.errorDescription).toBe(nasty);
  });

  it('escapes an unknown error code too', async () => {
    const { server, port } = await start();
    const res = await rawRequest(port, `/callback?error=${encodeURIComponent('<img src=x onerror=alert(1)>')}&state=${STATE}`);
    expect(res.body).not.toContain('<img');
    expect((await rejection(server.result)).code).toBe('OAUTH_PROVIDER_ERROR');
  });

  it('rejects with OAUTH_TIMEOUT after timeoutMs and stops listening', async () => {
    const { server, port } = await start({ timeoutMs: 40 });
    const err = await rejection(server.result);
    expect(err.code).toBe('OAUTH_TIMEOUT');
    expect(err.kind).toBe('transient');
    expect(err.message).toContain('40 ms');
    await server.close();
    await expect(rawRequest(port, `/callback?code=x&state=${STATE}`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('rejects with OAUTH_ABORTED and closes when the signal aborts', async () => {
    const controller = new AbortController();
    const { server, port } = await start({ signal: controller.signal });
    controller.abort(new Error('user pressed Ctrl-C'));
    const err = await rejection(server.result);
    expect(err.code).toBe('OAUTH_ABORTED');
    await server.close();
    await expect(rawRequest(port, '/callback')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('refuses to start with an already aborted signal', async () => {
    const port = await freePort();
    const err = await rejection(
      startLoopbackServer({ redirectUri: `http://127.0.0.1:${port}/callback`, state: STATE, signal: AbortSignal.abort() }),
    );
    expect(err.code).toBe('OAUTH_ABORTED');
  });

  it('rejects a pending result when closed early, and close() can be called twice', async () => {
    const { server } = await start();
    await server.close();
    await server.close();
    expect((await rejection(server.result)).code).toBe('OAUTH_ABORTED');
  });

  it('fails with OAUTH_PORT_IN_USE naming the port and the setting to change', async () => {
    const port = await freePort();
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen({ host: '127.0.0.1', port }, resolve));
    try {
      const redirectUri = `http://127.0.0.1:${port}/callback`;
      const err = await rejection(startLoopbackServer({ redirectUri, state: STATE }));
      expect(err.code).toBe('OAUTH_PORT_IN_USE');
      expect(err.kind).toBe('configuration');
      expect(err.exitCode).toBe(1);
      expect(err.message).toContain(String(port));
      expect(err.message).toContain(redirectUri);
      expect(err.hint).toContain('SYNCAUTH_REDIRECT_URI');
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });

  it('with a localhost redirect URI, listens on 127.0.0.1 and accepts only Host localhost:PORT', async () => {
    const { server, port } = await start({}, 'localhost');
    const wrong = await rawRequest(port, `/callback?code=x&state=${STATE}`, { host: `127.0.0.1:${port}` });
    expect(wrong.status).toBe(421);
    const right = await rawRequest(port, `/callback?code=x&state=${STATE}`, { host: `localhost:${port}` });
    expect(right.status).toBe(200);
    await expect(server.result).resolves.toEqual({ code: 'x' });
  });

  it('accepts the Host header in any letter case', async () => {
    const { server, port } = await start({}, 'localhost');
    const res = await rawRequest(port, `/callback?code=x&state=${STATE}`, { host: `LocalHost:${port}` });
    expect(res.status).toBe(200);
    await expect(server.result).resolves.toEqual({ code: 'x' });
  });

  it.each([
    ['https://127.0.0.1:8080/callback', 'http://'],
    ['http://0.0.0.0:8080/callback', '127.0.0.1 or localhost'],
    ['http://example.com:8080/callback', '127.0.0.1 or localhost'],
    ['http://[::1]:8080/callback', '127.0.0.1 or localhost'],
    ['http://127.0.0.1:0/callback', 'fixed port'],
    ['not a url', 'must be a URL'],
  ])('refuses the redirect URI %s', async (redirectUri, words) => {
    const err = await startLoopbackServer({ redirectUri, state: STATE }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).message).toContain(words);
    expect((err as ValidationError).hint).toContain('SYNCAUTH_REDIRECT_URI');
  });

  it('refuses an empty state', async () => {
    const port = await freePort();
    await expect(startLoopbackServer({ redirectUri: `http://127.0.0.1:${port}/cb`, state: '' })).rejects.toBeInstanceOf(ValidationError);
  });
});

describe('escapeHtml', () => {
  it('escapes the five HTML-significant characters', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });
});
