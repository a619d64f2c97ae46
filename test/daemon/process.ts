// The real `syncauth daemon` as a child process: a container's profile made only of environment variables,
// its output captured, and waits for its start line and readiness.
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { DaemonGrant } from '../../src/daemon/index.js';
import { DEFAULT_EMULATOR_API_KEY, type RunningEmulator } from '../../src/emulator/index.js';
import { CLI, watchNodeWarnings } from '../helpers/cli.js';
import { afterEach } from 'vitest';
import { waitFor } from '../helpers/wait.js';

/** A profile made only of environment variables, as a container runs it, against the emulator. */
export function containerEnv(
  emu: RunningEmulator,
  grant: DaemonGrant,
  home: string,
  options: { tokenFile?: string; profile?: string } = {},
): Record<string, string> {
  const profile = options.profile ?? 'container';
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    SYNCAUTH_CONFIG_DIR: path.join(home, 'config'),
    SYNCAUTH_STORE: 'env',
    SYNCAUTH_PROFILE: profile,
    SYNCAUTH_APP_KEY: grant.appKey,
    SYNCAUTH_APP_SECRET: grant.appSecret,
    SYNCAUTH_REFRESH_TOKEN: grant.refreshToken,
    SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY,
    SYNCAUTH_BASE_URL: emu.url,
    SYNCAUTH_REMOTE_URL: 'dropbox://data',
    SYNCAUTH_CONNECTOR_NAME: `conn-${profile}`,
    SYNCAUTH_TOKEN_URL: emu.tokenUrl,
    SYNCAUTH_DROPBOX_API_URL: emu.apiUrl,
    SYNCAUTH_LISTEN: '127.0.0.1:0',
    ...(options.tokenFile ? { SYNCAUTH_TOKEN_FILE: options.tokenFile } : {}),
  };
}

/** Starts `syncauth daemon` (a sweep every 10 s unless `args` says otherwise) in `cwd` with exactly `env`. */
export function spawnDaemon(env: Record<string, string>, cwd: string, args: string[] = []) {
  const child = spawn(process.execPath, [CLI, 'daemon', '--sweep', '*/10 * * * * *', ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out.stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out.stderr += chunk));
  watchNodeWarnings(`syncauth daemon ${args.join(' ')}`, () => out.stderr);
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

/** spawnDaemon for a test file whose daemons must not outlive their test: each one started is killed after it. */
export function daemonsKilledAfterEach(): (env: Record<string, string>, cwd: string, args: string[]) => ReturnType<typeof spawnDaemon> {
  const running: ReturnType<typeof spawnDaemon>[] = [];
  afterEach(() => {
    for (const daemon of running.splice(0)) daemon.child.kill('SIGKILL');
  });
  return (env, cwd, args) => {
    const daemon = spawnDaemon(env, cwd, args);
    running.push(daemon);
    return daemon;
  };
}
