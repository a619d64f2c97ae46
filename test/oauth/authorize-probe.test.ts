// The question setup asks Dropbox's authorize page before anyone is sent there: an unknown app key and an
// unregistered redirect URI are recognised by Dropbox's wording; anything else lets the flow go on.
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { probeAuthorizePage } from '../../src/oauth/index.js';

const servers: Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => {
    s.closeAllConnections();
    s.close(() => resolve());
  })));
});

/** A host answering every request with `status` and `body` (or never, with `hang`). */
async function host(status: number, body: string, extra: { hang?: boolean; headers?: Record<string, string> } = {}): Promise<string> {
  const server = createServer((_req, res) => {
    if (extra.hang) return;
    res.writeHead(status, { 'content-type': 'text/html', ...extra.headers }).end(body);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/oauth2/authorize?client_id=k`;
}

// Dropbox's error page as users quote it (dropbox-oauth.md §1.3), with the quotes escaped as HTML has them.
const DROPBOX_400 = (details: string) =>
  `<h1>Error (400)</h1><p>It seems the app you were using submitted a bad request.</p><h2>More details for developers</h2><p>${details}</p>`;

describe('probeAuthorizePage', () => {
  it('recognises an unknown client_id', async () => {
    const url = await host(400, DROPBOX_400('Invalid client_id: &quot;abc&quot;'));
    await expect(probeAuthorizePage(url)).resolves.toEqual({ kind: 'unknown-app-key' });
  });

  it('recognises an unregistered redirect_uri', async () => {
    const url = await host(400, DROPBOX_400("Invalid redirect_uri. It must exactly match one of the redirect URIs you've pre-configured for your app (including the path)."));
    await expect(probeAuthorizePage(url)).resolves.toEqual({ kind: 'unregistered-redirect-uri' });
  });

  it('takes a sign-in page, a redirect and an unknown error page as accepted', async () => {
    await expect(probeAuthorizePage(await host(200, '<h1>Sign in</h1>'))).resolves.toEqual({ kind: 'accepted' });
    await expect(probeAuthorizePage(await host(302, '', { headers: { location: 'http://127.0.0.1:1/login' } }))).resolves.toEqual({ kind: 'accepted' });
    await expect(probeAuthorizePage(await host(400, DROPBOX_400('Something else.')))).resolves.toEqual({ kind: 'accepted' });
    // The wording on another status is not the error page.
    await expect(probeAuthorizePage(await host(200, 'Invalid client_id'))).resolves.toEqual({ kind: 'accepted' });
  });

  it('a host that does not answer in time is unreachable, within the deadline', async () => {
    const url = await host(200, '', { hang: true });
    const started = performance.now();
    const verdict = await probeAuthorizePage(url, { timeoutMs: 300 });
    expect(verdict).toEqual({ kind: 'unreachable', reason: 'no answer in time' });
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('the caller\'s abort is not a verdict: it is thrown', async () => {
    const url = await host(200, '', { hang: true });
    const controller = new AbortController();
    const probing = probeAuthorizePage(url, { signal: controller.signal, timeoutMs: 10_000 });
    controller.abort(new Error('stopped'));
    await expect(probing).rejects.toThrow('stopped');
  });
});
