// The loop as a person meets it, end to end: a real daemon process (file store, token file, health listener,
// re-authorization page on 127.0.0.1, --notify-url to a webhook receiver that verifies each signature with the
// reference `standardwebhooks` library); the app unlinked at the emulated Dropbox's Connected apps, in the
// browser; the daemon parks the profile and the receiver gets `profile.reauthorization_needed` carrying the
// link. A real headless Chromium opens the link from that notice, goes to the emulated Dropbox, clicks Allow and
// lands back on the success page; or, where the page's callback is not registered with the app, opens "Paste the
// code instead", lets Dropbox show a code in a tab of its own, pastes it and clicks Finish. The browser sends its
// own headers (the page's referrer policy decides what it says of where the form came from); none is set by
// hand, and no shell command runs in between. Within seconds the token file holds a live token of the new
// grant, the connector holds the grant, the check passed, `profile.reauthorized` arrived, /readyz is 200 and
// `status` exits 0; the link is spent (a second open gets the forged link's 404). The time from revocation to
// the fresh token is printed.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator, type EmulatorApp, type RunningEmulator } from '../../src/emulator/index.js';
import { CLI, tempDir } from '../helpers/cli.js';
import { chromiumAvailability, launchChromium } from '../helpers/chromium.js';
import { freePort, newestRefreshToken, onboardingEnv, runCli, runWithApproval, type Home, type Onboarding } from '../helpers/onboarding.js';
import { startReceiver, type Receiver } from '../notify/receiver.js';

const availability = chromiumAvailability();
if (availability.skip) console.warn(`test/e2e/reauth.test.ts: ${availability.reason}`);

const PROFILE = 'docs';
const NOTIFY_SECRET = `whsec_${randomBytes(32).toString('base64')}`;

interface Notice {
  type: string;
  data: { profile?: string; link?: string; linkExpiresAt?: string; ask?: number };
}

/** Every notice the receiver took, each verified as a receiver would (a bad signature throws). */
function verifiedNotices(receiver: Receiver): Notice[] {
  const hook = new Webhook(NOTIFY_SECRET);
  return receiver.received.map((request) =>
    hook.verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    }) as Notice,
  );
}

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

  it.each(['redirect', 'paste'] as const)('revoked, told with a link, one click at Dropbox (%s), and the daemon renews, reconciles, checks and tells it is over', async (way) => {
    if (!browser) throw new Error('no browser');
    daemon?.kill('SIGKILL');
    await emulator?.close();
    const setupRedirect = `http://127.0.0.1:${await freePort()}/callback`;
    const pagePort = await freePort();
    const healthPort = await freePort();
    const publicUrl = `http://127.0.0.1:${pagePort}`;
    // The paste form is for an app where the page's callback cannot be registered: there it is not.
    const app: EmulatorApp = { ...DEFAULT_APP, redirectUris: way === 'redirect' ? [setupRedirect, `${publicUrl}/reauthorize/callback`] : [setupRedirect] };
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
      SYNCAUTH_NOTIFY_SECRET: NOTIFY_SECRET,
    };
    const receiver = await startReceiver();
    daemon = spawn(process.execPath, [
      CLI, 'daemon', '--profile', PROFILE, '--token-file', tokenFile, '--sweep', '* * * * * *',
      '--listen', `127.0.0.1:${healthPort}`, '--reauth-listen', `127.0.0.1:${pagePort}`, '--notify-url', receiver.url, '--log-level', 'info',
    ], { cwd: dir, env: daemonEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let logs = '';
    daemon.stdout?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    daemon.stderr?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    const readyz = async (): Promise<{ status: number; body: { profiles?: Record<string, { reason?: string }> } }> => {
      const answer = await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined);
      return answer ? { status: answer.status, body: (await answer.json()) as { profiles?: Record<string, { reason?: string }> } } : { status: 0, body: {} };
    };
    await expect.poll(async () => (await readyz()).status, { timeout: 20_000, interval: 200 }).toBe(200);

    // The account's owner unlinks the app at Dropbox: Connected apps, Disconnect, in the browser.
    const settings = await browser.newContext();
    try {
      const apps = await settings.newPage();
      await apps.goto(`${emulator.url}/account/connected_apps`);
      await expect(apps.locator('#connected-apps .app').innerText()).resolves.toBe(app.name);
      await apps.locator('#connected-apps .disconnect').click();
      await apps.waitForURL(`${emulator.url}/account/connected_apps`);
      await expect(apps.locator('#none').isVisible()).resolves.toBe(true);
    } finally {
      await settings.close();
    }
    expect([...emulator.state.grants.values()].find((g) => g.refreshToken === first)?.revokedAt).not.toBeNull();
    const revokedAt = performance.now();
    await expect.poll(async () => (await readyz()).body.profiles?.[PROFILE]?.reason ?? '', { timeout: 20_000, interval: 100 }).toMatch(/re-?authoriz/i);
    const parkedAt = performance.now();
    expect(logs).toContain('"event":"profile.reauthorization_needed"');

    // The notice, signed, carrying the link: the person's only way to the page.
    const needed = async (): Promise<Notice | undefined> => verifiedNotices(receiver).find((n) => n.type === 'profile.reauthorization_needed');
    await expect.poll(needed, { timeout: 20_000, interval: 100 }).toBeDefined();
    const toldAt = performance.now();
    const notice = (await needed()) as Notice;
    expect(notice.data).toMatchObject({ profile: PROFILE, ask: 1 });
    const link = notice.data.link as string;
    expect(link).toMatch(new RegExp(`^${publicUrl}/reauthorize/[A-Za-z0-9_-]{43}$`));
    expect(Date.parse(notice.data.linkExpiresAt ?? '')).toBeGreaterThan(Date.now());
    const token = link.split('/').pop() as string;
    // What the operator sees meanwhile, without a shell: /readyz names the profile's reason.
    expect((await readyz()).status).toBe(503);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const opened = await page.goto(link);
      expect(opened?.status()).toBe(200);
      expect(opened?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
      await expect(page.title()).resolves.toBe('Authorize syncauth again');
      await expect(page.locator('#profile').innerText()).resolves.toBe(PROFILE);
      await expect(page.locator('#account').innerText()).resolves.toBe(accountId);
      if (way === 'redirect') {
        await page.locator('#authorize').click();
        await page.waitForURL((url) => url.href.startsWith(emulator?.authorizeUrl ?? '-'));
        await expect(page.title()).resolves.toBe('API Request Authorization - Dropbox');
        const [landed] = await Promise.all([
          page.waitForResponse((r) => r.url().startsWith(`${publicUrl}/reauthorize/callback?`), { timeout: 90_000 }),
          page.locator('#allow').click(),
        ]);
        expect(landed.status()).toBe(200);
      } else {
        await page.getByText('No redirect back here? Paste the code instead').click();
        // "let Dropbox show a code" opens Dropbox in a tab of its own; Allow there shows the code.
        const [dropbox] = await Promise.all([context.waitForEvent('page'), page.locator('#code-display').click()]);
        await dropbox.waitForLoadState();
        await expect(dropbox.title()).resolves.toBe('API Request Authorization - Dropbox');
        await dropbox.locator('#allow').click();
        const code = await dropbox.locator('#code').innerText();
        expect(code.length).toBeGreaterThan(10);
        await dropbox.close();
        await page.locator('#code').fill(code);
        const [finished] = await Promise.all([
          page.waitForResponse((r) => r.url() === link && r.request().method() === 'POST', { timeout: 90_000 }),
          page.locator('#submit-code').click(),
        ]);
        expect(finished.status(), await finished.text()).toBe(200);
        // What Chromium said of the form's origin under the page's `Referrer-Policy: no-referrer` (Fetch: a
        // POST's serialized origin is "null" under that policy): the form cannot rely on it.
        expect(await finished.request().headerValue('origin')).toBe('null');
      }
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
    // Whole, so that a failure names the profile's reason.
    expect(await readyz()).toMatchObject({ status: 200 });
    const after = await runCli(['status', '--profile', PROFILE], { env: daemonEnv, cwd: dir });
    expect(after.code, after.stdout + after.stderr).toBe(0);
    expect(after.stdout).not.toContain('reauthorization link');
    expect(logs).toContain('"event":"reauth.completed"');
    // The loop closed is told too, signed as well.
    await expect.poll(() => verifiedNotices(receiver).map((n) => n.type), { timeout: 10_000, interval: 100 }).toContain('profile.reauthorized');
    expect(verifiedNotices(receiver).find((n) => n.type === 'profile.reauthorized')?.data).toMatchObject({ profile: PROFILE });
    expect(verifiedNotices(receiver).filter((n) => n.type === 'profile.reauthorization_needed')).toHaveLength(1);

    // The link in the notice is spent: opened again, it gets the very 404 a forged link gets.
    const again = await fetch(link);
    const forged = await fetch(`${publicUrl}/reauthorize/${randomBytes(32).toString('base64url')}`);
    expect(again.status).toBe(404);
    expect(forged.status).toBe(404);
    expect(await again.text()).toBe(await forged.text());
    const context2 = await browser.newContext();
    try {
      const page = await context2.newPage();
      const reopened = await page.goto(link);
      expect(reopened?.status()).toBe(404);
    } finally {
      await context2.close();
    }
    const bodies = receiver.received.map((r) => `${r.body}\n${JSON.stringify(r.headers)}`).join('\n');
    // No secret in the daemon's log.
    for (const secret of [first, second, app.appSecret, token, NOTIFY_SECRET]) expect(logs).not.toContain(secret);
    for (const secret of [first, second, app.appSecret, NOTIFY_SECRET, ...emulator.state.accessTokens.keys()]) expect(bodies).not.toContain(secret);
    console.log(
      `re-authorization loop (${way}): revocation to parked ${Math.round(parkedAt - revokedAt)} ms; ` +
        `revocation to the notice with its link ${Math.round(toldAt - revokedAt)} ms; ` +
        `revocation to a fresh token in the file ${Math.round(freshAt - revokedAt)} ms (notice, page, Dropbox, back, store, renew, reconcile, check)`,
    );
  }, 120_000);
});
