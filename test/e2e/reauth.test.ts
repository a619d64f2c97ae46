// The loop as a person meets it, end to end: a real daemon process (file store, token file, health listener,
// re-authorization page on 127.0.0.1), the grant revoked at the emulated Dropbox, the daemon parks the profile,
// a link is minted (`syncauth reauth-link`; the notice that will carry it is not part of this run), and a real
// headless Chromium opens it, goes to the emulated Dropbox, clicks Allow and lands back on the success page.
// Within seconds the token file holds a live token of the new grant, the connector holds the grant, the check
// passed, /readyz is 200 and `status` exits 0. The time from revocation to the fresh token is printed.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator, type EmulatorApp, type RunningEmulator } from '../../src/emulator/index.js';
import { CLI, tempDir } from '../helpers/cli.js';
import { chromiumAvailability, launchChromium } from '../helpers/chromium.js';
import { freePort, newestRefreshToken, onboardingEnv, runCli, runWithApproval, type Home, type Onboarding } from '../helpers/onboarding.js';

const availability = chromiumAvailability();
if (availability.skip) console.warn(`test/e2e/reauth.test.ts: ${availability.reason}`);

const PROFILE = 'docs';

describe.skipIf(availability.skip)('re-authorization in a real browser (headless Chromium)', () => {
  let browser: Browser | undefined;
  let emulator: RunningEmulator | undefined;
  let daemon: ChildProcess | undefined;

  beforeAll(async () => {
    browser = await launchChromium(availability);
  });

  afterAll(async () => {
    daemon?.kill('SIGKILL');
    await browser?.close();
    await emulator?.close();
  });

  it('revoked, parked, one click at Dropbox, and the daemon renews, reconciles and checks with the new grant', async () => {
    if (!browser) throw new Error('no browser');
    const setupRedirect = `http://127.0.0.1:${await freePort()}/callback`;
    const pagePort = await freePort();
    const healthPort = await freePort();
    const publicUrl = `http://127.0.0.1:${pagePort}`;
    const app: EmulatorApp = { ...DEFAULT_APP, redirectUris: [setupRedirect, `${publicUrl}/reauthorize/callback`] };
    // Short tokens and a margin of most of their life: the daemon renews every few seconds, and so finds a
    // revoked grant within seconds.
    emulator = await startEmulator({ apps: [app], autoApprove: false, tokenLifetimeSeconds: 40 });
    const ob: Onboarding = { emulator, redirectUri: setupRedirect, app, apiKey: DEFAULT_EMULATOR_API_KEY };
    const dir = tempDir('syncauth-reauth-e2e-');
    const home: Home = { dir, configDir: path.join(dir, 'config'), storeKey: randomBytes(24).toString('base64url') };
    const env = onboardingEnv(ob, home, { SYNCAUTH_PROFILE: PROFILE });
    const setup = await runWithApproval(['setup', '--yes', '--no-open', '--public-url', publicUrl], { env, cwd: dir });
    expect(setup.code, setup.stderr).toBe(0);
    expect(setup.stdout).toContain(`add ${publicUrl}/reauthorize/callback to the app's redirect URIs`);
    const accountId = emulator.state.account.accountId;
    const first = newestRefreshToken(ob);

    const tokenFile = path.join(dir, 'token');
    const daemonEnv: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dir,
      SYNCAUTH_CONFIG_DIR: home.configDir,
      SYNCAUTH_STORE: 'file',
      SYNCAUTH_STORE_KEY: home.storeKey,
      SYNCAUTH_RENEW_MARGIN: '35',
      SYNCAUTH_PUBLIC_URL: publicUrl,
    };
    daemon = spawn(process.execPath, [
      CLI, 'daemon', '--profile', PROFILE, '--token-file', tokenFile, '--sweep', '* * * * * *',
      '--listen', `127.0.0.1:${healthPort}`, '--reauth-listen', `127.0.0.1:${pagePort}`, '--log-level', 'info',
    ], { cwd: dir, env: daemonEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let logs = '';
    daemon.stdout?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    daemon.stderr?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    const readyz = async (): Promise<{ status: number; body: { profiles?: Record<string, { reason?: string }> } }> => {
      const answer = await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined);
      return answer ? { status: answer.status, body: (await answer.json()) as { profiles?: Record<string, { reason?: string }> } } : { status: 0, body: {} };
    };
    await expect.poll(async () => (await readyz()).status, { timeout: 20_000, interval: 200 }).toBe(200);

    // The user unlinks the app at Dropbox.
    emulator.revokeGrant(first);
    const revokedAt = performance.now();
    await expect.poll(async () => (await readyz()).body.profiles?.[PROFILE]?.reason ?? '', { timeout: 20_000, interval: 100 }).toMatch(/re-?authoriz/i);
    const parkedAt = performance.now();
    expect(logs).toContain('"event":"profile.reauthorization_needed"');

    const linkRun = await runCli(['reauth-link', '--profile', PROFILE], { env: { ...daemonEnv }, cwd: dir });
    expect(linkRun.code, linkRun.stderr).toBe(0);
    const link = linkRun.stdout.trim();
    expect(link).toMatch(new RegExp(`^${publicUrl}/reauthorize/[A-Za-z0-9_-]{43}$`));
    const token = link.split('/').pop() as string;
    const before = await runCli(['status', '--profile', PROFILE], { env: daemonEnv, cwd: dir });
    expect(before.code).toBe(4);
    expect(before.stdout).toMatch(/reauthorization link:\s+outstanding, expires /);
    expect(`${before.stdout}${before.stderr}`).not.toContain(token);

    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const opened = await page.goto(link);
      expect(opened?.status()).toBe(200);
      expect(opened?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
      await expect(page.title()).resolves.toBe('Authorize syncauth again');
      await expect(page.locator('#profile').innerText()).resolves.toBe(PROFILE);
      await expect(page.locator('#account').innerText()).resolves.toBe(accountId);
      await page.locator('#authorize').click();
      await page.waitForURL((url) => url.href.startsWith(emulator?.authorizeUrl ?? '-'));
      await expect(page.title()).resolves.toBe('API Request Authorization - Dropbox');
      const [landed] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${publicUrl}/reauthorize/callback?`), { timeout: 90_000 }),
        page.locator('#allow').click(),
      ]);
      expect(landed.status()).toBe(200);
      await expect(page.title()).resolves.toBe('syncauth is authorized again');
      const text = await page.locator('body').innerText();
      expect(text).toContain("The service's connection check passed.");
      expect(text).toContain('The connector holds a fresh token.');
    } finally {
      await context.close();
    }

    // The token file holds a live token of the new grant.
    const second = newestRefreshToken(ob);
    expect(second).not.toBe(first);
    const live = (): boolean => {
      let value: string;
      try {
        value = readFileSync(tokenFile, 'utf8').trim();
      } catch {
        return false;
      }
      const issued = emulator?.state.accessTokens.get(value);
      const grant = issued && emulator?.state.grants.get(issued.grantId);
      return Boolean(grant && grant.refreshToken === second && grant.revokedAt === null && (issued?.expiresAt ?? 0) > Date.now());
    };
    await expect.poll(live, { timeout: 10_000, interval: 50 }).toBe(true);
    const freshAt = performance.now();
    const connector = [...(emulator.state.workspaces.get('default')?.sources.values() ?? [])].find((s) => s.type === 'dropbox');
    expect(connector?.config.refresh_token).toBe(second);
    expect((await readyz()).status).toBe(200);
    const after = await runCli(['status', '--profile', PROFILE], { env: daemonEnv, cwd: dir });
    expect(after.code, after.stdout + after.stderr).toBe(0);
    expect(after.stdout).not.toContain('reauthorization link');
    expect(logs).toContain('"event":"reauth.completed"');
    // No secret in the daemon's log.
    for (const secret of [first, second, app.appSecret, token]) expect(logs).not.toContain(secret);
    console.log(
      `re-authorization loop: revocation to parked ${Math.round(parkedAt - revokedAt)} ms; ` +
        `revocation to a fresh token in the file ${Math.round(freshAt - revokedAt)} ms (link minted, page, Dropbox, back, store, renew, reconcile, check)`,
    );
  }, 120_000);
});
