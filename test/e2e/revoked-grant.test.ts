// A revoked grant as a person meets it, with real 4-hour tokens: a real daemon process over a stored profile
// (file store, token file, health listener, notices to a receiver that verifies their signatures with the
// `standardwebhooks` library). Without the token checks nothing would happen before the next renewal, 3¾ hours
// away. The grant is revoked at the emulated Dropbox; with a short check interval (a setting), the daemon's
// next check meets invalid_access_token, its renewal meets invalid_grant, and it parks the profile: /readyz 503,
// the notice sent, the token file withdrawn. Then what another process learns: a `syncauth refresh` in a shell
// that meets invalid_grant makes the running daemon renew (and park on its own invalid_grant) within one sweep,
// checks off; and a re-authorization by `setup` is adopted within one sweep.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLI } from '../helpers/cli.js';
import {
  grantRefreshToken, newestAccessTokenOf, onboardingEnv, onboardWithGrant, runCli, startOnboarding, type Onboarded, type Onboarding,
} from '../helpers/onboarding.js';
import { startReceiver, type Receiver } from '../notify/receiver.js';

const FOUR_HOURS = 14_400;
const NOTIFY_SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const PROFILE = 'docs';

let ob: Onboarding;
const children: ChildProcess[] = [];

beforeAll(async () => {
  ob = await startOnboarding({ emulator: { tokenLifetimeSeconds: FOUR_HOURS } });
});
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});
afterAll(async () => ob.emulator.close());

interface Running {
  logs: () => string;
  listen: string;
  tokenFile: string;
  receiver: Receiver;
  readyz(): Promise<{ status: number; body: { checks?: { noticeWithinSeconds?: number }; profiles?: Record<string, { reason?: string }> } }>;
}

/** `syncauth daemon` over the onboarded profile, its token file in the home, notices to a verifying receiver. */
async function startDaemon(onboarded: Onboarded, args: string[]): Promise<Running> {
  const receiver = await startReceiver();
  const tokenFile = path.join(onboarded.home.dir, 'token');
  const child = spawn(
    process.execPath,
    [CLI, 'daemon', '--profile', PROFILE, '--token-file', tokenFile, '--listen', '127.0.0.1:0', '--notify-url', receiver.url, '--log-level', 'info', ...args],
    { cwd: onboarded.home.dir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: onboarded.home.dir, ...onboarded.env, SYNCAUTH_NOTIFY_SECRET: NOTIFY_SECRET }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let logs = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (logs += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (logs += d));
  await expect.poll(() => logs.includes('daemon started'), { timeout: 30_000, interval: 100 }).toBe(true);
  const started = JSON.parse(logs.split('\n').find((l) => l.includes('daemon started')) as string) as { listen: string };
  const running: Running = {
    logs: () => logs,
    listen: started.listen,
    tokenFile,
    receiver,
    async readyz() {
      const answer = await fetch(`${started.listen}/readyz`).catch(() => undefined);
      return answer ? { status: answer.status, body: (await answer.json()) as Awaited<ReturnType<Running['readyz']>>['body'] } : { status: 0, body: {} };
    },
  };
  await expect.poll(async () => (await running.readyz()).status, { timeout: 30_000, interval: 200 }).toBe(200);
  return running;
}

/** The notices' types, each verified as a receiver would (a bad signature throws). */
function noticeTypes(receiver: Receiver): string[] {
  const hook = new Webhook(NOTIFY_SECRET);
  return receiver.received.map((request) =>
    (hook.verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    }) as { type: string }).type,
  );
}

/** Token requests the emulator refused with invalid_grant, so far. */
function invalidGrants(): number {
  return ob.emulator.state.requests.filter((r) => r.route === 'token' && r.status === 400).length;
}

describe('a revoked grant with 4-hour tokens', () => {
  it('is seen at the next check: /readyz 503, the notice sent, the token file withdrawn', async () => {
    const onboarded = await onboardWithGrant(ob, PROFILE);
    // The default sweep (every minute): what finds the revocation here is the check, every 2 s.
    const daemon = await startDaemon(onboarded, ['--check-interval', '2s']);
    expect((await daemon.readyz()).body.checks).toMatchObject({ noticeWithinSeconds: 2 });
    const published = readFileSync(daemon.tokenFile, 'utf8').trim();
    expect(published).toBe(newestAccessTokenOf(ob, onboarded.refreshToken));
    expect(ob.emulator.state.accessTokens.get(published)?.expiresAt ?? 0).toBeGreaterThan(Date.now() + 3 * 3_600_000);

    // The person unlinks the app at Dropbox.
    ob.emulator.revokeGrant(onboarded.refreshToken);
    await expect.poll(async () => (await daemon.readyz()).status, { timeout: 60_000, interval: 200 }).toBe(503);
    expect((await daemon.readyz()).body.profiles?.[PROFILE]?.reason).toMatch(/re-authorization needed/);
    await expect.poll(() => noticeTypes(daemon.receiver), { timeout: 60_000, interval: 200 }).toContain('profile.reauthorization_needed');
    await expect.poll(() => existsSync(daemon.tokenFile), { timeout: 10_000, interval: 100 }).toBe(false);
    expect(daemon.logs()).toContain('"event":"token.refused"');
    expect(daemon.logs()).toContain('"event":"profile.reauthorization_needed"');
    const metrics = await (await fetch(`${daemon.listen}/metrics`)).text();
    expect(metrics).toMatch(/syncauth_token_checks_total\{profile="docs",outcome="invalid"\} 1/);
  }, 180_000);

  it("a `refresh` in another process that meets invalid_grant makes the daemon renew within one sweep, and park on its own", async () => {
    const onboarded = await onboardWithGrant(ob, PROFILE);
    // Checks off: only what the other process recorded can tell the daemon. A sweep every 2 s.
    const daemon = await startDaemon(onboarded, ['--check-interval', 'off', '--sweep', '*/2 * * * * *']);
    ob.emulator.revokeGrant(onboarded.refreshToken);
    const before = invalidGrants();
    const refresh = await runCli(['refresh', '--profile', PROFILE], { env: onboarded.env, cwd: onboarded.home.dir });
    expect(refresh.code).not.toBe(0);
    expect(refresh.stderr).toMatch(/invalid_grant|re-?authoriz/i);
    // Its own request met invalid_grant (the daemon's may already have followed it).
    expect(invalidGrants()).toBeGreaterThanOrEqual(before + 1);
    // The daemon tried for itself (one more invalid_grant at Dropbox than the refresh's), and parked on that.
    await expect.poll(async () => (await daemon.readyz()).status, { timeout: 30_000, interval: 200 }).toBe(503);
    expect(invalidGrants()).toBeGreaterThanOrEqual(before + 2);
    expect(daemon.logs()).toContain('"event":"grant.failed_elsewhere"');
    await expect.poll(() => noticeTypes(daemon.receiver), { timeout: 30_000, interval: 200 }).toContain('profile.reauthorization_needed');
    expect(existsSync(daemon.tokenFile)).toBe(false);
  }, 120_000);

  it('a re-authorization by `setup` is adopted within one sweep', async () => {
    const onboarded = await onboardWithGrant(ob, PROFILE);
    const daemon = await startDaemon(onboarded, ['--check-interval', 'off', '--sweep', '*/2 * * * * *']);
    // Revoked, unnoticed (checks off, the token's renewal hours away); the person authorizes again with setup.
    ob.emulator.revokeGrant(onboarded.refreshToken);
    const fresh = await grantRefreshToken(ob);
    const setup = await runCli(['setup', '--yes', '--json', '--profile', PROFILE, '--connector-name', `conn-${PROFILE}`], {
      env: onboardingEnv(ob, onboarded.home, { SYNCAUTH_REFRESH_TOKEN: fresh }), cwd: onboarded.home.dir,
    });
    expect(setup.code, setup.stderr).toBe(0);
    // The daemon's token file holds a live token of the new grant.
    const liveOfNewGrant = (): boolean => {
      const token = existsSync(daemon.tokenFile) ? readFileSync(daemon.tokenFile, 'utf8').trim() : '';
      const issued = ob.emulator.state.accessTokens.get(token);
      const grant = issued && ob.emulator.state.grants.get(issued.grantId);
      return grant?.refreshToken === fresh && grant.revokedAt === null;
    };
    await expect.poll(liveOfNewGrant, { timeout: 30_000, interval: 200 }).toBe(true);
    expect((await daemon.readyz()).status).toBe(200);
    expect(daemon.logs()).toContain('"event":"grant.changed"');
  }, 120_000);
});
