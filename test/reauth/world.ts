// A re-authorization page in-process, beside a real daemon and the emulator: a profile whose grant the emulator
// can revoke, its secrets in memory (stored through the daemon's storeGrant hook), its state and links in a
// temporary config dir, and an HTTP client that records every response the page gives (for the canary checks)
// and can send any Host and Origin.
import { request } from 'node:http';
import { afterEach } from 'vitest';
import { startDaemon, type DaemonGrant, type DaemonOptions, type DaemonProfile, type RunningDaemon } from '../../src/daemon/index.js';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator, type EmulatorApp, type RunningEmulator } from '../../src/emulator/index.js';
import { createAuthorizationRequest, exchangeCode } from '../../src/oauth/index.js';
import { newSecretsVersion, openProfileStore, type ProfileStore } from '../../src/profile/index.js';
import { fileLinkStore, mintLink, type LinkStore } from '../../src/reauth/links.js';
import type { RoundStore } from '../../src/reauth/redis-store.js';
import { memoryRoundStore, startReauthServer, type ReauthServer, type ReauthServerOptions } from '../../src/reauth/server.js';
import { stateWithNewGrant } from '../../src/sync/renew.js';
import { freePort } from '../helpers/onboarding.js';
import { captureLog, tempDir, type CapturedLog } from '../daemon/helpers.js';

export const PROFILE = 'docs';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface PageWorld {
  emu: RunningEmulator;
  app: EmulatorApp;
  daemon: RunningDaemon;
  server: ReauthServer;
  links: LinkStore;
  store: ProfileStore;
  configDir: string;
  publicUrl: string;
  log: CapturedLog;
  /** The grant the profile's store holds now. */
  stored(): DaemonGrant;
  /** Every answer the page gave, for the canary search. */
  answers: Answer[];
  /** A request to the page; `host` defaults to the public URL's. */
  http(path: string, options?: { method?: string; headers?: Record<string, string>; body?: string; host?: string }): Promise<Answer>;
  mint(options?: { allowAccountChange?: boolean; ttlMs?: number; now?: () => number }): Promise<string>;
  /**
   * Another page on a port of its own, sharing the links, the authorize rounds (as replicas share them through
   * Redis) and the daemon; its `http` sends the public URL's Host, as the load balancer would.
   */
  replica(): Promise<PageWorld['http']>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** Approves an authorize URL at the emulator as `accountId` (the page's account choice); returns where Dropbox sends the browser. */
export async function approveAt(authorizeUrl: string, accountId?: string): Promise<{ location?: string; html: string }> {
  const page = await fetch(authorizeUrl, { redirect: 'manual' });
  const html = await page.text();
  const nonce = /name="nonce" value="([^"]+)"/.exec(html)?.[1];
  if (!nonce) throw new Error(`no authorize page (${page.status}): ${html.slice(0, 300)}`);
  const answer = await fetch(new URL('/oauth2/authorize', authorizeUrl), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ nonce, decision: 'allow', ...(accountId ? { account: accountId } : {}) }).toString(),
  });
  return { location: answer.headers.get('location') ?? undefined, html: await answer.text() };
}

export async function startPageWorld(options: { recordAccount?: boolean; reconcile?: boolean; renewMarginMs?: number; folders?: EmulatorApp['folders']; readOnly?: boolean; onReauthorized?: DaemonOptions['onReauthorized']; stores?: { links: LinkStore; rounds?: RoundStore }; rounds?: RoundStore } = {}): Promise<PageWorld> {
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const app: EmulatorApp = {
    ...DEFAULT_APP,
    redirectUris: [...DEFAULT_APP.redirectUris, `${publicUrl}/reauthorize/callback`],
    ...(options.folders ? { folders: options.folders } : {}),
  };
  const emu = await startEmulator({ apps: [app], autoApprove: false, tokenLifetimeSeconds: 600 });
  cleanups.push(() => emu.close());
  // The profile's first grant, approved by the default account.
  const first = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: app.appKey, redirectUri: `${publicUrl}/reauthorize/callback` });
  const approved = await approveAt(first.url);
  const code = new URL(approved.location as string).searchParams.get('code') as string;
  const tokens = await exchangeCode({ tokenUrl: emu.tokenUrl, app, code, redirectUri: `${publicUrl}/reauthorize/callback`, codeVerifier: first.codeVerifier });
  let grant: DaemonGrant = { appKey: app.appKey, appSecret: app.appSecret, refreshToken: tokens.refreshToken };

  const configDir = tempDir('syncauth-reauth-');
  const store = openProfileStore(configDir);
  await store.update(PROFILE, () => ({
    remoteUrl: 'dropbox://data',
    access: 'read',
    secretsVersion: newSecretsVersion(),
    ...(options.recordAccount === false ? {} : { accountId: emu.state.account.accountId }),
  }));
  const log = captureLog('info');
  const profile: DaemonProfile = {
    name: PROFILE,
    tokenUrl: emu.tokenUrl,
    dropboxApiUrl: emu.apiUrl,
    grant,
    readGrant: async () => grant,
    ...(options.readOnly ? {} : { storeGrant: async (fresh: DaemonGrant, accountId: string | undefined) => {
      grant = fresh;
      await store.update(PROFILE, (current) => stateWithNewGrant(current, accountId));
    } }),
    ...(options.reconcile === false
      ? {}
      : { reconcile: { baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, connectorName: 'conn-docs', remoteUrl: 'dropbox://data', recursive: false } }),
  };
  const daemon = await startDaemon({
    profiles: [profile],
    profileStore: store,
    // Every sweep renews (the margin is the whole lifetime), so a revoked grant is found at the next one.
    renewMarginMs: options.renewMarginMs ?? 600_000,
    jitterMs: 0,
    schedule: false,
    logger: log.logger,
    serviceRetry: { retries: 0 },
    ...(options.onReauthorized ? { onReauthorized: options.onReauthorized } : {}),
  });
  cleanups.push(() => daemon.close());
  // The config dir's links by default; Redis's (links and rounds) as replicas keep them, when given.
  const links = options.stores?.links ?? fileLinkStore(configDir);
  const rounds = options.rounds ?? options.stores?.rounds ?? memoryRoundStore();
  const serverOptions: Omit<ReauthServerOptions, 'listen'> = {
    publicUrl,
    links,
    rounds,
    profile: async (name) => {
      if (name !== PROFILE) return undefined;
      const state = await store.read(PROFILE);
      return {
        name,
        appKey: grant.appKey,
        appSecret: grant.appSecret,
        authorizeUrl: emu.authorizeUrl,
        tokenUrl: emu.tokenUrl,
        apiUrl: emu.apiUrl,
        folder: 'dropbox://data',
        ...(state?.accountId ? { accountId: state.accountId } : {}),
        access: 'read',
        // As the daemon describes it: a read-only store whose grant a command takes still gets the button.
        writable: options.readOnly !== true || options.onReauthorized !== undefined,
      };
    },
    reauthorized: (name, fresh) => daemon.reauthorized(name, fresh),
    log: log.logger,
  };
  const server = await startReauthServer({ listen: { host: '127.0.0.1', port }, ...serverOptions });
  cleanups.push(() => server.close());

  const answers: Answer[] = [];
  const httpTo = (to: number): PageWorld['http'] => (path, opts = {}) =>
    new Promise<Answer>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port: to,
        path,
        method: opts.method ?? 'GET',
        headers: { host: opts.host ?? `127.0.0.1:${port}`, ...opts.headers },
      }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          const answer = { status: res.statusCode ?? 0, headers: res.headers, body };
          answers.push(answer);
          resolve(answer);
        });
      });
      req.on('error', reject);
      req.end(opts.body);
    });
  const http = httpTo(port);
  return {
    emu, app, daemon, server, links, store, configDir, publicUrl, log, answers, http,
    stored: () => grant,
    mint: async (mintOptions = {}) => {
      const { url } = await mintLink(links, { profile: PROFILE, publicUrl, ...mintOptions });
      return url;
    },
    replica: async () => {
      const other = await freePort();
      const replica = await startReauthServer({ listen: { host: '127.0.0.1', port: other }, ...serverOptions });
      cleanups.push(() => replica.close());
      return httpTo(other);
    },
  };
}

/** The path and query of a URL on the page. */
export function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}

/** An attribute's value in the page, unescaped. */
export function hrefOf(html: string, id: string): string {
  const match = new RegExp(`id="${id}" href="([^"]+)"`).exec(html);
  if (!match) throw new Error(`no #${id} link in the page:\n${html}`);
  return (match[1] as string).replaceAll('&amp;', '&').replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&lt;', '<').replaceAll('&gt;', '>');
}

export function fieldOf(html: string, name: string): string {
  const match = new RegExp(`name="${name}" value="([^"]+)"`).exec(html);
  if (!match) throw new Error(`no ${name} field in the page`);
  return match[1] as string;
}
