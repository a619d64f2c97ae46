// --on-reauthorized CMD: the new grant reaches the operator's command on stdin only; its argv, its environment
// and what it prints (as logged) hold no secret; a command that hangs or leaves processes behind is ended.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { grantEnvFile, runGrantHook } from '../../src/exec/grant-hook.js';
import { alive } from '../helpers/wait.js';

const dir = mkdtempSync(path.join(tmpdir(), 'syncauth-grant-hook-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NEW = { appKey: 'hookappkey-c4n4ry', appSecret: 'hookappsecret-c4n4ry-51', refreshToken: 'hookrefresh-c4n4ry-Zq9-new' };
const OLD_REFRESH = 'hookrefresh-c4n4ry-old-77';
const API_KEY = 'hookapikey-c4n4ry-0042';

function encodings(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  return [secret, bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex')];
}

function expectNoSecret(text: string): void {
  for (const secret of [...Object.values(NEW), OLD_REFRESH, API_KEY]) for (const form of encodings(secret)) expect(text).not.toContain(form);
}

describe('the command run with a new grant', () => {
  it('reads the grant on stdin as environment-file lines; argv and environment hold no secret', async () => {
    const stdinFile = path.join(dir, 'stdin');
    const envFile = path.join(dir, 'env');
    const argvFile = path.join(dir, 'argv');
    const env = {
      PATH: process.env.PATH,
      HOME: dir,
      SYNCAUTH_REFRESH_TOKEN: OLD_REFRESH,
      SYNCAUTH_API_KEY: API_KEY,
      // The same secrets under names syncauth does not own, and encoded.
      LEGACY_TOKEN: OLD_REFRESH,
      AUTH_BLOB: Buffer.from(JSON.stringify({ key: API_KEY })).toString('base64'),
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
    };
    const result = await runGrantHook({
      command: `cat > ${stdinFile}; env > ${envFile}; tr '\\0' ' ' < /proc/$$/cmdline > ${argvFile}`,
      profile: 'docs',
      grant: NEW,
      env,
      secrets: [OLD_REFRESH, API_KEY],
    });
    expect(result).toMatchObject({ ok: true, exitCode: 0, timedOut: false });
    expect(readFileSync(stdinFile, 'utf8')).toBe(grantEnvFile(NEW));
    expect(grantEnvFile(NEW)).toBe(`SYNCAUTH_APP_KEY=${NEW.appKey}\nSYNCAUTH_APP_SECRET=${NEW.appSecret}\nSYNCAUTH_REFRESH_TOKEN=${NEW.refreshToken}\n`);
    const childEnv = readFileSync(envFile, 'utf8');
    expectNoSecret(childEnv);
    expect(childEnv).toContain('SYNCAUTH_PROFILE=docs');
    // What an in-cluster kubectl needs is still there.
    expect(childEnv).toContain('KUBERNETES_SERVICE_HOST=10.0.0.1');
    expectNoSecret(readFileSync(argvFile, 'utf8'));
  });

  it('keeps what it prints for the log with every secret redacted, and reports a failure with its exit code', async () => {
    const result = await runGrantHook({
      command: 'cat; echo "refused: $SYNCAUTH_PROFILE" >&2; exit 3',
      profile: 'docs',
      grant: NEW,
      env: { PATH: process.env.PATH },
      secrets: [OLD_REFRESH],
    });
    expect(result).toMatchObject({ ok: false, exitCode: 3, timedOut: false });
    expect(result.output).toContain('SYNCAUTH_APP_KEY=');
    expect(result.output).toContain('refused: docs');
    expectNoSecret(result.output);
  });

  it('ends a command that outlasts its deadline, with the processes it started', async () => {
    const pidFile = path.join(dir, 'hang-pid');
    const started = Date.now();
    const result = await runGrantHook({
      command: `sleep 60 & echo $! > ${pidFile}; wait`,
      profile: 'docs',
      grant: NEW,
      env: { PATH: process.env.PATH },
      timeoutMs: 300,
    });
    expect(result.ok).toBe(false);
    expect(result.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(20_000);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    await expect.poll(() => alive(pid), { timeout: 5_000 }).toBe(false);
  });

  it('does not leave behind a process the command started and did not wait for', async () => {
    const pidFile = path.join(dir, 'left-pid');
    const result = await runGrantHook({
      command: `(sleep 60 >/dev/null 2>&1 & echo $! > ${pidFile}); exit 0`,
      profile: 'docs',
      grant: NEW,
      env: { PATH: process.env.PATH },
    });
    expect(result).toMatchObject({ ok: true, exitCode: 0 });
    const pid = Number(readFileSync(pidFile, 'utf8'));
    await expect.poll(() => alive(pid), { timeout: 5_000 }).toBe(false);
  });

  it('reports a command that cannot be run', async () => {
    const result = await runGrantHook({ command: 'exec /nonexistent/syncauth-hook', profile: 'docs', grant: NEW, env: { PATH: process.env.PATH } });
    expect(result.ok).toBe(false);
    expect(result.exitCode).toBe(127);
  });
});
