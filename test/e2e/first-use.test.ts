// A first use as a person meets it, in a real (headless) Chromium against the emulator: a wrong service API key
// is caught before any browser opens (nothing opened, exit 4, the setting named, nothing stored), and with the
// right key setup opens the browser itself, Allow is clicked, and the success page appears with the grant in
// hand. The browser setup opens is a recorder script named by BROWSER (which xdg-open honours): it notes the
// URL, and the test opens that URL in Chromium.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, connectionSettings, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { CLI, tempDir, type CliResult } from '../helpers/cli.js';
import { chromiumAvailability, launchChromium } from '../helpers/chromium.js';
import { filesUnder, freePort } from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';

const availability = chromiumAvailability();
if (availability.skip) console.warn(`test/e2e/first-use.test.ts: ${availability.reason}`);

describe.skipIf(availability.skip)('first use in a real browser (headless Chromium)', () => {
  let browser: Browser | undefined;
  let emulator: RunningEmulator;
  let redirectUri: string;

  beforeAll(async () => {
    browser = await launchChromium(availability);
    redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
    emulator = await startEmulator({ apps: [{ ...DEFAULT_APP, redirectUris: [redirectUri] }], autoApprove: false });
  });
  afterAll(async () => {
    await browser?.close();
    await emulator.close();
  });

  function firstUse(home: string, apiKey: string): { opened: string; exit: Promise<CliResult> } {
    const opened = path.join(home, 'opened.txt');
    const recorder = path.join(home, 'browser.sh');
    writeFileSync(recorder, `#!/bin/sh\nprintf '%s\\n' "$1" >> '${opened}'\n`);
    chmodSync(recorder, 0o755);
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      BROWSER: recorder,
      SYNCAUTH_CONFIG_DIR: path.join(home, 'config'),
      SYNCAUTH_STORE: 'file',
      SYNCAUTH_STORE_KEY: randomBytes(24).toString('base64url'),
      ...connectionSettings(emulator),
      SYNCAUTH_API_KEY: apiKey,
      SYNCAUTH_REDIRECT_URI: redirectUri,
      SYNCAUTH_REMOTE_URL: 'dropbox://data',
      SYNCAUTH_WORKFLOW_ID: emulator.seeded?.workflowId ?? '',
    };
    // No --no-open: setup opens the browser itself, as on a person's desktop.
    const child = spawn(process.execPath, [CLI, 'setup', '--yes', '--timeout', '25'], { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    const exit = new Promise<CliResult>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
    return { opened, exit };
  }

  it('a wrong API key is caught before the browser opens; the right one completes setup in the browser', async () => {
    if (!browser) throw new Error('no browser');
    const oauthRequests = () => emulator.state.requests.filter((r) => r.route === 'authorize' || r.route === 'token').length;

    // 1. The wrong key: nothing opened, nothing asked of Dropbox, nothing stored.
    const wrongHome = tempDir('syncauth-first-use-');
    const wrong = firstUse(wrongHome, 'a-key-of-another-workspace');
    const refused = await wrong.exit;
    expect(refused.stderr).toMatch(/error: SYNCAUTH_API_KEY: the service at 127\.0\.0\.1:\d+ refused the API key \(401\)/);
    expect(refused.stderr).toMatch(/hint: set SYNCAUTH_API_KEY to an API key of the workspace/);
    expect(refused.stderr).not.toContain('a-key-of-another-workspace');
    expect(refused.stderr).not.toMatch(/oauth2\/authorize/);
    expect(refused.code).toBe(4);
    expect(existsSync(wrong.opened)).toBe(false);
    expect(oauthRequests()).toBe(0);
    expect(filesUnder(path.join(wrongHome, 'config'))).toEqual([]);

    // 2. The right key: setup opens the browser; Allow; the success page comes with the grant in hand.
    const home = tempDir('syncauth-first-use-');
    const right = firstUse(home, connectionSettings(emulator).SYNCAUTH_API_KEY as string);
    const url = await waitFor('setup to open the browser', () => (existsSync(right.opened) ? readFileSync(right.opened, 'utf8').trim() || undefined : undefined), 15_000);
    expect(url.startsWith(`${emulator.authorizeUrl}?`)).toBe(true);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(url);
      await expect(page.title()).resolves.toBe('API Request Authorization - Dropbox');
      await Promise.all([page.waitForURL((u) => u.href.startsWith(`${redirectUri}?`)), page.locator('#allow').click()]);
      await expect(page.locator('h1').innerText()).resolves.toBe('syncauth is authorized');
      // The page came after the exchange: the grant exists when it shows.
      expect(emulator.state.grants.size).toBe(1);
    } finally {
      await context.close();
    }
    const result = await right.exit;
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/✓ source connector dropbox-data created/);
    expect(result.stdout).toMatch(/✓ workflow .* reads from it/);
    expect(readFileSync(right.opened, 'utf8').trim().split('\n')).toHaveLength(1);
  });
});
