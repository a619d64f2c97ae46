// The operating system's refusals, provoked for real (a port held by another listener, a file where a
// directory belongs, a directory where a file belongs, a directory another user owns), reach the user as a
// sentence naming the port or path and what to do: no raw `EADDRINUSE:` line, no stack, the usual exit code.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeSystemError, listenFailure } from '../../src/cli/errno.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { runCliAsOtherUser, sharedDir } from '../helpers/other-user.js';
import { newHome, onboardingEnv, runCli as runOnboardingCli, startOnboarding } from '../helpers/onboarding.js';

const servers: Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A port some other program is listening on. */
async function busyPort(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

function expectSentence(stderr: string): void {
  expect(stderr).not.toMatch(/\bE[A-Z]{3,}\b:/);
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr).not.toContain('unexpected failure');
}

describe.concurrent('a busy port', () => {
  it('emulate --port names the port and says how to pick another', async () => {
    const port = await busyPort();
    const result = await runCli(['emulate', '--port', String(port)]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`error: port ${port} on 127.0.0.1 is already in use by another program\n`);
    expect(result.stderr).toMatch(/^hint: stop the program that holds it .*or choose another port/m);
    expectSentence(result.stderr);
  });

  it('daemon --listen names the address', async () => {
    const port = await busyPort();
    const home = tempDir();
    const result = await runCli(['daemon', '--listen', `127.0.0.1:${port}`], {
      cwd: home,
      // A token file: a daemon that hands the token to nobody is refused before it listens.
      env: { SYNCAUTH_STORE: 'env', SYNCAUTH_APP_KEY: 'k', SYNCAUTH_APP_SECRET: 's', SYNCAUTH_REFRESH_TOKEN: 'r', SYNCAUTH_TOKEN_URL: 'http://127.0.0.1:9/token', SYNCAUTH_TOKEN_FILE: path.join(home, 'token') },
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`port ${port} on 127.0.0.1 is already in use by another program`);
    expect(result.stderr).not.toContain('EADDRINUSE');
    expectSentence(result.stderr);
  });

  it('setup: the loopback callback port', async () => {
    const ob = await startOnboarding();
    try {
      const port = Number(new URL(ob.redirectUri).port);
      const holder = createServer();
      servers.push(holder);
      await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
      const home = newHome();
      const result = await runOnboardingCli(['setup', '--yes', '--no-open'], { env: onboardingEnv(ob, home), cwd: home.dir });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
      expectSentence(result.stderr);
    } finally {
      await ob.emulator.close();
    }
  });
});

describe.concurrent('a path of the wrong kind', () => {
  it('a config directory below a file (ENOTDIR) names the file', async () => {
    const cwd = tempDir();
    const file = path.join(cwd, 'not-a-dir');
    writeFileSync(file, 'x');
    for (const configDir of [file, path.join(file, 'config')]) {
      const result = await runCli(['status'], { cwd, env: { SYNCAUTH_CONFIG_DIR: configDir } });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`error: ${file} is a file, but syncauth needs a directory there (the config directory, SYNCAUTH_CONFIG_DIR)\n`);
      expect(result.stderr).toMatch(/^hint: move that file away, or set SYNCAUTH_CONFIG_DIR \(--config-dir\) to a directory/m);
      expectSentence(result.stderr);
    }
  });

  it('a config directory another user owns (EACCES) names it and the user', async () => {
    const cwd = sharedDir();
    const configDir = path.join(cwd, 'config');
    mkdirSync(path.join(configDir, 'profiles'), { recursive: true, mode: 0o700 });
    chmodSync(configDir, 0o700);
    const result = await runCliAsOtherUser(['status'], { cwd, env: { SYNCAUTH_CONFIG_DIR: configDir } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^error: permission denied: user \\S+ \\(uid 65534\\) may not use ${path.join(configDir, 'profiles')} \\(the config directory, SYNCAUTH_CONFIG_DIR\\)$`, 'm'));
    expect(result.stderr).toMatch(/^hint: check the owner and mode of .* \(ls -ld\)/m);
    expectSentence(result.stderr);
  });

  it('a .env another user cannot read is named in a warning, not a crash; one that is a directory is passed over', async () => {
    const cwd = sharedDir();
    writeFileSync(path.join(cwd, '.env'), 'SYNCAUTH_REMOTE_URL=dropbox://data\n', { mode: 0o600 });
    const result = await runCliAsOtherUser(['status'], { cwd, env: { SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config') } });
    expect(result.stderr).toBe(`warning: cannot read ${path.join(cwd, '.env')} (permission denied); its settings are not used\n`);
    expect(result.code).toBe(0);

    const venv = tempDir();
    mkdirSync(path.join(venv, '.env'));
    const passed = await runCli(['status'], { cwd: venv });
    expect(passed.stderr).toBe('');
    expect(passed.code).toBe(0);
  });

  it('a token file path that is a directory (EISDIR), where the error carries no path', () => {
    const dir = tempDir();
    const error = Object.assign(new Error('EISDIR: illegal operation on a directory, read'), { code: 'EISDIR', errno: -21, syscall: 'read' });
    // Without a known path, the sentence still says what is wrong.
    expect(describeSystemError(error)?.message).toBe('a directory stands where syncauth expected a file');
    const withPath = Object.assign(new Error(`EISDIR: illegal operation on a directory, open '${dir}'`), { code: 'EISDIR', syscall: 'open', path: dir });
    expect(describeSystemError(withPath)?.message).toBe(`${dir} is a directory, but syncauth needs a file there`);
  });

  it('listenFailure, for code that listens, says the same as the fallback', () => {
    const error = Object.assign(new Error('listen EADDRINUSE: address already in use 127.0.0.1:9464'), { code: 'EADDRINUSE', syscall: 'listen', address: '127.0.0.1', port: 9464 });
    const described = listenFailure(error, { host: '127.0.0.1', port: 9464, setting: '--listen' });
    expect(described.message).toBe('port 9464 on 127.0.0.1 is already in use by another program (--listen)');
    expect(described.hint).toMatch(/choose another port/);
    expect(describeSystemError(error)?.message).toBe('port 9464 on 127.0.0.1 is already in use by another program');
  });
});
