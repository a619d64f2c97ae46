// The real `syncauth daemon` process: a container's profile made only of environment variables, health on
// an ephemeral loopback port, SIGTERM answered promptly with exit 0 (even while the service trickles), and a
// still-valid token file kept through a restart.
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { runCli } from '../helpers/cli.js';
import { misbehavingServer, trickle } from '../helpers/servers.js';
import { connectorsNamed, emulator, obtainGrant, tempDir, tokenRequests } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { containerEnv, spawnDaemon } from './process.js';

describe('syncauth daemon', () => {
  it('runs an environment-only profile, becomes ready, and exits 0 promptly on SIGTERM', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const { child, out, exited, started } = spawnDaemon(containerEnv(emu, grant, home, { tokenFile }), home);
    try {
      const start = await started();
      expect(start.profiles).toEqual(['container']);
      expect(start.listen).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      await waitFor('readiness', async () => ((await fetch(`${start.listen}/readyz`)).status === 200 ? true : undefined));
      expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
      // The connector follows the renewal; readiness does not wait for it.
      await waitFor('the connector', () => (connectorsNamed(emu, 'conn-container').length === 1 ? true : undefined));

      const stopAt = Date.now();
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(Date.now() - stopAt).toBeLessThan(3_000);
      // Still valid for hours: it stays for the consumers through a restart, its expiry beside it.
      const token = readFileSync(tokenFile, 'utf8');
      // Counted from when the request was sent, so it errs early, never late.
      const published = Date.parse(readFileSync(`${tokenFile}.expires_at`, 'utf8').trim());
      const issued = emu.state.accessTokens.get(token)?.expiresAt ?? 0;
      expect(published).toBeLessThanOrEqual(issued);
      expect(published).toBeGreaterThan(issued - 5_000);
      const { stdout, stderr } = out;
      const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
      expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['stopping: letting in-flight work finish', 'stopped']));
      for (const secret of [grant.appKey, grant.appSecret, grant.refreshToken, DEFAULT_EMULATOR_API_KEY, ...emu.state.accessTokens.keys()]) {
        expect(stdout + stderr).not.toContain(secret);
      }
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('keeps a still-valid token file through a restart and serves it without a new token request', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const env = containerEnv(emu, grant, home, { tokenFile });
    const first = spawnDaemon(env, home);
    try {
      await first.ready((await first.started()).listen);
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
    } finally {
      first.child.kill('SIGKILL');
    }
    const token = readFileSync(tokenFile, 'utf8');
    const requests = tokenRequests(emu);
    // What a process killed mid-write leaves beside the file.
    writeFileSync(`${tokenFile}.123456789`, 'half a token');
    const second = spawnDaemon(env, home);
    try {
      await second.ready((await second.started()).listen);
      expect(readFileSync(tokenFile, 'utf8')).toBe(token);
      expect(tokenRequests(emu)).toBe(requests);
      expect(existsSync(`${tokenFile}.123456789`)).toBe(false);
    } finally {
      second.child.kill('SIGKILL');
    }
  });

  it('ends within its shutdown timeout on SIGTERM while the service trickles its answer', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const service = await misbehavingServer(trickle(200, '['));
    const env = { ...containerEnv(emu, grant, home, { tokenFile }), SYNCAUTH_BASE_URL: service.url };
    const daemon = spawnDaemon(env, home, ['--shutdown-timeout', '2']);
    try {
      await daemon.ready((await daemon.started()).listen);
      await waitFor('the reconcile to reach the service', () => (service.requests() > 0 ? true : undefined));
      const stopAt = Date.now();
      daemon.child.kill('SIGTERM');
      expect(await daemon.exited).toBe(0);
      // 2 s to let the work finish, then the calls are cancelled: well under the 20 s a service call may take.
      expect(Date.now() - stopAt).toBeLessThan(6_000);
    } finally {
      daemon.child.kill('SIGKILL');
    }
  });

  it('after being stopped (SIGSTOP) past the expiry of its token, publishes a live token within seconds and says so once', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 6 });
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const daemon = spawnDaemon(containerEnv(emu, grant, home, { tokenFile }), home, ['--sweep', '* * * * * *', '--renew-margin', '1']);
    try {
      await daemon.ready((await daemon.started()).listen);
      daemon.child.kill('SIGSTOP');
      await new Promise((resolve) => setTimeout(resolve, 9_000));
      const published = readFileSync(tokenFile, 'utf8');
      expect(emu.state.accessTokens.get(published)!.expiresAt, 'the stopped process left its token to expire').toBeLessThan(Date.now());
      const resumedAt = Date.now();
      daemon.child.kill('SIGCONT');
      const live = await waitFor('a live token in the file', () => {
        const token = existsSync(tokenFile) ? readFileSync(tokenFile, 'utf8') : undefined;
        const issued = token ? emu.state.accessTokens.get(token) : undefined;
        return issued && issued.expiresAt > Date.now() ? Date.now() : undefined;
      });
      // It renews at its first sweep after the resume (one a second): typically under 2 s; the bound is for a
      // loaded machine, where a resumed process may wait for a core, and still well short of any schedule.
      expect(live - resumedAt).toBeLessThan(8_000);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const lines = daemon.out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
      expect(lines.filter((l) => l.msg.includes('was paused'))).toHaveLength(1);
      expect(lines.filter((l) => l.msg.includes('missed execution'))).toHaveLength(0);
    } finally {
      daemon.child.kill('SIGKILL');
    }
  }, 45_000);

  it('refuses bad settings before starting, with exit 2 naming the field', async () => {
    const bad = await runCli(['daemon', '--sweep', 'every minute', '--concurrency', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--sweep: is not a valid cron expression');
    expect(bad.stderr).toContain('--concurrency: must be a whole number');
    const checks = await runCli(['daemon', '--check-interval', 'often', '--max-checks-per-second', '0']);
    expect(checks.code).toBe(2);
    expect(checks.stderr).toContain('--check-interval: must be a duration from 1s to 24h');
    expect(checks.stderr).toContain('--max-checks-per-second: must be a number above 0');
    const fromEnv = await runCli(['daemon'], { env: { SYNCAUTH_REDIS_URL: 'http://127.0.0.1:6379' } });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('SYNCAUTH_REDIS_URL: must start with redis:// or rediss://');
  });
});
