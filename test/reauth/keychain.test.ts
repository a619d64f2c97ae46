// The loop with the keychain store: a daemon process whose profile's secrets live in a real Secret Service
// (gnome-keyring on a private bus), parked by a revoked grant, re-authorized through the page (its HTTP walked as
// a browser walks it): the new grant lands in the keychain, the old one is gone from it, and the daemon renews.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator, type EmulatorApp, type RunningEmulator } from '../../src/emulator/index.js';
import { CLI } from '../helpers/cli.js';
import { freePort, newestRefreshToken, onboardingEnv, runCli, runWithApproval, type Onboarding } from '../helpers/onboarding.js';
import { isCI, startSecretService, type Bus } from '../helpers/secret-service.js';
import { approveAt, hrefOf } from './world.js';

const probe = await startSecretService();
if (probe.ok) await probe.bus.stop();
const skip = !probe.ok && !isCI();
if (skip && !probe.ok) console.warn(`test/reauth/keychain.test.ts: no Secret Service (${probe.reason})`);

describe.skipIf(skip)('re-authorization with the keychain store', () => {
  let bus: Bus | undefined;
  let emulator: RunningEmulator | undefined;
  let daemon: ChildProcess | undefined;

  afterAll(async () => {
    daemon?.kill('SIGKILL');
    await emulator?.close();
    await bus?.stop();
  });

  it('stores the new grant in the keychain and renews with it', async () => {
    const started = await startSecretService();
    if (!started.ok) throw new Error(`a Secret Service is required in CI: ${started.reason}`);
    bus = started.bus;
    const setupRedirect = `http://127.0.0.1:${await freePort()}/callback`;
    const pagePort = await freePort();
    const publicUrl = `http://127.0.0.1:${pagePort}`;
    const app: EmulatorApp = { ...DEFAULT_APP, redirectUris: [setupRedirect, `${publicUrl}/reauthorize/callback`] };
    emulator = await startEmulator({ apps: [app], autoApprove: false, tokenLifetimeSeconds: 40 });
    const ob: Onboarding = { emulator, redirectUri: setupRedirect, app, apiKey: DEFAULT_EMULATOR_API_KEY };
    const dir = mkdtempSync(path.join(tmpdir(), 'syncauth-reauth-keychain-'));
    const configDir = path.join(dir, 'config');
    const keychainEnv = { SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'keychain', DBUS_SESSION_BUS_ADDRESS: bus.address };
    const setup = await runWithApproval(['setup', '--yes', '--no-open', '--no-check'], {
      env: { ...onboardingEnv(ob, { dir, configDir, storeKey: '' }, { SYNCAUTH_PROFILE: 'docs' }), ...keychainEnv, SYNCAUTH_STORE_KEY: undefined },
      cwd: dir,
    });
    expect(setup.code, setup.stderr).toBe(0);
    expect(setup.stdout).toContain('stored in the keychain store');
    const first = newestRefreshToken(ob);
    const keychain = () => openSecretStore({ kind: 'keychain', configDir, env: { ...process.env, DBUS_SESSION_BUS_ADDRESS: bus?.address } });
    expect((await keychain().get('docs')).refresh_token).toBe(first);

    const tokenFile = path.join(dir, 'token');
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ...keychainEnv, SYNCAUTH_RENEW_MARGIN: '35' };
    daemon = spawn(process.execPath, [
      CLI, 'daemon', '--profile', 'docs', '--token-file', tokenFile, '--sweep', '* * * * * *',
      '--reauth-listen', `127.0.0.1:${pagePort}`, '--public-url', publicUrl,
    ], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let logs = '';
    daemon.stdout?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    daemon.stderr?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    await expect.poll(() => logs, { timeout: 20_000 }).toContain('"event":"renewal.succeeded"');

    emulator.revokeGrant(first);
    await expect.poll(() => logs, { timeout: 20_000 }).toContain('"event":"profile.reauthorization_needed"');
    const linkRun = await runCli(['reauth-link', '--profile', 'docs', '--public-url', publicUrl], { env, cwd: dir });
    expect(linkRun.code, linkRun.stderr).toBe(0);

    // The browser's walk: the page, Dropbox's Allow, the redirect back.
    const page = await fetch(linkRun.stdout.trim());
    expect(page.status).toBe(200);
    const back = await approveAt(hrefOf(await page.text(), 'authorize'));
    const done = await fetch(back.location as string);
    expect(await done.text()).toContain('syncauth is authorized again');

    const second = newestRefreshToken(ob);
    expect(second).not.toBe(first);
    expect((await keychain().get('docs')).refresh_token).toBe(second);
    const live = (): boolean => {
      const issued = emulator?.state.accessTokens.get(readFileSync(tokenFile, 'utf8').trim());
      return issued !== undefined && emulator?.state.grants.get(issued.grantId)?.refreshToken === second;
    };
    await expect.poll(live, { timeout: 10_000 }).toBe(true);
    for (const secret of [first, second, app.appSecret]) expect(logs).not.toContain(secret);
  }, 90_000);
});
