// Shared pieces of the onboarding tests: an emulator with a Dropbox app whose redirect URI is a free loopback
// port, a private HOME with the encrypted file store, the built CLI spawned with env (never argv) secrets, and
// a "browser" that approves, denies or copies the code on the emulator's authorize page.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { openSecretStore, type ProfileSecrets } from '../../src/credentials/index.js';
import {
  DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, connectionSettings, startEmulator, type EmulatorApp, type EmulatorOptions, type RunningEmulator, type StoredSource,
} from '../../src/emulator/index.js';
import { createAuthorizationRequest, exchangeCode } from '../../src/oauth/index.js';
import { decodeRenewalRecord } from '../../src/profile/renewal-record.js';
import { CLI, nodeWarningError, tempDir, type CliResult } from './cli.js';
import { freePort } from './ports.mjs';

export const AUTHORIZE_URL_PATTERN = /\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/;

export { freePort };

export interface Onboarding {
  emulator: RunningEmulator;
  /** The loopback redirect URI registered for every app of this emulator. */
  redirectUri: string;
  /** The app setup uses by default. */
  app: EmulatorApp;
  apiKey: string;
}

/** Setup's first questions at a terminal, each with what a person types for this emulator: its URL, key and app. */
export function setupAnswers(ob: Onboarding): [RegExp, string][] {
  return [
    [/base URL/, ob.emulator.url],
    [/Service API key/, ob.apiKey],
    [/Dropbox app key/, ob.app.appKey],
    [/Dropbox app secret/, ob.app.appSecret],
    [/Subfolder to read/, 'dropbox://data'],
  ];
}

export interface OnboardingOptions {
  /** Apps besides the default one (their redirect URIs are replaced by the free loopback one). */
  extraApps?: EmulatorApp[];
  /** Replaces the default app (keys, scopes, folders). */
  app?: Partial<EmulatorApp>;
  apiKey?: string;
  autoApprove?: boolean;
  emulator?: EmulatorOptions;
}

export async function startOnboarding(options: OnboardingOptions = {}): Promise<Onboarding> {
  const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  const app: EmulatorApp = { ...DEFAULT_APP, ...options.app, redirectUris: [redirectUri] };
  const apiKey = options.apiKey ?? DEFAULT_EMULATOR_API_KEY;
  const emulator = await startEmulator({
    apps: [app, ...(options.extraApps ?? []).map((a) => ({ ...a, redirectUris: [redirectUri] }))],
    workspaces: [{ name: 'default', apiKeys: [apiKey] }],
    autoApprove: options.autoApprove ?? true,
    ...options.emulator,
  });
  return { emulator, redirectUri, app, apiKey };
}

/** A private HOME (the working directory too, so no stray `.env` is read) with the config dir inside. */
export interface Home {
  dir: string;
  configDir: string;
  storeKey: string;
}

export function newHome(): Home {
  const dir = tempDir('syncauth-onboarding-');
  return { dir, configDir: path.join(dir, 'config'), storeKey: randomBytes(24).toString('base64url') };
}

/** The complete environment of a setup against the emulator, with the encrypted file store. */
export function onboardingEnv(ob: Onboarding, home: Home, extra: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return {
    SYNCAUTH_CONFIG_DIR: home.configDir,
    SYNCAUTH_STORE: 'file',
    SYNCAUTH_STORE_KEY: home.storeKey,
    ...connectionSettings(ob.emulator, { app: ob.app, apiKey: ob.apiKey }),
    SYNCAUTH_REDIRECT_URI: ob.redirectUri,
    SYNCAUTH_REMOTE_URL: 'dropbox://data',
    ...extra,
  };
}

/** Every argv the CLI was spawned with in this test process: the "wrapper" the canary test inspects. */
export const spawnedArgv: string[][] = [];

export interface CliProcess {
  pid: number;
  /** Resolves with the text matched by `pattern` (its first group, when it has one) once stderr shows it. */
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<string>;
  write(text: string): void;
  end(): void;
  result: Promise<CliResult>;
}

export interface SpawnOptions {
  env: Record<string, string | undefined>;
  cwd: string;
  /** Written to stdin and closed; leave undefined to keep stdin open for `write`. */
  stdin?: string;
  timeoutMs?: number;
}

/** Spawns the built CLI with a clean environment; secrets travel in env only, and argv is recorded. */
export function spawnCli(args: string[], options: SpawnOptions): CliProcess {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: options.cwd };
  for (const [key, value] of Object.entries(options.env)) if (value !== undefined) env[key] = value;
  const argv = [process.execPath, CLI, ...args];
  spawnedArgv.push(argv);
  const child = spawn(argv[0] as string, argv.slice(1), { cwd: options.cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let exited = false;
  const listeners = new Set<() => void>();
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    for (const listener of listeners) listener();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 20_000);
  const result = new Promise<CliResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      exited = true;
      clearTimeout(timer);
      for (const listener of listeners) listener();
      const warned = nodeWarningError(args, stderr);
      if (warned) reject(warned);
      else resolve({ code, stdout, stderr });
    });
  });
  if (options.stdin !== undefined) child.stdin.end(options.stdin);
  return {
    pid: child.pid as number,
    result,
    write: (text) => child.stdin.write(text),
    end: () => child.stdin.end(),
    waitForStderr(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(stderr);
          if (match) {
            done();
            resolve(match[1] ?? match[0]);
          } else if (exited) {
            done();
            reject(new Error(`the CLI exited before printing ${pattern}; stderr:\n${stderr}`));
          }
        };
        const giveUp = setTimeout(() => {
          done();
          reject(new Error(`no ${pattern} on stderr within ${timeoutMs} ms; stderr:\n${stderr}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(giveUp);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
  };
}

export function runCli(args: string[], options: SpawnOptions): Promise<CliResult> {
  return spawnCli(args, { ...options, stdin: options.stdin ?? '' }).result;
}

/** The browser's side of Allow: the authorize page (auto-approving, or Allow clicked) and the redirect it leads to. */
export async function approveLikeABrowser(authorizeUrl: string): Promise<Response> {
  let page = await fetch(authorizeUrl, { redirect: 'manual' });
  if (page.status === 200) page = await decide(authorizeUrl, await page.text(), 'allow');
  const location = page.headers.get('location');
  if (!location) throw new Error(`the authorize page answered ${page.status} without a redirect`);
  const callback = await fetch(location);
  await callback.text();
  return callback;
}

/** Deny clicked on the (not auto-approving) authorize page, and the redirect followed. */
export async function denyLikeABrowser(authorizeUrl: string): Promise<Response> {
  const page = await fetch(authorizeUrl, { redirect: 'manual' });
  if (page.status !== 200) throw new Error(`the authorize page answered ${page.status}: is autoApprove on?`);
  const answer = await decide(authorizeUrl, await page.text(), 'deny');
  const location = answer.headers.get('location');
  if (!location) throw new Error(`the decision answered ${answer.status} without a redirect`);
  const callback = await fetch(location);
  await callback.text();
  return callback;
}

async function decide(authorizeUrl: string, html: string, decision: 'allow' | 'deny'): Promise<Response> {
  const nonce = /name="nonce" value="([^"]+)"/.exec(html)?.[1];
  if (!nonce) throw new Error('the authorize page has no nonce');
  return fetch(new URL('/oauth2/authorize', authorizeUrl), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ nonce, decision }).toString(),
  });
}

/** Paste mode: what the person copies from the "Access code generated" page. */
export async function copyCodeLikeAPerson(authorizeUrl: string): Promise<string> {
  const page = await fetch(authorizeUrl);
  const html = await page.text();
  const code = /<code id="code">([^<]+)<\/code>/.exec(html)?.[1];
  if (page.status !== 200 || !code) throw new Error(`no code on the authorize page (${page.status})`);
  return code.replaceAll('&amp;', '&').replaceAll('&#39;', "'").replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>');
}

/** Runs a loopback-mode command (setup or authorize) and approves the URL it prints as soon as it prints it. */
export async function runWithApproval(
  args: string[],
  options: SpawnOptions & { browser?: (url: string) => Promise<Response>; onWaiting?: (proc: CliProcess, url: string) => void | Promise<void> },
): Promise<CliResult & { authorizeUrl: string }> {
  const proc = spawnCli(args, { ...options, stdin: options.stdin ?? '' });
  let authorizeUrl: string;
  try {
    authorizeUrl = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
    await options.onWaiting?.(proc, authorizeUrl);
    await (options.browser ?? approveLikeABrowser)(authorizeUrl);
  } catch (error) {
    const result = await proc.result;
    throw new Error(`${(error as Error).message}\nexit ${result.code}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`, { cause: error });
  }
  return { ...(await proc.result), authorizeUrl };
}

/** Paste mode: runs `args` (with --no-browser), copies the code off the page and types it on stdin. */
export async function runWithPastedCode(args: string[], options: SpawnOptions): Promise<CliResult & { authorizeUrl: string; pastedCode: string }> {
  const proc = spawnCli(args, { ...options, stdin: undefined });
  const authorizeUrl = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
  const code = await copyCodeLikeAPerson(authorizeUrl);
  proc.write(`${code}\n`);
  proc.end();
  return { ...(await proc.result), authorizeUrl, pastedCode: code };
}

/** A grant made in-process (as `authorize` on another machine would), for the no-browser paths. */
export async function grantRefreshToken(ob: Onboarding, app: EmulatorApp = ob.app): Promise<string> {
  const request = createAuthorizationRequest({ authorizeUrl: ob.emulator.authorizeUrl, appKey: app.appKey, redirectUri: ob.redirectUri });
  const page = await fetch(request.url, { redirect: 'manual' });
  const location = page.headers.get('location');
  const code = location ? new URL(location).searchParams.get('code') : null;
  if (!code) throw new Error(`the emulator gave no code (${page.status}); is autoApprove on?`);
  const tokens = await exchangeCode({
    tokenUrl: ob.emulator.tokenUrl, app: { appKey: app.appKey, appSecret: app.appSecret }, code, redirectUri: ob.redirectUri, codeVerifier: request.codeVerifier,
  });
  return tokens.refreshToken;
}

/** A renewal straight at the emulator's token endpoint, as the service would make it. */
export async function renewAtEmulator(ob: Onboarding, refreshToken: string, app: EmulatorApp = ob.app): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(ob.emulator.tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: app.appKey, client_secret: app.appSecret }).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export async function currentAccount(ob: Onboarding, accessToken: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${ob.emulator.apiUrl}/2/users/get_current_account`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export function sources(ob: Onboarding): StoredSource[] {
  return [...(ob.emulator.state.workspaces.get('default')?.sources.values() ?? [])];
}

/** The refresh token of the newest grant the emulator made for `appKey`. */
export function newestRefreshToken(ob: Onboarding, appKey = ob.app.appKey): string {
  const grants = [...ob.emulator.state.grants.values()].filter((g) => g.appKey === appKey && g.refreshToken);
  const newest = grants.at(-1)?.refreshToken;
  if (!newest) throw new Error('the emulator made no grant');
  return newest;
}

/** The access token the emulator issued last for the grant of `refreshToken` (safe when tests run side by side). */
export function newestAccessTokenOf(ob: Onboarding, refreshToken: string): string {
  const grant = [...ob.emulator.state.grants.values()].find((g) => g.refreshToken === refreshToken);
  const newest = [...ob.emulator.state.accessTokens.values()].filter((t) => t.grantId === grant?.id).at(-1)?.token;
  if (!newest) throw new Error('the emulator issued no access token for that grant');
  return newest;
}

/** The access token the emulator issued last. */
export function newestAccessToken(ob: Onboarding): string {
  const newest = [...ob.emulator.state.accessTokens.keys()].at(-1);
  if (!newest) throw new Error('the emulator issued no access token');
  return newest;
}

export function clearRequestLog(ob: Onboarding): void {
  (ob.emulator.state.requests as unknown[]).length = 0;
}

/** Every regular file under `dir`, recursively (none when it does not exist). */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(full));
    else out.push(full);
  }
  return out.sort();
}

/** Every directory under `dir`, itself included. */
export function dirsUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out = [dir];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) out.push(...dirsUnder(path.join(dir, entry.name)));
  }
  return out;
}

export function modeOf(file: string): number {
  return statSync(file).mode & 0o777;
}

export function readText(file: string): string {
  return readFileSync(file, 'utf8');
}

export function profileFile(home: Home, profile: string): string {
  return path.join(home.configDir, 'profiles', `${profile}.json`);
}

/** The state file, with the renewal record laid over it when its renewal is the later one (as a read of the store does). */
export function readProfileState(home: Home, profile: string): Record<string, unknown> | undefined {
  const file = profileFile(home, profile);
  const state = existsSync(file) ? (JSON.parse(readText(file)) as Record<string, unknown>) : undefined;
  const recordFile = path.join(home.configDir, 'profiles', `${profile}.renewed`);
  const record = existsSync(recordFile) ? decodeRenewalRecord(profile, readFileSync(recordFile)) : undefined;
  if (!state || !record || Date.parse(String(state.lastRenewalAt ?? 0)) >= record.lastRenewalAt) return state;
  return { ...state, accessTokenExpiresAt: new Date(record.accessTokenExpiresAt).toISOString(), lastRenewalAt: new Date(record.lastRenewalAt).toISOString() };
}

/** The secrets the encrypted store holds for `profile`, opened with the home's key. */
export async function storedSecrets(home: Home, profile: string): Promise<ProfileSecrets> {
  return openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} }).get(profile);
}

/** A profile set up through the CLI, and what later commands need to reach it. */
export interface Onboarded {
  home: Home;
  profile: string;
  refreshToken: string;
  connectorId: string;
  /** What later commands get: the store and nothing else. */
  env: Record<string, string>;
}

/** A profile onboarded with a grant handed in (the quick, browserless path of setup), connector `conn-<profile>`. */
export async function onboardWithGrant(ob: Onboarding, profile: string, home: Home = newHome()): Promise<Onboarded> {
  const refreshToken = await grantRefreshToken(ob);
  const result = await runCli(['setup', '--yes', '--json', '--profile', profile, '--connector-name', `conn-${profile}`], {
    env: onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: refreshToken }), cwd: home.dir,
  });
  if (result.code !== 0) throw new Error(`setup failed (${result.code}):\n${result.stderr}`);
  const connectorId = (JSON.parse(result.stdout) as { connector: { id: string } }).connector.id;
  return {
    home, profile, refreshToken, connectorId,
    env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey },
  };
}
