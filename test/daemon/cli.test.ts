// The real `syncauth daemon` process: a container's profile made only of environment variables, health on
// an ephemeral loopback port, and SIGTERM answered promptly with exit 0 and the token file removed.
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { CLI, runCli } from '../helpers/cli.js';
import { connectorsNamed, emulator, obtainGrant, tempDir } from './helpers.js';

async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('syncauth daemon', () => {
  it('runs an environment-only profile, becomes ready, and exits 0 promptly on SIGTERM', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const env: Record<string, string> = {
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
    const child = spawn(process.execPath, [CLI, 'daemon', '--sweep', '*/10 * * * * *'], { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    try {
      const start = await waitFor('the start line', () => {
        const line = stdout.split('\n').find((l) => l.includes('daemon started'));
        return line ? (JSON.parse(line) as { listen: string; profiles: string[]; msg: string }) : undefined;
      });
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
      expect(existsSync(tokenFile)).toBe(false);
      const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
      expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['stopping: letting in-flight work finish', 'stopped']));
      for (const secret of [grant.appKey, grant.appSecret, grant.refreshToken, DEFAULT_EMULATOR_API_KEY, ...emu.state.accessTokens.keys()]) {
        expect(stdout + stderr).not.toContain(secret);
      }
    } finally {
      child.kill('SIGKILL');
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
