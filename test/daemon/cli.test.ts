// The real `syncauth daemon` process: a container's profile made only of environment variables, health on
// an ephemeral loopback port, SIGTERM answered promptly with exit 0 (even while the service trickles), and a
// still-valid token file kept through a restart.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { CLI, runCli } from '../helpers/cli.js';
import { misbehavingServer, trickle } from '../helpers/servers.js';
import { connectorsNamed, emulator, obtainGrant, tempDir, tokenRequests } from './helpers.js';
import type { DaemonGrant } from '../../src/daemon/index.js';
import type { RunningEmulator } from '../../src/emulator/index.js';

async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function containerEnv(emu: RunningEmulator, grant: DaemonGrant, home: string, tokenFile: string): Record<string, string> {
  return {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      SYNCAUTH_CONFIG_DIR: path.join(home, 'config'),
      SYNCAUTH_STORE: 'env',
      SYNCAUTH_PROFILE: 'container',
      SYNCAUTH_APP_KEY: grant.appKey,
      SYNCAUTH_APP_SECRET: grant.appSecret,
      SYNCAUTH_REFRESH_TOKEN: grant.refreshToken,
      SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY,
      SYNCAUTH_BASE_URL: emu.url,
      SYNCAUTH_REMOTE_URL: 'dropbox://data',
      SYNCAUTH_CONNECTOR_NAME: 'conn-container',
      SYNCAUTH_TOKEN_URL: emu.tokenUrl,
      SYNCAUTH_LISTEN: '127.0.0.1:0',
      SYNCAUTH_TOKEN_FILE: tokenFile,
  };
}

function spawnDaemon(env: Record<string, string>, cwd: string, args: string[] = []) {
  const child = spawn(process.execPath, [CLI, 'daemon', '--sweep', '*/10 * * * * *', ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out.stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out.stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const started = (): Promise<{ listen: string; profiles: string[]; msg: string }> =>
    waitFor('the start line', () => {
      const line = out.stdout.split('\n').find((l) => l.includes('daemon started'));
      return line ? (JSON.parse(line) as { listen: string; profiles: string[]; msg: string }) : undefined;
    });
  const ready = async (listen: string): Promise<void> => {
    await waitFor('readiness', async () => ((await fetch(`${listen}/readyz`)).status === 200 ? true : undefined));
  };
  return { child, out, exited, started, ready };
}

describe('syncauth daemon', () => {
  it('runs an environment-only profile, becomes ready, and exits 0 promptly on SIGTERM', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const { child, out, exited, started } = spawnDaemon(containerEnv(emu, grant, home, tokenFile), home);
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
    const env = containerEnv(emu, grant, home, tokenFile);
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
    const env = { ...containerEnv(emu, grant, home, tokenFile), SYNCAUTH_BASE_URL: service.url };
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

  it('refuses bad settings before starting, with exit 2 naming the field', async () => {
    const bad = await runCli(['daemon', '--sweep', 'every minute', '--concurrency', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--sweep: is not a valid cron expression');
    expect(bad.stderr).toContain('--concurrency: must be a whole number');
    const fromEnv = await runCli(['daemon'], { env: { SYNCAUTH_REDIS_URL: 'http://127.0.0.1:6379' } });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('SYNCAUTH_REDIS_URL: must start with redis:// or rediss://');
  });
});
