// Corporate networks: the real CLI sends the service's and Dropbox's calls through the proxy HTTP_PROXY /
// HTTPS_PROXY name, except hosts NO_PROXY lists, and reaches loopback directly (every spelling of it is in
// test/net/loopback-proxy.test.ts). The emulator is addressed by a name only the test proxy knows (it maps
// every host to 127.0.0.1), so a call that skipped the proxy cannot reach it at all.
import { request as httpRequest, createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { runCli } from '../helpers/cli.js';
import { emulator, obtainGrant } from '../daemon/helpers.js';

const HOST = 'emulator.syncauth.test';

interface Proxy {
  url: string;
  /** `CONNECT host:port` targets and absolute-form request URLs, in order. */
  seen: string[];
  close(): Promise<void>;
}

/** A forward proxy on 127.0.0.1 that sends every request, whatever its host, to 127.0.0.1 at the same port. */
async function startProxy(): Promise<Proxy> {
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const target = new URL(req.url ?? '/');
    const upstream = httpRequest({ host: '127.0.0.1', port: target.port, path: `${target.pathname}${target.search}`, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connect', (req, socket, head) => {
    seen.push(`CONNECT ${req.url}`);
    const port = Number((req.url ?? '').split(':').pop());
    const upstream = connect(port, '127.0.0.1', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

describe('an HTTP proxy from the environment', () => {
  let proxy: Proxy;
  beforeAll(async () => {
    proxy = await startProxy();
  });
  afterAll(async () => {
    await proxy.close();
  });

  it('carries the service calls and the token renewal; NO_PROXY and loopback go direct', async () => {
    const emu = await emulator();
    const port = new URL(emu.url).port;
    const named = `http://${HOST}:${port}`;
    const service = { SYNCAUTH_BASE_URL: named, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY };

    proxy.seen.length = 0;
    const listed = await runCli(['source', 'list', '--json'], { env: { ...service, HTTP_PROXY: proxy.url } });
    expect(listed.stderr).toBe('');
    expect(listed.code).toBe(0);
    expect(proxy.seen.some((line) => line.includes(`${HOST}:${port}`))).toBe(true);

    // The same call, with the host exempted: it goes direct, where the name means nothing.
    proxy.seen.length = 0;
    const direct = await runCli(['source', 'list'], { env: { ...service, HTTP_PROXY: proxy.url, NO_PROXY: HOST } });
    expect(direct.code).not.toBe(0);
    expect(proxy.seen).toEqual([]);

    // Dropbox's token endpoint, for `syncauth token`, the lowercase variable too.
    const grant = await obtainGrant(emu);
    proxy.seen.length = 0;
    const token = await runCli(['token'], {
      env: {
        SYNCAUTH_STORE: 'env', SYNCAUTH_APP_KEY: grant.appKey, SYNCAUTH_APP_SECRET: grant.appSecret, SYNCAUTH_REFRESH_TOKEN: grant.refreshToken,
        SYNCAUTH_TOKEN_URL: `${named}/oauth2/token`, http_proxy: proxy.url,
      },
    });
    expect(token.stderr).toBe('');
    expect(emu.state.accessTokens.has(token.stdout.trim())).toBe(true);
    expect(proxy.seen.some((line) => line.includes(`${HOST}:${port}`))).toBe(true);

    // A loopback service is reached directly even with a proxy set.
    proxy.seen.length = 0;
    const loopback = await runCli(['source', 'list'], { env: { SYNCAUTH_BASE_URL: emu.url, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url } });
    expect(loopback.code).toBe(0);
    expect(proxy.seen).toEqual([]);

    // The token renewal, which carries the app secret and refresh token, to loopback spelled otherwise: an
    // IPv4-mapped address (reached directly, it answers), and localhost with its root dot.
    const secrets = { SYNCAUTH_STORE: 'env', SYNCAUTH_APP_KEY: grant.appKey, SYNCAUTH_APP_SECRET: grant.appSecret, SYNCAUTH_REFRESH_TOKEN: grant.refreshToken, HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url };
    proxy.seen.length = 0;
    const mapped = await runCli(['token'], { env: { ...secrets, SYNCAUTH_TOKEN_URL: `http://[::ffff:127.0.0.1]:${port}/oauth2/token` } });
    expect(mapped.stderr).toBe('');
    expect(emu.state.accessTokens.has(mapped.stdout.trim())).toBe(true);
    await runCli(['token'], { env: { ...secrets, SYNCAUTH_TOKEN_URL: `https://localhost.:${port}/oauth2/token` } });
    expect(proxy.seen).toEqual([]);
  }, 60_000);
});
