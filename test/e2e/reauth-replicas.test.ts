// The loop with two replicas, as a Kubernetes Deployment runs them: two real daemon processes with the env store
// (the grant comes from the environment, as from a Secret), one real redis-server, each with its own token file
// and config dir, notices to a receiver that verifies their Standard Webhooks signatures, the page on each, the
// grant key, and --on-reauthorized writing what it reads on stdin to a file (as a command updating the Secret
// would). The grant is revoked at the emulated Dropbox; both replicas park, the receiver gets one
// profile.reauthorization_needed with the link; headless Chromium opens it on replica A's page and clicks Allow
// at the emulated Dropbox. A takes the new grant, seals it into Redis and hands it to the command; B, parked,
// takes it at its next sweep. Then each replica is killed with SIGKILL and started again with the OLD grant in
// its environment (a pod restarted before the Secret changed): it takes the sealed grant and keeps renewing.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, startEmulator, type EmulatorApp, type RunningEmulator } from '../../src/emulator/index.js';
import { createAuthorizationRequest, exchangeCode } from '../../src/oauth/index.js';
import type { DaemonGrant } from '../../src/daemon/index.js';
import { CLI, tempDir, watchNodeWarnings } from '../helpers/cli.js';
import { chromiumAvailability, launchChromium } from '../helpers/chromium.js';
import { freePort } from '../helpers/onboarding.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { containerEnv } from '../daemon/process.js';
import { startReceiver } from '../notify/receiver.js';

const browserAvailability = chromiumAvailability();
const redis = redisAvailability();
const skip = browserAvailability.skip || redis.skip;
if (skip) console.warn(`test/e2e/reauth-replicas.test.ts: ${browserAvailability.reason || redis.reason}`);

const PROFILE = 'docs';
const SECRET = `whsec_${Buffer.from('replicas-test-secret-32-bytes-ab').toString('base64')}`;
const GRANT_KEY = Buffer.alloc(32, 0x5a).toString('base64');

interface Replica {
  name: string;
  kill(): Promise<void>;
  logs(): string;
  tokenFile: string;
  hookFile: string;
}

describe.skipIf(skip)('re-authorization with two replicas on Redis and the env store (headless Chromium)', () => {
  let browser: Browser | undefined;
  let emulator: RunningEmulator | undefined;
  let server: RedisServer | undefined;
  const running: Replica[] = [];

  beforeAll(async () => {
    browser = await launchChromium(browserAvailability);
    server = await startRedisServer(redis);
  });

  afterAll(async () => {
    for (const replica of running) await replica.kill();
    await browser?.close();
    await emulator?.close();
    await server?.kill();
  });

  it('one click on one replica\'s page: the other is fresh within a sweep, the Secret\'s command gets the grant, and restarts with the old grant still renew', async () => {
    if (!browser || !server) throw new Error('no browser or redis');
    const setupRedirect = `http://127.0.0.1:${await freePort()}/callback`;
    const pages = { a: await freePort(), b: await freePort() };
    // Behind a load balancer both replicas share one public URL; here it is replica A's page.
    const publicUrl = `http://127.0.0.1:${pages.a}`;
    const app: EmulatorApp = { ...DEFAULT_APP, redirectUris: [setupRedirect, `${publicUrl}/reauthorize/callback`] };
    emulator = await startEmulator({ apps: [app], autoApprove: false, tokenLifetimeSeconds: 40 });
    const emu = emulator;
    const old = await approvedGrant(emu, app, setupRedirect);
    const receiver = await startReceiver();

    const start = (name: 'a' | 'b', grant: DaemonGrant, home: string): Replica => {
      const tokenFile = path.join(home, 'token');
      const hookFile = path.join(home, 'secret-update.env');
      const env: Record<string, string> = {
        ...containerEnv(emu, grant, home, { profile: PROFILE, tokenFile }),
        SYNCAUTH_AUTHORIZE_URL: emu.authorizeUrl,
        SYNCAUTH_RENEW_MARGIN: '35',
        SYNCAUTH_REDIS_URL: server?.url ?? '',
        SYNCAUTH_GRANT_KEY: GRANT_KEY,
        SYNCAUTH_NOTIFY_SECRET: SECRET,
        SYNCAUTH_PUBLIC_URL: publicUrl,
        SYNCAUTH_LOG_LEVEL: 'info',
      };
      const child = spawn(process.execPath, [
        CLI, 'daemon', '--sweep', '* * * * * *', '--reauth-listen', `127.0.0.1:${pages[name]}`, '--notify-url', receiver.url,
        '--on-reauthorized', `cat > '${hookFile}'`,
      ], { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let logs = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (logs += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (logs += d));
      watchNodeWarnings(`replica ${name}`, () => logs);
      const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
      const replica: Replica = {
        name,
        tokenFile,
        hookFile,
        logs: () => logs,
        kill: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          await exited;
        },
      };
      running.push(replica);
      return replica;
    };
    /** The grant of the live token in the replica's token file, when it holds one. */
    const tokenGrant = (replica: Replica): string | undefined => {
      let value: string;
      try {
        value = readFileSync(replica.tokenFile, 'utf8').trim();
      } catch {
        return undefined;
      }
      const issued = emu.state.accessTokens.get(value);
      const grant = issued && emu.state.grants.get(issued.grantId);
      return grant && grant.revokedAt === null && (issued?.expiresAt ?? 0) > Date.now() ? (grant.refreshToken ?? undefined) : undefined;
    };
    const homes = { a: tempDir('syncauth-replica-a-'), b: tempDir('syncauth-replica-b-') };
    let a = start('a', old, homes.a);
    let b = start('b', old, homes.b);
    await waitFor('both replicas renewing with the first grant', () => (tokenGrant(a) === old.refreshToken && tokenGrant(b) === old.refreshToken ? true : undefined), 30_000);
    // The env store's profile learns its Dropbox account while the grant works (the page accepts only that
    // account's grant); a deployment has long done so when a grant is revoked.
    const recorded = (replica: Replica) => replica.logs().includes('"event":"account.recorded"');
    await waitFor('both replicas recording the account', () => (recorded(a) && recorded(b) ? true : undefined), 30_000);

    // The user unlinks the app at Dropbox: both replicas find out at their next renewals.
    emu.revokeGrant(old.refreshToken);
    const revokedAt = performance.now();
    const parked = (replica: Replica) => replica.logs().includes('"event":"profile.reauthorization_needed"');
    await waitFor('both replicas parked', () => (parked(a) && parked(b) ? true : undefined), 30_000);
    const parkedAt = performance.now();

    const verified = () =>
      receiver.received.map((request) =>
        new Webhook(SECRET).verify(request.body, {
          'webhook-id': String(request.headers['webhook-id']),
          'webhook-timestamp': String(request.headers['webhook-timestamp']),
          'webhook-signature': String(request.headers['webhook-signature']),
        }) as { type: string; data: { profile: string; link?: string } },
      );
    const asked = await waitFor('the notice with the link', () => verified().find((p) => p.type === 'profile.reauthorization_needed'), 30_000);
    expect(asked.data.profile).toBe(PROFILE);
    const link = asked.data.link ?? '';
    expect(link).toMatch(new RegExp(`^${publicUrl}/reauthorize/[A-Za-z0-9_-]{43}$`));
    const noticeAt = performance.now();

    const context = await browser.newContext();
    let approvedAt: number;
    try {
      const page = await context.newPage();
      const opened = await page.goto(link);
      expect(opened?.status()).toBe(200);
      await expect(page.title()).resolves.toBe('Authorize syncauth again');
      await page.locator('#authorize').click();
      await page.waitForURL((url) => url.href.startsWith(emu.authorizeUrl));
      const [landed] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${publicUrl}/reauthorize/callback?`), { timeout: 90_000 }),
        page.locator('#allow').click(),
      ]);
      approvedAt = performance.now();
      expect(landed.status()).toBe(200);
      const text = await page.locator('body').innerText();
      expect(await page.title(), text).toBe('syncauth is authorized again');
      expect(text).toContain("The service's connection check passed.");
      expect(text).not.toContain('Warning');
    } finally {
      await context.close();
    }
    const fresh = [...emu.state.grants.values()].filter((g) => g.revokedAt === null).map((g) => g.refreshToken);
    expect(fresh).toHaveLength(1);
    const second = fresh[0] as string;

    await waitFor('a fresh token of the new grant in replica A\'s file', () => (tokenGrant(a) === second ? true : undefined), 10_000);
    const aFreshAt = performance.now();
    // Replica B was not involved: it takes the sealed grant at its next sweep (one a second here).
    await waitFor('a fresh token of the new grant in replica B\'s file', () => (tokenGrant(b) === second ? true : undefined), 10_000);
    const bFreshAt = performance.now();
    expect(b.logs()).toContain('"event":"grant.adopted"');
    // The command got the grant on stdin, as environment-file lines (what `kubectl` reads from /dev/stdin).
    expect(readFileSync(a.hookFile, 'utf8')).toBe(`SYNCAUTH_APP_KEY=${app.appKey}\nSYNCAUTH_APP_SECRET=${app.appSecret}\nSYNCAUTH_REFRESH_TOKEN=${second}\n`);
    expect(existsSync(b.hookFile)).toBe(false);
    await waitFor('profile.reauthorized', () => verified().find((p) => p.type === 'profile.reauthorized'), 30_000);
    // Each notice once, by webhook-id, though both replicas saw both transitions.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const ids = receiver.deliveredIds();
    const byType = new Map<string, string[]>();
    for (const request of receiver.received) {
      const type = (JSON.parse(request.body) as { type: string }).type;
      byType.set(type, [...(byType.get(type) ?? []), String(request.headers['webhook-id'])]);
    }
    expect(byType.get('profile.reauthorization_needed')).toHaveLength(1);
    expect(byType.get('profile.reauthorized')).toHaveLength(1);
    for (const id of ids.values()) expect(id).toBe(1);

    // kill -9 each and start it again with the old grant in its environment, one after the other.
    const restarts: number[] = [];
    for (const name of ['a', 'b'] as const) {
      const before = name === 'a' ? a : b;
      await before.kill();
      const restartedAt = performance.now();
      const after = start(name, old, homes[name]);
      if (name === 'a') a = after;
      else b = after;
      await waitFor(`replica ${name} started`, () => (after.logs().includes('daemon started') ? true : undefined), 20_000);
      expect(after.logs()).toContain('"event":"grant.adopted"');
      // It renews with the sealed grant: a token it obtained itself after the restart, then another one.
      const renewals = () => after.logs().split('\n').filter((line) => line.includes('"event":"renewal.succeeded"')).length;
      await waitFor(`replica ${name} renewing after its restart`, () => (renewals() >= 2 && tokenGrant(after) === second ? true : undefined), 30_000);
      restarts.push(performance.now() - restartedAt);
      expect(after.logs()).not.toContain('"event":"profile.reauthorization_needed"');
    }

    for (const replica of running) for (const secret of [old.refreshToken, second, app.appSecret, GRANT_KEY, link.split('/').pop() as string]) expect(replica.logs()).not.toContain(secret);
    console.log(
      `re-authorization with two replicas: revocation to both parked ${Math.round(parkedAt - revokedAt)} ms; to the notice ${Math.round(noticeAt - revokedAt)} ms; ` +
        `approval to a fresh token on A ${Math.round(aFreshAt - approvedAt)} ms, on B ${Math.round(bFreshAt - approvedAt)} ms; ` +
        `restart (kill -9, old grant in the environment) to two renewals with the new grant: A ${Math.round(restarts[0] ?? 0)} ms, B ${Math.round(restarts[1] ?? 0)} ms`,
    );
  }, 180_000);
});

/** A grant approved at the emulated Dropbox's consent page (Allow), exchanged as setup would. */
async function approvedGrant(emu: RunningEmulator, app: EmulatorApp, redirectUri: string): Promise<DaemonGrant> {
  const request = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: app.appKey, redirectUri });
  const page = await fetch(request.url);
  const nonce = /name="nonce" value="([^"]+)"/.exec(await page.text())?.[1];
  if (!nonce) throw new Error('the consent page has no nonce');
  const decided = await fetch(new URL('/oauth2/authorize', emu.authorizeUrl), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ nonce, decision: 'allow' }).toString(),
  });
  const code = new URL(decided.headers.get('location') ?? 'http://x/').searchParams.get('code');
  if (!code) throw new Error(`no code (${decided.status})`);
  const tokens = await exchangeCode({ tokenUrl: emu.tokenUrl, app: { appKey: app.appKey, appSecret: app.appSecret }, code, redirectUri, codeVerifier: request.codeVerifier });
  return { appKey: app.appKey, appSecret: app.appSecret, refreshToken: tokens.refreshToken };
}
