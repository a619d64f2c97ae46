// A local stand-in for the ingestion service and for Dropbox's OAuth and the few v2 routes syncauth calls,
// on one express app bound to 127.0.0.1. The demo, `syncauth emulate` and the integration tests run on it.
// It writes no logs: what happened is in `state.requests`, which never holds a secret.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { connectedAppsRouter } from './connected-apps.js';
import type { EmulatorContext } from './context.js';
import { dropboxApiRouter } from './dropbox-api.js';
import { dropboxOAuthRouter } from './dropbox-oauth.js';
import { FaultInjector, routeOf } from './faults.js';
import { inProcessDispatcher, type InProcessDispatcher } from './in-process.js';
import { serviceRouter } from './service.js';
import { Generator, createState } from './state.js';
import type { EmulatorApp, EmulatorOptions, FaultRule, ResolvedEmulatorOptions, RunningEmulator } from './types.js';

export type {
  DropboxAccount,
  EmulatorApp,
  EmulatorOptions,
  EmulatorRoute,
  EmulatorState,
  EmulatorWorkspace,
  FaultRoute,
  FaultRule,
  Grant,
  IssuedAccessToken,
  IssuedCode,
  RequestLogEntry,
  ResolvedEmulatorOptions,
  RunningEmulator,
  SeededIds,
  StoredCheck,
  StoredDestination,
  StoredJob,
  StoredSource,
  StoredWorkflow,
  StoredWorkflowNode,
  WorkspaceState,
} from './types.js';

/** The API key of the default workspace. */
export const DEFAULT_EMULATOR_API_KEY = 'emulator-service-api-key-0001';

export const DEFAULT_WORKSPACE_NAME = 'default';

/** The default Dropbox app: a scoped, App-folder app whose loopback redirect is syncauth's default. */
export const DEFAULT_APP: Readonly<EmulatorApp> = Object.freeze({
  appKey: 'emu1appkey2k3y4',
  appSecret: 'emu5appsecret6s',
  name: 'syncauth emulator',
  folderName: 'syncauth-demo',
  redirectUris: ['http://127.0.0.1:53682/callback'],
  scopes: ['account_info.read', 'files.content.read', 'files.metadata.read'],
  folders: {
    '/data': ['quarterly-report.pdf', 'meeting-notes.docx', 'customers.csv'],
    '/data/archive': ['2023-summary.pdf'],
    '/inbox': [],
  },
});

const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_API_KEY_HEADER = 'service-api-key';

/**
 * The syncauth settings that point it at a running emulator: the service, its API key, the Dropbox endpoints
 * and the app's credentials. The demo, `syncauth emulate` and the tests all connect through this one map.
 */
export function connectionSettings(
  emulator: Pick<RunningEmulator, 'url' | 'authorizeUrl' | 'tokenUrl' | 'apiUrl'> & { options?: Pick<ResolvedEmulatorOptions, 'apiKeyHeader'> },
  options: { app?: Pick<EmulatorApp, 'appKey' | 'appSecret'>; apiKey?: string } = {},
): Record<string, string> {
  const app = options.app ?? DEFAULT_APP;
  const header = emulator.options?.apiKeyHeader;
  return {
    // Only an emulator listening for another header needs it said: syncauth's default is the emulator's.
    ...(header !== undefined && header !== DEFAULT_API_KEY_HEADER ? { SYNCAUTH_API_KEY_HEADER: header } : {}),
    SYNCAUTH_BASE_URL: emulator.url,
    SYNCAUTH_API_KEY: options.apiKey ?? DEFAULT_EMULATOR_API_KEY,
    SYNCAUTH_APP_KEY: app.appKey,
    SYNCAUTH_APP_SECRET: app.appSecret,
    SYNCAUTH_AUTHORIZE_URL: emulator.authorizeUrl,
    SYNCAUTH_TOKEN_URL: emulator.tokenUrl,
    SYNCAUTH_DROPBOX_API_URL: emulator.apiUrl,
  };
}

export function resolveEmulatorOptions(options: EmulatorOptions = {}): ResolvedEmulatorOptions {
  const resolved: ResolvedEmulatorOptions = {
    port: options.port ?? 0,
    apiKeyHeader: options.apiKeyHeader ?? DEFAULT_API_KEY_HEADER,
    workspaces: (options.workspaces ?? [{ name: DEFAULT_WORKSPACE_NAME, apiKeys: [DEFAULT_EMULATOR_API_KEY] }]).map((w) => ({
      name: w.name,
      apiKeys: [...w.apiKeys],
    })),
    apps: (options.apps ?? [DEFAULT_APP]).map(copyApp),
    tokenLifetimeSeconds: options.tokenLifetimeSeconds ?? 14_400,
    codeLifetimeSeconds: options.codeLifetimeSeconds ?? 300,
    autoApprove: options.autoApprove ?? false,
    faults: [...(options.faults ?? [])],
    seed: options.seed ?? true,
    checkDelayMs: options.checkDelayMs ?? 200,
    jobStepMs: options.jobStepMs ?? 500,
    uniqueConnectorNames: options.uniqueConnectorNames ?? true,
    now: options.now ?? Date.now,
    random: options.random ?? randomBytes,
  };
  if (!(resolved.tokenLifetimeSeconds > 0)) throw new Error('emulator: tokenLifetimeSeconds must be positive');
  if (!(resolved.codeLifetimeSeconds > 0)) throw new Error('emulator: codeLifetimeSeconds must be positive');
  if (!(resolved.checkDelayMs >= 0) || !(resolved.jobStepMs >= 0)) throw new Error('emulator: checkDelayMs and jobStepMs must be 0 or more');
  if (!/^[A-Za-z0-9-]+$/.test(resolved.apiKeyHeader)) throw new Error('emulator: apiKeyHeader must be a header name');
  return resolved;
}

function copyApp(app: EmulatorApp): EmulatorApp {
  return {
    ...app,
    redirectUris: [...app.redirectUris],
    scopes: [...app.scopes],
    ...(app.folders ? { folders: Object.fromEntries(Object.entries(app.folders).map(([k, v]) => [k, [...v]])) } : {}),
  };
}

export async function startEmulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const resolved = resolveEmulatorOptions(options);
  const gen = new Generator(resolved.random);
  const state = createState(resolved, gen);
  const ctx: EmulatorContext = { options: resolved, state, gen };
  const faults = new FaultInjector(resolved.faults, () => gen.fraction());

  const app = express();
  app.disable('x-powered-by');
  // Neither Dropbox nor the service answers conditional requests; a 304 would only confuse a client.
  app.set('etag', false);

  app.use((req: Request, res: Response, next: NextFunction) => {
    const at = resolved.now();
    res.on('close', () => {
      const grantId = (res.locals as { grantId?: unknown }).grantId;
      const length = Number(res.getHeader('content-length'));
      state.requests.push({
        route: routeOf(req.path), method: req.method, path: req.path, status: res.statusCode, at,
        ...(typeof grantId === 'string' ? { grantId } : {}),
        ...(Number.isFinite(length) ? { bytes: length } : {}),
      });
    });
    next();
  });
  app.use(faults.middleware());
  // Every body is read raw: each route parses it the way its real counterpart does.
  app.use(express.raw({ type: () => true, limit: '1mb' }));
  app.use(dropboxOAuthRouter(ctx));
  app.use(connectedAppsRouter(ctx));
  app.use(dropboxApiRouter(ctx));
  app.use(serviceRouter(ctx));
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ detail: 'Not Found' });
  });
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = errorStatus(err);
    if (res.headersSent) {
      res.end();
      return;
    }
    res.status(status).type('text/plain').send(status === 500 ? 'Internal Server Error' : String((err as Error).message));
  });

  const server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(resolved.port, DEFAULT_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${DEFAULT_HOST}:${port}`;
  const first = resolved.workspaces[0];
  let closing: Promise<void> | undefined;
  let inProcess: InProcessDispatcher | undefined;

  return {
    url,
    serviceUrl: url,
    authorizeUrl: `${url}/oauth2/authorize`,
    tokenUrl: `${url}/oauth2/token`,
    apiUrl: url,
    options: { ...resolved, port },
    state,
    seeded: (first && state.seeded.get(first.name)) ?? null,
    setFaults(rules: FaultRule[]) {
      faults.set(rules);
    },
    get dispatcher() {
      inProcess ??= inProcessDispatcher(ctx, url, (route) => faults.names(route));
      return inProcess;
    },
    revokeGrant(refreshToken: string) {
      const grant = state.grantsByRefreshToken.get(refreshToken);
      if (!grant) throw new Error('emulator: no grant has that refresh token');
      if (grant.revokedAt === null) grant.revokedAt = resolved.now();
    },
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        faults.cancelPending();
        void inProcess?.close();
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function errorStatus(err: unknown): number {
  const status = (err as { status?: unknown; statusCode?: unknown } | null)?.status ?? (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' && status >= 400 && status < 600 ? status : 500;
}
