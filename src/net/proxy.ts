// Corporate networks: every outbound call (the service, Dropbox's token, API and revoke endpoints) goes
// through the proxy named by HTTPS_PROXY / HTTP_PROXY (either case), except hosts NO_PROXY lists. undici's
// EnvHttpProxyAgent reads exactly those variables; one agent is shared by the process. Without them the
// callers keep their own direct pools. Loopback destinations are always reached directly (as Go's net/http
// does): a local emulator or service is never sent to a proxy elsewhere.
import { EnvHttpProxyAgent, type Dispatcher } from 'undici';

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy'] as const;

let shared: { key: string; agent: Dispatcher } | undefined;

/** Whether the environment names a proxy. */
export function proxyConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return PROXY_VARIABLES.some((name) => (env[name] ?? '').trim() !== '');
}

/**
 * The dispatcher that honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY, or undefined when no proxy is set. Shared
 * and never closed by its users: it lives as long as the process.
 */
export function proxyDispatcher(origin: string | URL, env: NodeJS.ProcessEnv = process.env): Dispatcher | undefined {
  if (!proxyConfigured(env) || isLoopback(origin)) return undefined;
  const pick = (upper: string, lower: string): string | undefined => env[upper] || env[lower] || undefined;
  const httpProxy = pick('HTTP_PROXY', 'http_proxy');
  const httpsProxy = pick('HTTPS_PROXY', 'https_proxy');
  const noProxy = pick('NO_PROXY', 'no_proxy');
  const key = JSON.stringify([httpProxy, httpsProxy, noProxy]);
  if (shared?.key !== key) {
    shared = {
      key,
      agent: new EnvHttpProxyAgent({
        ...(httpProxy ? { httpProxy } : {}),
        ...(httpsProxy ? { httpsProxy } : {}),
        ...(noProxy !== undefined ? { noProxy } : {}),
      }),
    };
  }
  return shared.agent;
}

function isLoopback(origin: string | URL): boolean {
  let host: string;
  try {
    host = new URL(origin).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  } catch {
    return false;
  }
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
