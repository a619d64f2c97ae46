// The built CLI at the ends of pipes a script holds: a reader that stops early (`syncauth --help | head -1`)
// and a writer that never closes stdin (a pasted code on a pipe kept open). Each must end the process
// promptly and quietly.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, tempDir, type CliResult } from '../helpers/cli.js';
import {
  AUTHORIZE_URL_PATTERN, copyCodeLikeAPerson, newHome, onboardingEnv, spawnCli, startOnboarding, storedSecrets, type Onboarding,
} from '../helpers/onboarding.js';

const STACK_FRAME = /^\s+at .+\(.+:\d+:\d+\)$/m;

/** Runs the CLI with the read end of its stdout already closed, as `head` leaves it once it has its line. */
function runWithClosedStdout(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const home = tempDir();
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: home,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, SYNCAUTH_CONFIG_DIR: `${home}/config`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.destroy();
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: '', stderr });
    });
  });
}

describe('a reader that closes the pipe early', () => {
  it('`syncauth --help | head -1`: exit 0, nothing on stderr', async () => {
    const result = await runWithClosedStdout(['--help']);
    expect(result.stderr).not.toMatch(STACK_FRAME);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('`syncauth status | head -1`: the exit code is status\'s own, no stack trace, no error line', async () => {
    const result = await runWithClosedStdout(['status']);
    expect(result.stderr).not.toMatch(STACK_FRAME);
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
  });

  it('real pipelines in a shell: whether `head` leaves before or after the write, nothing is said', async () => {
    const home = tempDir();
    const script = 'for i in 1 2 3 4 5; do "$NODE" "$CLI" --help | head -1 >/dev/null; "$NODE" "$CLI" status | head -c 1 >/dev/null; done';
    const child = spawn('/bin/sh', ['-c', script], {
      cwd: home,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, SYNCAUTH_CONFIG_DIR: `${home}/config`, NODE: process.execPath, CLI },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).not.toMatch(STACK_FRAME);
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

describe('a pasted code on a stdin that stays open', () => {
  let ob: Onboarding;
  beforeAll(async () => {
    ob = await startOnboarding();
  });
  afterAll(async () => ob.emulator.close());

  async function pasteAndKeepOpen(args: string[], env: Record<string, string | undefined>, cwd: string): Promise<CliResult & { seconds: number }> {
    const proc = spawnCli(args, { env, cwd, timeoutMs: 30_000 });
    const authorizeUrl = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
    proc.write(`${await copyCodeLikeAPerson(authorizeUrl)}\n`);
    const pastedAt = Date.now();
    // stdin is never ended: the process must not wait for its end.
    const result = await proc.result;
    return { ...result, seconds: (Date.now() - pastedAt) / 1000 };
  }

  it('setup --no-browser exits once done', async () => {
    const home = newHome();
    const result = await pasteAndKeepOpen(['setup', '--yes', '--no-browser', '--connector-name', 'open-stdin'], onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'docs' }), home.dir);
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    expect(result.seconds).toBeLessThan(10);
    expect((await storedSecrets(home, 'docs')).refresh_token).toBeTruthy();
  });

  it('authorize --no-browser exits once it has printed the refresh token', async () => {
    const home = newHome();
    const result = await pasteAndKeepOpen(['authorize', '--no-browser'], onboardingEnv(ob, home), home.dir);
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).not.toBe('');
    expect(result.seconds).toBeLessThan(10);
  });
});
