// The real `syncauth exec` with a real child against the emulator: the child gets a live token and none of the
// secrets, signals reach it, exec exits with its code (127/126 when it cannot run, 2 for bad flags before any
// request, 4 when the grant was revoked and the child is never started).
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_APP, type EmulatorApp } from '../../src/emulator/index.js';
import { getCurrentAccount } from '../../src/oauth/index.js';
import { runCli } from '../helpers/cli.js';
import { hang, misbehavingServer } from '../helpers/servers.js';
import { waitFor } from '../helpers/wait.js';
import { emulator, obtainGrant, tempDir, tokensOf } from '../daemon/helpers.js';
import { containerEnv } from '../daemon/process.js';
import { childCommand, dumpOf, signalsIn, spawnExec, startsIn } from './helpers.js';

/** Every spelling a secret could take in a leak: raw, URL-encoded, form-encoded, base64 (and base64url). */
function formsOf(secret: string): string[] {
  const b64 = Buffer.from(secret).toString('base64');
  return [secret, encodeURIComponent(secret), new URLSearchParams({ v: secret }).toString().slice(2), b64, Buffer.from(secret).toString('base64url')];
}

describe('syncauth exec', () => {
  it('gives the child a live token and its expiry, and exits with its code (128+N when a signal ended it)', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const env = containerEnv(emu, grant, home);

    const result = await runCli(['exec', ...childCommand(home, 'exit:7')], { env, cwd: home });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(7);
    const [start] = startsIn(home);
    const issued = tokensOf(emu, grant.refreshToken).find((t) => t.token === start?.token);
    expect(issued).toBeDefined();
    // Live: the emulated Dropbox API takes it.
    const account = await getCurrentAccount({ apiUrl: emu.apiUrl, accessToken: start?.token as string });
    expect(account.accountId).toBe(emu.state.account.accountId);
    // RFC 3339, whole seconds, never later than the token's real expiry.
    expect(start?.expiresAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const expiresAt = Date.parse(start?.expiresAt as string);
    expect(expiresAt).toBeLessThanOrEqual(issued?.expiresAt as number);
    expect(expiresAt).toBeGreaterThan((issued?.expiresAt as number) - 3_000);

    const killed = await runCli(['exec', ...childCommand(home, 'self-term')], { env, cwd: home });
    expect(killed.code).toBe(128 + 15);
    // With --watch too, a child that ends on its own ends exec with its code; it is not started again.
    const watched = await runCli(['exec', '--watch', ...childCommand(home, 'exit:5')], { env, cwd: home });
    expect(watched.code).toBe(5);
    expect(startsIn(home)).toHaveLength(2);
  });

  it('hands the child none of the secrets, under any name or in any encoding, and prints none', async () => {
    const app: EmulatorApp = { ...DEFAULT_APP, appKey: 'canaryAppKey7f3e9a', appSecret: 'canary/App+Secret=9b&x?' };
    const apiKey = 'canary-service-api-key-5d1c2e';
    const emu = await emulator({ apps: [app], workspaces: [{ name: 'default', apiKeys: [apiKey] }] });
    const grant = await obtainGrant(emu, app);
    const home = tempDir();
    const storeKey = 'canary-store-key-c0ffee-4242';
    const secrets = [grant.appKey, grant.appSecret, grant.refreshToken, apiKey, storeKey];
    const env: Record<string, string> = {
      ...containerEnv(emu, grant, home),
      SYNCAUTH_API_KEY: apiKey,
      SYNCAUTH_STORE_KEY: storeKey,
      SYNCAUTH_SOMETHING_NEW: 'a syncauth variable nobody knows yet',
      // The same secrets under names syncauth does not know, whole or wrapped.
      OTHER_APP_SECRET: grant.appSecret,
      PADDED_KEY: ` ${apiKey} `,
      AUTH_HEADER: `Bearer ${grant.refreshToken}`,
      ENCODED_SECRET: encodeURIComponent(grant.appSecret),
      BASE64_REFRESH: Buffer.from(grant.refreshToken).toString('base64'),
      BASIC: `Basic ${Buffer.from(`${grant.appKey}:${grant.appSecret}`).toString('base64')}`,
      STORE_COPY: storeKey,
      KEEP_ME: 'an ordinary value',
    };

    const result = await runCli(['exec', ...childCommand(home, 'exit:0'), '--flag', 'value'], { env, cwd: home });
    expect(result.code).toBe(0);
    const [start] = startsIn(home);
    const dump = dumpOf(home, start?.pid as number);
    const seen = JSON.stringify(dump);
    for (const secret of secrets) {
      for (const form of formsOf(secret)) {
        expect(seen).not.toContain(form);
        expect(result.stdout + result.stderr).not.toContain(form);
      }
    }
    for (const name of ['OTHER_APP_SECRET', 'PADDED_KEY', 'AUTH_HEADER', 'ENCODED_SECRET', 'BASE64_REFRESH', 'BASIC', 'STORE_COPY', 'SYNCAUTH_SOMETHING_NEW']) {
      expect(dump.env[name]).toBeUndefined();
    }
    // What is no secret passes through, the token is there, the arguments arrive as given (no shell).
    expect(dump.env.KEEP_ME).toBe('an ordinary value');
    expect(dump.env.SYNCAUTH_PROFILE).toBe('container');
    expect(dump.env.PATH).toBe(env.PATH);
    expect(dump.env.DROPBOX_ACCESS_TOKEN).toBe(start?.token);
    expect(dump.argv.slice(2)).toEqual([home, 'exit:0', '--flag', 'value']);
  });

  it('takes another variable name for the token', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const env = { ...containerEnv(emu, grant, home), CHILD_TOKEN_VAR: 'MY_TOKEN' };
    const result = await runCli(['exec', '--env-name', 'MY_TOKEN', ...childCommand(home, 'exit:0')], { env, cwd: home });
    expect(result.code).toBe(0);
    const [start] = startsIn(home);
    expect(tokensOf(emu, grant.refreshToken).map((t) => t.token)).toContain(start?.token);
    expect(start?.expiresAt).toMatch(/Z$/);
    expect(dumpOf(home, start?.pid as number).env.DROPBOX_ACCESS_TOKEN).toBeUndefined();
  });

  it('renders the templates, account id included, before the child starts', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const source = path.join(home, 'conf.tpl');
    const dest = path.join(home, 'conf');
    writeFileSync(source, '{"token":"{{ access_token }}","expiry":"{{expires_at}}","account":"{{ account_id }}","profile":"{{ profile }}"}\n');
    const env = { ...containerEnv(emu, grant, home), SYNCAUTH_DROPBOX_API_URL: emu.apiUrl, CHILD_READ_FILE: dest };
    const result = await runCli(['exec', '--template', `${source}:${dest}`, ...childCommand(home, 'exit:0')], { env, cwd: home });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const [start] = startsIn(home);
    const { expiry, ...rendered } = JSON.parse(readFileSync(dest, 'utf8')) as Record<string, string>;
    expect(rendered).toEqual({ token: start?.token, account: emu.state.account.accountId, profile: 'container' });
    // Counted from when the renewal was sent, so a little early, never late.
    const issuedExpiry = tokensOf(emu, grant.refreshToken).find((t) => t.token === start?.token)?.expiresAt ?? 0;
    expect(Date.parse(expiry ?? '')).toBeLessThanOrEqual(issuedExpiry);
    expect(Date.parse(expiry ?? '')).toBeGreaterThan(issuedExpiry - 3_000);
    expect(statSync(dest).mode & 0o777).toBe(0o600);
  });

  it('forwards SIGHUP, SIGUSR1 and SIGTERM to the child and exits with the code the child chose', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const { child, out, exited } = spawnExec(containerEnv(emu, grant, home), home, childCommand(home, 'wait'));
    try {
      const start = await waitFor('the child', () => startsIn(home)[0]);
      for (const signal of ['SIGHUP', 'SIGUSR1'] as const) {
        child.kill(signal);
        await waitFor(`${signal} at the child`, () => (signalsIn(home).some((s) => s.signal === signal) ? true : undefined));
      }
      expect(child.exitCode).toBeNull();
      child.kill('SIGTERM');
      expect(await exited).toBe(42);
      expect(signalsIn(home)).toEqual([
        { pid: start.pid, signal: 'SIGHUP' },
        { pid: start.pid, signal: 'SIGUSR1' },
        { pid: start.pid, signal: 'SIGTERM' },
      ]);
      expect(out.stdout).toBe('');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('with --kill-timeout 0 never kills a child that outlives a forwarded SIGTERM: it says so and forwards the second one', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const env = { ...containerEnv(emu, grant, home), CHILD_IGNORE_STOPS: '1', CHILD_STOP_CODE: '3' };
    const { child, out, exited } = spawnExec(env, home, ['--kill-timeout', '0', ...childCommand(home, 'wait')]);
    try {
      await waitFor('the child', () => startsIn(home)[0]);
      child.kill('SIGTERM');
      await waitFor('the still-running line', () => (/is still running 3 s after SIGTERM; waiting for it to end, never killing it/.test(out.stderr) ? true : undefined));
      expect(child.exitCode).toBeNull();
      child.kill('SIGINT');
      expect(await exited).toBe(3);
      expect(signalsIn(home).map((s) => s.signal)).toEqual(['SIGTERM', 'SIGINT']);
      expect(out.stderr).toMatch(/^syncauth exec: /m);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('exits 127 for a command that does not exist and 126 for one that cannot be run', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const env = containerEnv(emu, grant, home);
    const missing = await runCli(['exec', '--', 'syncauth-no-such-command'], { env, cwd: home });
    expect(missing.code).toBe(127);
    expect(missing.stderr).toContain('syncauth exec: syncauth-no-such-command: command not found');
    const script = path.join(home, 'not-executable.sh');
    writeFileSync(script, '#!/bin/sh\nexit 0\n');
    chmodSync(script, 0o644);
    const denied = await runCli(['exec', '--', script], { env, cwd: home });
    expect(denied.code).toBe(126);
    expect(denied.stderr).toContain(`syncauth exec: ${script}: permission denied`);
  });

  it('refuses bad flags with exit 2 before anything is sent', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const env = containerEnv(emu, grant, home);
    const before = emu.state.requests.length;
    const cases: [string[], RegExp][] = [
      [['exec'], /a command is needed after `--`/],
      [['exec', '--'], /a command is needed after `--`/],
      [['exec', 'node', 'x.js'], /a command is needed after `--`/],
      [['exec', '--env-name', '1BAD', '--', 'true'], /--env-name: must be an environment variable name/],
      [['exec', '--env-name', 'SYNCAUTH_APP_SECRET', '--', 'true'], /--env-name: must not start with SYNCAUTH_/],
      [['exec', '--watch', '--signal', 'NOPE', '--', 'true'], /--signal: must be a signal the child can catch/],
      [['exec', '--watch', '--signal', 'KILL', '--', 'true'], /--signal: must be a signal the child can catch/],
      [['exec', '--signal', 'HUP', '--', 'true'], /--signal: only applies with --watch/],
      [['exec', '--kill-timeout', 'soon', '--', 'true'], /--kill-timeout: must be a number of seconds/],
      [['exec', '--template', path.join(home, 'missing.tpl') + ':' + path.join(home, 'out'), '--', 'true'], /--template: cannot read template/],
    ];
    const results = await Promise.all(cases.map(([args]) => runCli(args, { env, cwd: home })));
    for (const [i, [args, message]] of cases.entries()) {
      expect(results[i]?.code, args.join(' ')).toBe(2);
      expect(results[i]?.stderr, args.join(' ')).toMatch(message);
    }
    expect(emu.state.requests.length).toBe(before);
  });

  it('ends on SIGTERM while the token is being obtained (143), ignoring SIGHUP; the child is never started', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    // A token endpoint that takes the request and never answers: exec is still getting its token.
    const dropbox = await misbehavingServer(hang);
    const home = tempDir();
    const env = { ...containerEnv(emu, grant, home), SYNCAUTH_TOKEN_URL: `${dropbox.url}/oauth2/token` };
    const { child, out, exited } = spawnExec(env, home, childCommand(home, 'exit:0'));
    try {
      await dropbox.arrived('/oauth2/token');
      child.kill('SIGHUP');
      await waitFor('SIGHUP ignored', () => (out.stderr.includes('SIGHUP before the child started: ignored') ? true : undefined));
      child.kill('SIGTERM');
      expect(await exited).toBe(143);
      expect(existsSync(path.join(home, 'starts.jsonl'))).toBe(false);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('exits 4 without starting the child when the grant was revoked', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    emu.revokeGrant(grant.refreshToken);
    const home = tempDir();
    const result = await runCli(['exec', ...childCommand(home, 'exit:0')], { env: containerEnv(emu, grant, home), cwd: home });
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/hint: run `node \S+\/main\.js setup --profile container`/);
    expect(readdirSync(home).filter((f) => f.startsWith('env-') || f === 'starts.jsonl')).toEqual([]);
    expect(existsSync(path.join(home, 'starts.jsonl'))).toBe(false);
  });
});
