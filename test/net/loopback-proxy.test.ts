// A proxy from the environment never sees a call to this machine, whatever the spelling of its address: the
// proxy would reach its own machine instead, and the tunnel it opens would carry the app secret and refresh
// token of a token request there. A real forward proxy on 127.0.0.1 records every request
// and answers CONNECT itself; a plain listener on 127.0.0.1 and [::1] records the calls that went direct.
// NO_PROXY keeps exempting the hosts it lists, in the spellings curl and Go accept.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isLoopback, noProxyMatches, proxyDispatcher } from '../../src/net/proxy.js';
import { post } from '../../src/oauth/http.js';
import { probeAuthorizePage } from '../../src/oauth/authorize.js';
import { Transport, resolveServiceEndpoint, DEFAULT_TIMEOUTS } from '../../src/service/http.js';

interface Recorder {
  /** `CONNECT host:port` and absolute-form `METHOD url` lines, in order. */
  seen: string[];
  url: string;
  close(): Promise<void>;
}

/** A forward proxy that forwards nothing: it records each request and refuses it. */
async function startProxy(): Promise<Recorder> {
  const seen: string[] = [];
  const server: Server = createHttpServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(502, { connection: 'close' }).end();
  });
  server.on('connect', (req, socket: Socket) => {
    seen.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    seen,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/**
 * The direct destination: one port on 127.0.0.1 and on [::1]. It counts connections; plain HTTP gets an empty
 * JSON answer, anything else (a TLS hello) is closed.
 */
async function startDirect(): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const handle = (socket: Socket): void => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.once('data', (chunk: Buffer) => {
      if (/^[A-Z]+ \//.test(chunk.toString('latin1'))) {
        socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}');
      } else {
        socket.destroy();
      }
    });
  };
  const v4: TcpServer = createTcpServer(handle);
  await new Promise<void>((resolve) => v4.listen(0, '127.0.0.1', resolve));
  const port = (v4.address() as AddressInfo).port;
  const v6: TcpServer = createTcpServer(handle);
  await new Promise<void>((resolve, reject) => {
    v6.once('error', reject);
    v6.listen(port, '::1', resolve);
  });
  const close = (server: TcpServer) => new Promise<void>((resolve) => server.close(() => resolve()));
  return {
    port,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await Promise.all([close(v4), close(v6)]);
    },
  };
}

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];
const saved = Object.fromEntries(PROXY_VARIABLES.map((name) => [name, process.env[name]]));

function setProxyEnvironment(values: Record<string, string>): void {
  for (const name of PROXY_VARIABLES) delete process.env[name];
  Object.assign(process.env, values);
}

afterEach(() => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

/** A token request as `syncauth token` sends it: the secret and refresh token in the body. */
async function tokenRequest(url: string): Promise<unknown> {
  try {
    return await post({
      url: new URL(url),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=refresh_token&refresh_token=RT-not-for-the-proxy&client_secret=SECRET-not-for-the-proxy',
      peer: "Dropbox's token endpoint",
      timeoutMs: 10_000,
    });
  } catch (err) {
    return err;
  }
}

// Spellings of this machine that the resolver answers for everywhere (literals, and localhost itself).
const RESOLVED = ['127.0.0.1', '127.1', '0x7f.1', '2130706433', 'LOCALHOST', 'localhost', '[::1]', '[0:0:0:0:0:0:0:1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '0.0.0.0', '[::]'];
// Names that are this machine by definition, though a resolver may not know them (this one does not).
const NAMED = ['localhost.', 'LOCALHOST.', 'api.localhost', 'api.localhost.'];

describe('loopback destinations never go to the proxy', () => {
  let proxy: Recorder;
  let direct: Awaited<ReturnType<typeof startDirect>>;
  beforeAll(async () => {
    proxy = await startProxy();
    direct = await startDirect();
  });
  afterAll(async () => {
    await proxy.close();
    await direct.close();
  });

  for (const scheme of ['https', 'http'] as const) {
    it(`${scheme}: every spelling of this machine is reached directly, with HTTPS_PROXY and HTTP_PROXY set`, async () => {
      setProxyEnvironment({ HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url });
      const reachedProxy: string[] = [];
      const missedDirect: string[] = [];
      for (const host of [...RESOLVED, ...NAMED]) {
        proxy.seen.length = 0;
        const before = direct.connections();
        await tokenRequest(`${scheme}://${host}:${direct.port}/oauth2/token`);
        if (proxy.seen.length > 0) reachedProxy.push(`${host}: ${proxy.seen.join(', ')}`);
        if (RESOLVED.includes(host) && direct.connections() === before) missedDirect.push(host);
      }
      expect(reachedProxy).toEqual([]);
      expect(missedDirect).toEqual([]);
    });
  }

  it('a plain-HTTP token request to a loopback spelling succeeds directly', async () => {
    setProxyEnvironment({ HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url });
    const answer = await tokenRequest(`http://[::ffff:127.0.0.1]:${direct.port}/oauth2/token`);
    expect(answer).toMatchObject({ status: 200, text: '{}' });
    expect(proxy.seen).toEqual([]);
  });

  it('the service transport and the authorize-page probe go direct too', async () => {
    setProxyEnvironment({ https_proxy: proxy.url, http_proxy: proxy.url });
    proxy.seen.length = 0;
    const before = direct.connections();
    const transport = new Transport({
      endpoint: resolveServiceEndpoint(`https://localhost.:${direct.port}/api/v1`),
      apiKey: 'KEY-not-for-the-proxy',
      apiKeyHeader: 'unstructured-api-key',
      userAgent: 'syncauth-test',
      timeouts: { ...DEFAULT_TIMEOUTS, totalMs: 10_000 },
      dispatcher: undefined,
    });
    await transport.send({ method: 'GET', path: '/sources/' }).catch((err: unknown) => err);
    await transport.close();
    await probeAuthorizePage(`https://[::ffff:127.0.0.1]:${direct.port}/oauth2/authorize`, { timeoutMs: 10_000 });
    expect(proxy.seen).toEqual([]);
    expect(direct.connections()).toBeGreaterThan(before);
  });

  it('a host elsewhere still goes through the proxy (undici tunnels plain http too)', async () => {
    setProxyEnvironment({ HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url });
    proxy.seen.length = 0;
    await tokenRequest('https://api.syncauth.test/oauth2/token');
    await tokenRequest('https://localhost.syncauth.test:8443/oauth2/token');
    await tokenRequest('https://[::2]:8443/oauth2/token');
    await tokenRequest('http://api.syncauth.test/oauth2/token');
    expect(proxy.seen).toEqual([
      'CONNECT api.syncauth.test:443',
      'CONNECT localhost.syncauth.test:8443',
      'CONNECT [::2]:8443',
      'CONNECT api.syncauth.test:80',
    ]);
  });

  it('NO_PROXY still exempts the hosts it lists, and only those', async () => {
    const exempt = async (noProxy: string, url: string): Promise<boolean> => {
      setProxyEnvironment({ HTTPS_PROXY: proxy.url, NO_PROXY: noProxy });
      proxy.seen.length = 0;
      await tokenRequest(url);
      return proxy.seen.length === 0;
    };
    expect(await exempt('api.syncauth.test', 'https://api.syncauth.test/t')).toBe(true);
    expect(await exempt('syncauth.test', 'https://api.syncauth.test/t')).toBe(true);
    expect(await exempt('.syncauth.test', 'https://api.syncauth.test./t')).toBe(true);
    expect(await exempt('other.test, *', 'https://api.syncauth.test/t')).toBe(true);
    expect(await exempt('10.0.0.0/8', 'https://10.1.2.3/t')).toBe(true);
    expect(await exempt('api.syncauth.test:8443', 'https://api.syncauth.test:8443/t')).toBe(true);

    expect(await exempt('api.syncauth.test:8443', 'https://api.syncauth.test/t')).toBe(false);
    expect(await exempt('syncauth.test', 'https://api.notsyncauth.test/t')).toBe(false);
    expect(await exempt('10.0.0.0/8', 'https://11.1.2.3/t')).toBe(false);
  });
});

describe('which hosts are this machine', () => {
  it.each([...RESOLVED, ...NAMED, 'Api.LocalHost', '127.0.0.2', '127.255.255.254', '[::ffff:127.9.9.9]'])('%s is', (host) => {
    expect(isLoopback(`https://${host}:1/`)).toBe(true);
  });

  it.each(['localhost.example', 'localhostx', 'mylocalhost', '128.0.0.1', '[::2]', '[::7f00:1]', '[::ffff:8.8.8.8]', '10.0.0.1', '[fe80::1]'])('%s is not', (host) => {
    expect(isLoopback(`https://${host}:1/`)).toBe(false);
  });

  it('none of them gets a proxy dispatcher; another host does', () => {
    const env = { HTTPS_PROXY: 'http://127.0.0.1:9' };
    for (const host of [...RESOLVED, ...NAMED]) expect(proxyDispatcher(`https://${host}/`, env)).toBeUndefined();
    expect(proxyDispatcher('https://api.syncauth.test/', env)).toBeDefined();
    expect(proxyDispatcher('https://api.syncauth.test/', {})).toBeUndefined();
  });
});

describe('NO_PROXY entries', () => {
  const exempts = (noProxy: string, url: string) => noProxyMatches(new URL(url), noProxy);

  it('a name exempts itself and the names under it, with or without a root dot, in any case', () => {
    expect(exempts('example.com', 'https://example.com/')).toBe(true);
    expect(exempts('example.com', 'https://api.example.com/')).toBe(true);
    expect(exempts('.example.com', 'https://api.example.com/')).toBe(true);
    expect(exempts('*.example.com', 'https://api.example.com/')).toBe(true);
    expect(exempts('example.com.', 'https://api.example.com/')).toBe(true);
    expect(exempts('example.com', 'https://API.Example.COM./')).toBe(true);
    expect(exempts('example.com', 'https://badexample.com/')).toBe(false);
    expect(exempts('api.example.com', 'https://example.com/')).toBe(false);
  });

  it('separators, a wildcard, ports', () => {
    expect(exempts('a.test,b.test', 'https://b.test/')).toBe(true);
    expect(exempts(' a.test  b.test ', 'https://b.test/')).toBe(true);
    expect(exempts('*', 'https://anything.test/')).toBe(true);
    expect(exempts('a.test:8443', 'https://a.test:8443/')).toBe(true);
    expect(exempts('a.test:443', 'https://a.test/')).toBe(true);
    expect(exempts('a.test:8443', 'https://a.test/')).toBe(false);
    expect(exempts('', 'https://a.test/')).toBe(false);
  });

  it('addresses and ranges, IPv6 with or without brackets', () => {
    expect(exempts('10.1.2.3', 'https://10.1.2.3/')).toBe(true);
    expect(exempts('10.0.0.0/8', 'https://10.200.0.1/')).toBe(true);
    expect(exempts('10.0.0.0/8', 'https://11.0.0.1/')).toBe(false);
    expect(exempts('fd00::1', 'https://[fd00::1]/')).toBe(true);
    expect(exempts('[fd00::1]', 'https://[fd00:0:0::1]/')).toBe(true);
    expect(exempts('[fd00::1]:8443', 'https://[fd00::1]:8443/')).toBe(true);
    expect(exempts('[fd00::1]:8443', 'https://[fd00::1]/')).toBe(false);
    expect(exempts('fd00::/8', 'https://[fd12::5]/')).toBe(true);
    expect(exempts('fd00::/8', 'https://[fe80::1]/')).toBe(false);
    expect(exempts('10.1.2.3', 'https://10.1.2.30/')).toBe(false);
  });
});
