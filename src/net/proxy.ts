// Corporate networks: every outbound call (the service, Dropbox's token, API and revoke endpoints) goes
// through the proxy named by HTTPS_PROXY / HTTP_PROXY (either case), except hosts NO_PROXY lists. undici's
// EnvHttpProxyAgent carries the proxied calls; one agent is shared by the process. Without a proxy, or for a
// host that goes direct, the callers keep their own direct pools.
//
// Two kinds of host always go direct, decided here before any agent sees them:
// - this machine, in every spelling (as Go's net/http does): a local emulator or service is never sent to a
//   proxy, which would reach its own machine instead and would see the secrets the call carries;
// - a host NO_PROXY lists, matched as curl and Go match it, and more forgivingly than undici alone: a name
//   with or without its root dot, an IPv6 literal with or without brackets, and address ranges (10.0.0.0/8).
import { BlockList, isIP } from 'node:net';
import { createRequire } from 'node:module';
import type * as Undici from 'undici';
import type { Dispatcher } from 'undici';

// undici is loaded only when a proxy is in use: most processes never need it, and loading it is costly.
const requireUndici = (): typeof Undici => createRequire(import.meta.url)('undici') as typeof Undici;

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy'] as const;

let shared: { key: string; agent: Dispatcher } | undefined;

/** Whether the environment names a proxy. */
export function proxyConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return PROXY_VARIABLES.some((name) => (env[name] ?? '').trim() !== '');
}

/**
 * The dispatcher that honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY for `origin`, or undefined when the call
 * goes direct: no proxy is set, the host is this machine, or NO_PROXY lists it. Shared and never closed by its
 * users: it lives as long as the process.
 */
export function proxyDispatcher(origin: string | URL, env: NodeJS.ProcessEnv = process.env): Dispatcher | undefined {
  if (!proxyConfigured(env)) return undefined;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return undefined;
  }
  const pick = (upper: string, lower: string): string | undefined => env[upper] || env[lower] || undefined;
  const noProxy = pick('NO_PROXY', 'no_proxy') ?? '';
  if (isLoopback(url) || noProxyMatches(url, noProxy)) return undefined;
  const httpProxy = pick('HTTP_PROXY', 'http_proxy');
  const httpsProxy = pick('HTTPS_PROXY', 'https_proxy');
  const key = JSON.stringify([httpProxy, httpsProxy, noProxy]);
  if (shared?.key !== key) {
    shared = {
      key,
      // Every value given, so the agent never reads process.env itself.
      agent: new (requireUndici().EnvHttpProxyAgent)({ httpProxy: httpProxy ?? '', httpsProxy: httpsProxy ?? '', noProxy }),
    };
  }
  return shared.agent;
}

// 127.0.0.0/8 and ::1; BlockList matches an IPv4-mapped IPv6 address (::ffff:127.0.0.1) against the IPv4
// rule. The unspecified addresses (0.0.0.0, ::) reach this machine too when connected to.
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('0.0.0.0', 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addAddress('::', 'ipv6');

/**
 * A URL's host as compared here: lower case, IPv6 without brackets, a name without its root dot. The URL
 * parser has already made every IPv4 spelling (127.1, 0x7f.1) dotted and every IPv6 one canonical.
 */
function hostOf(url: URL): string {
  return url.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
}

/** Whether `origin` names this machine: localhost, a name under .localhost (RFC 6761), or a loopback address. */
export function isLoopback(origin: string | URL): boolean {
  let host: string;
  try {
    host = hostOf(new URL(origin));
  } catch {
    return false;
  }
  const family = isIP(host);
  if (family === 4) return LOOPBACK.check(host, 'ipv4');
  if (family === 6) return LOOPBACK.check(host, 'ipv6');
  return host === 'localhost' || host.endsWith('.localhost');
}

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/**
 * Whether NO_PROXY exempts `url`. Entries are separated by commas or spaces; `*` exempts everything; a name
 * exempts itself and every name under it (a leading `.` or `*.` is the same); an address or a range
 * (`10.0.0.0/8`, `fd00::/8`) exempts the addresses in it; `:port` after any of these (IPv6 in brackets)
 * narrows the entry to that port.
 */
export function noProxyMatches(url: URL, noProxy: string): boolean {
  const host = hostOf(url);
  const port = url.port || DEFAULT_PORTS[url.protocol] || '';
  const family = isIP(host);
  for (const raw of noProxy.split(/[\s,]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return true;
    const parsed = splitEntry(entry);
    if (parsed.port !== undefined && parsed.port !== port) continue;
    const range = /^(.+)\/(\d{1,3})$/.exec(parsed.host);
    if (range) {
      const [, base = '', bits = ''] = range;
      const baseFamily = isIP(base);
      if (family === 0 || baseFamily === 0) continue;
      const list = new BlockList();
      try {
        list.addSubnet(base, Number(bits), baseFamily === 4 ? 'ipv4' : 'ipv6');
      } catch {
        continue;
      }
      if (list.check(host, family === 4 ? 'ipv4' : 'ipv6')) return true;
      continue;
    }
    const name = parsed.host.replace(/^\*?\./, '').replace(/\.+$/, '');
    if (!name) continue;
    if (family !== 0 && isIP(name) !== 0) {
      if (sameAddress(host, name)) return true;
      continue;
    }
    if (host === name || host.endsWith(`.${name}`)) return true;
  }
  return false;
}

/** An entry's host and optional port: `[v6]:port`, `[v6]`, a bare IPv6 address (never a port), `host:port`. */
function splitEntry(entry: string): { host: string; port?: string } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return { host: bracketed[1] ?? '', ...(bracketed[2] ? { port: bracketed[2] } : {}) };
  if (isIP(entry.replace(/\/\d{1,3}$/, '')) === 6) return { host: entry };
  const withPort = /^(.+):(\d+)$/.exec(entry);
  return withPort ? { host: withPort[1] ?? '', port: withPort[2] ?? '' } : { host: entry };
}

/** Two addresses of any spelling (::ffff:a.b.c.d and a.b.c.d count as the same). */
function sameAddress(a: string, b: string): boolean {
  const list = new BlockList();
  list.addAddress(b, isIP(b) === 4 ? 'ipv4' : 'ipv6');
  return list.check(a, isIP(a) === 4 ? 'ipv4' : 'ipv6');
}
