// The onboarding flow as a person meets it: `syncauth setup` prints the authorize URL, a real (headless)
// Chromium opens it on the emulator's Dropbox page, and the click on Allow or Deny travels through the
// browser's redirect to setup's loopback callback. Everything runs on 127.0.0.1.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, connectionSettings, startEmulator, type RunningEmulator, type StoredSource } from '../../src/emulator/index.js';
import { CLI, RUN_AS, tempDir } from '../helpers/cli.js';
import { chromiumAvailability, launchChromium } from '../helpers/chromium.js';

const availability = chromiumAvailability();
if (availability.skip) console.warn(`test/e2e/browser.test.ts: ${availability.reason}`);

const PROFILE = 'browser';
const SETUP_TIMEOUT_SECONDS = 25;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
// syncauth's default redirect port: a test must never take it from a person running setup on this machine.
const DEFAULT_REDIRECT_PORT = 53682;

async function freeLoopbackPort(): Promise<number> {
  for (;;) {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    if (port !== DEFAULT_REDIRECT_PORT) return port;
  }
}

interface SetupRun {
  home: string;
  configDir: string;
  emulator: RunningEmulator;
  redirectUri: string;
  /** The authorize URL as setup printed it. */
  authorizeUrl: string;
  /** Resolves when setup exits. */
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
  stderr: () => string;
}

const children = new Set<ChildProcess>();
const emulators = new Set<RunningEmulator>();
const dirs = new Set<string>();

/** Starts an emulator whose app allows a fresh loopback redirect, and `setup` against it, up to the printed URL. */
async function startSetup(): Promise<SetupRun> {
  const port = await freeLoopbackPort();
  const redirectUri = `http://127.0.0.1:${port}/callback`;
  const emulator = await startEmulator({ apps: [{ ...DEFAULT_APP, redirectUris: [redirectUri] }], autoApprove: false });
  emulators.add(emulator);
  const workflowId = emulator.seeded?.workflowId;
  if (!workflowId) throw new Error('the emulator seeded no workflow');
  const home = tempDir('syncauth-browser-');
  dirs.add(home);
  const configDir = path.join(home, 'config');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    SYNCAUTH_PROFILE: PROFILE,
    SYNCAUTH_CONFIG_DIR: configDir,
    SYNCAUTH_STORE: 'file',
    SYNCAUTH_STORE_KEY: randomBytes(24).toString('base64url'),
    ...connectionSettings(emulator),
    SYNCAUTH_REDIRECT_URI: redirectUri,
    SYNCAUTH_REMOTE_URL: 'dropbox://data',
    SYNCAUTH_WORKFLOW_ID: workflowId,
    SYNCAUTH_SCHEDULE: 'every 4 hours',
  };
  const child = spawn(process.execPath, [CLI, 'setup', '--yes', '--no-open', '--timeout', String(SETUP_TIMEOUT_SECONDS)], {
    cwd: home,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
  const urlPattern = new RegExp(`^\\s+(${escapeRegExp(emulator.authorizeUrl)}\\?\\S+)$`, 'm');
  const authorizeUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`setup printed no authorize URL within 15 s; stderr:\n${stderr}`)), 15_000);
    const check = (): void => {
      const url = urlPattern.exec(stderr)?.[1];
      if (url) {
        clearTimeout(timer);
        child.stderr.off('data', check);
        resolve(url);
      }
    };
    child.stderr.on('data', check);
    void exit.then((r) => {
      clearTimeout(timer);
      reject(new Error(`setup exited ${r.code} before printing the authorize URL; stderr:\n${r.stderr}`));
    });
  });
  return { home, configDir, emulator, redirectUri, authorizeUrl, exit, stderr: () => stderr };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function dropboxSources(emulator: RunningEmulator): StoredSource[] {
  const ws = emulator.state.workspaces.get('default');
  if (!ws) throw new Error('the emulator has no default workspace');
  return [...ws.sources.values()].filter((s) => s.type === 'dropbox');
}

/** Opens the authorize URL in a fresh context and checks the page shows the app and what it asks for. */
async function openAuthorizePage(context: BrowserContext, run: SetupRun, hosts: Set<string>): Promise<Page> {
  const page = await context.newPage();
  page.on('request', (request) => hosts.add(new URL(request.url()).host));
  const response = await page.goto(run.authorizeUrl);
  expect(response?.status()).toBe(200);
  await expect(page.title()).resolves.toBe('API Request Authorization - Dropbox');
  await expect(page.locator('#app-name').innerText()).resolves.toContain(DEFAULT_APP.name);
  await expect(page.locator('#app-folder').innerText()).resolves.toBe(`Apps/${DEFAULT_APP.folderName}`);
  // setup asks for the scopes it names, or, naming none, for every permission ticked for the app.
  const scopeParam = new URL(run.authorizeUrl).searchParams.get('scope');
  const requested = scopeParam === null ? [...DEFAULT_APP.scopes] : scopeParam.split(' ').filter(Boolean);
  const shown = await page.locator('#scopes li[data-scope]').evaluateAll((items) => items.map((li) => li.getAttribute('data-scope')));
  expect([...shown].sort()).toEqual([...requested].sort());
  // What setup needs: reading the folder's files, and listing it to check it.
  expect(shown).toEqual(expect.arrayContaining(['files.content.read', 'files.metadata.read']));
  await expect(page.locator('#scopes').innerText()).resolves.toContain('View content of files and folders in its app folder');
  await expect(page.locator('#allow').isVisible()).resolves.toBe(true);
  await expect(page.locator('#deny').isVisible()).resolves.toBe(true);
  return page;
}

describe.skipIf(availability.skip)('setup in a real browser (headless Chromium)', () => {
  let browser: Browser | undefined;

  beforeAll(async () => {
    browser = await launchChromium(availability);
  });

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await browser?.close();
    await Promise.all([...emulators].map((e) => e.close()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('Allow: the browser lands on the loopback success page and setup wires the connector', async () => {
    if (!browser) throw new Error('no browser');
    const run = await startSetup();
    const context = await browser.newContext();
    const hosts = new Set<string>();
    try {
      const page = await openAuthorizePage(context, run, hosts);

      const screenshot = path.join(run.home, 'authorize.png');
      await page.screenshot({ path: screenshot, fullPage: true });
      const png = readFileSync(screenshot);
      expect(png.length).toBeGreaterThan(1000);
      expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);

      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${run.redirectUri}?`)),
        page.locator('#allow').click(),
      ]);
      expect(response.status()).toBe(200);
      await page.waitForURL((url) => url.href.startsWith(`${run.redirectUri}?`));
      await expect(page.title()).resolves.toBe('syncauth is authorized');
      await expect(page.locator('h1').innerText()).resolves.toBe('syncauth is authorized');
      await expect(page.locator('body').innerText()).resolves.toContain('you can close this tab and return to the terminal');
      expect(new URL(page.url()).searchParams.has('code')).toBe(true);

      const result = await run.exit;
      expect(result.stderr).not.toMatch(/Error|✗/);
      expect({ code: result.code, signal: result.signal }).toEqual({ code: 0, signal: null });
      expect(result.stderr).toContain('✓ authorized');
      expect(result.stderr).toContain('✓ dropbox://data is readable (');

      const sources = dropboxSources(run.emulator);
      expect(sources).toHaveLength(1);
      const source = sources[0] as StoredSource;
      expect(source.name).toBe('dropbox-data');
      expect(result.stdout).toContain(`✓ secrets stored in the file store for profile "${PROFILE}"`);
      expect(result.stdout).toContain(`✓ source connector dropbox-data created (${source.id})`);
      const workflowId = run.emulator.seeded?.workflowId as string;
      expect(result.stdout).toMatch(new RegExp(`✓ workflow .+ \\(${workflowId}\\) reads from it, schedule every 4 hours \\(0 \\*/4 \\* \\* \\*\\)`));

      const config = source.config;
      expect(config.remote_url).toBe('dropbox://data');
      expect(config.app_key).toBe(DEFAULT_APP.appKey);
      expect(config.app_secret).toBe(DEFAULT_APP.appSecret);
      const grants = [...run.emulator.state.grants.values()];
      expect(grants).toHaveLength(1);
      expect(typeof config.refresh_token).toBe('string');
      expect(config.refresh_token).toBe(grants[0]?.refreshToken);
      expect(typeof config.token).toBe('string');
      expect(run.emulator.state.accessTokens.get(config.token as string)?.grantId).toBe(grants[0]?.id);

      const workflow = run.emulator.state.workspaces.get('default')?.workflows.get(workflowId);
      expect(workflow?.sources).toEqual([source.id]);
      expect(workflow?.schedule).toEqual({ crontab_entries: [{ cron_expression: '0 */4 * * *' }] });

      const stateFile = path.join(run.configDir, 'profiles', `${PROFILE}.json`);
      expect(existsSync(stateFile)).toBe(true);
      const profileText = readFileSync(stateFile, 'utf8');
      expect(profileText).toContain(source.id);
      // The profile state holds no secret: those went to the (encrypted) file store.
      expect(profileText).not.toContain(grants[0]?.refreshToken as string);
      expect(profileText).not.toContain(DEFAULT_APP.appSecret);
      const secretsFile = path.join(run.configDir, 'secrets.enc');
      expect(existsSync(secretsFile)).toBe(true);
      const secretsText = readFileSync(secretsFile, 'utf8');
      expect(secretsText).not.toContain(grants[0]?.refreshToken as string);
      expect(secretsText).not.toContain(DEFAULT_APP.appSecret);

      expect([...hosts].every((h) => h.startsWith('127.0.0.1:'))).toBe(true);
    } finally {
      await context.close();
    }
  });

  it('Deny: the browser lands on a failure page, setup exits 1 and nothing is written', async () => {
    if (!browser) throw new Error('no browser');
    const run = await startSetup();
    const context = await browser.newContext();
    const hosts = new Set<string>();
    try {
      const page = await openAuthorizePage(context, run, hosts);

      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${run.redirectUri}?`)),
        page.locator('#deny').click(),
      ]);
      expect(response.status()).toBe(403);
      await page.waitForURL((url) => url.href.startsWith(`${run.redirectUri}?`));
      expect(new URL(page.url()).searchParams.get('error')).toBe('access_denied');
      await expect(page.title()).resolves.toBe('syncauth was not authorized');
      await expect(page.locator('h1').innerText()).resolves.toBe('syncauth was not authorized');
      await expect(page.locator('body').innerText()).resolves.toContain('you clicked Deny on the Dropbox page');

      const result = await run.exit;
      expect({ code: result.code, signal: result.signal }).toEqual({ code: 1, signal: null });
      expect(result.stderr).toMatch(/authorization was refused: you clicked Deny/);
      expect(result.stderr).toContain(`run \`${RUN_AS} setup\` again and click Allow`);
      expect(result.stdout).not.toContain('✓');

      expect(run.emulator.state.codes.size).toBe(0);
      expect(run.emulator.state.grants.size).toBe(0);
      expect(dropboxSources(run.emulator)).toEqual([]);
      const workflow = run.emulator.state.workspaces.get('default')?.workflows.get(run.emulator.seeded?.workflowId as string);
      expect(workflow?.sources).toEqual([]);
      expect(workflow?.schedule).toBeNull();
      expect(existsSync(path.join(run.configDir, 'profiles', `${PROFILE}.json`))).toBe(false);
      expect(existsSync(path.join(run.configDir, 'secrets.enc'))).toBe(false);

      expect([...hosts].every((h) => h.startsWith('127.0.0.1:'))).toBe(true);
    } finally {
      await context.close();
    }
  });
});
