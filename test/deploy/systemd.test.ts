// deploy/systemd: the units pass `systemd-analyze verify` (PID 1 here is not systemd, so ExecStart points at a
// stand-in that exists), carry the hardening docs/production.md promises, and the service's own command line and
// environment run the real daemon, which tells a notify socket READY=1 only once its token is published and
// STOPPING=1 when it stops.
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ROOT, tempDir } from '../helpers/cli.js';
import { isCI } from '../helpers/secret-service.js';
import { waitFor } from '../helpers/wait.js';
import { emulator, latestTokenOf, obtainGrant } from '../daemon/helpers.js';
import { containerEnv, spawnDaemon } from '../daemon/process.js';
import { freePort } from '../helpers/onboarding.js';
import { startNotifyReceiver, type NotifyReceiver } from './notify-socket.js';
import { environmentOf, expandSpecifiers, readUnit, splitCommand, valueOf, type Unit } from './unit-file.js';
import { findExecutable } from '../helpers/executables.js';
import { startReceiver as startWebhookReceiver } from '../notify/receiver.js';

const UNITS = path.join(ROOT, 'deploy/systemd');
const SERVICE = path.join(UNITS, 'syncauth.service');
const ONCE = path.join(UNITS, 'syncauth-once.service');
const TIMER = path.join(UNITS, 'syncauth-once.timer');
/** The drop-in that turns on the re-authorization page and the notices (docs/when-a-person-is-needed.md). */
const DROP_IN = path.join(UNITS, 'syncauth.service.d', 'reauthorization.conf');
/** A bare name, which systemd looks up on its fixed search path (install.test.ts checks it against real installs). */
const INSTALLED_BINARY = 'syncauth';

const analyze = findExecutable('systemd-analyze');
const notifier = findExecutable('systemd-notify');
const MISSING = 'systemd-analyze not found: install the Debian package (apt-get install -y systemd)';
const skipAnalyze = analyze === null && !isCI();
if (skipAnalyze) console.warn(`${MISSING}; skipping the unit file checks (they fail instead when CI is set)`);

function run(command: string, args: string[], options: { cwd?: string } = {}): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SYSTEMD_COLORS: '0', SYSTEMD_PAGER: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

/** The units copied to a fresh directory, ExecStart pointing at an executable stand-in there. */
function stageUnits(transform: (text: string) => string = (t) => t): { dir: string; files: string[] } {
  const dir = tempDir('syncauth-units-');
  const binary = path.join(dir, 'syncauth');
  writeFileSync(binary, '#!/bin/sh\nexit 0\n');
  chmodSync(binary, 0o755);
  const files = [SERVICE, ONCE, TIMER].map((source) => {
    const target = path.join(dir, path.basename(source));
    copyFileSync(source, target);
    const text = readFileSync(target, 'utf8');
    writeFileSync(target, transform(text.split(`ExecStart=${INSTALLED_BINARY} `).join(`ExecStart=${binary} `)));
    return target;
  });
  // systemd-analyze reads the service's drop-ins from the directory beside it, as systemd does.
  mkdirSync(path.join(dir, 'syncauth.service.d'));
  writeFileSync(path.join(dir, 'syncauth.service.d', path.basename(DROP_IN)), transform(readFileSync(DROP_IN, 'utf8')));
  return { dir, files };
}

/** systemd-analyze's lines about our units (warnings carry the unit's path or name); others concern the host's. */
function linesAboutOurUnits(output: string): string[] {
  return output.split('\n').filter((line) => /syncauth/.test(line));
}

describe.skipIf(skipAnalyze)('the systemd units', () => {
  beforeAll(() => {
    if (!analyze) throw new Error(`${MISSING} (required in CI: CI is set)`);
  });

  it('pass systemd-analyze verify with no warning about their own lines', async () => {
    for (const source of [SERVICE, ONCE]) expect(readFileSync(source, 'utf8')).toContain(`ExecStart=${INSTALLED_BINARY} daemon`);
    const { dir, files } = stageUnits();
    const result = await run(analyze as string, ['verify', '--man=no', ...files], { cwd: dir });
    console.log(`systemd-analyze verify (exit ${result.code}):\n${result.output || '(no output)'}`);
    expect(result.code).toBe(0);
    expect(linesAboutOurUnits(result.output)).toEqual([]);
  });

  it('would catch a misspelled key or a missing ExecStart binary (the check above can fail)', async () => {
    const typo = stageUnits((text) => text.replace('ProtectSystem=strict', 'ProtectSytem=strict'));
    const result = await run(analyze as string, ['verify', '--man=no', ...typo.files], { cwd: typo.dir });
    expect(linesAboutOurUnits(result.output).join('\n')).toMatch(/Unknown key 'ProtectSytem'/);
    // In the drop-in too.
    const dropInTypo = stageUnits((text) => text.replace('Environment=SYNCAUTH_PUBLIC_URL', 'Enviroment=SYNCAUTH_PUBLIC_URL'));
    const dropInResult = await run(analyze as string, ['verify', '--man=no', ...dropInTypo.files], { cwd: dropInTypo.dir });
    expect(linesAboutOurUnits(dropInResult.output).join('\n')).toMatch(/reauthorization\.conf:\d+: Unknown key 'Enviroment'/);

    const missing = stageUnits((text) => text.replace(/ExecStart=\S+/, 'ExecStart=/nonexistent/syncauth'));
    const failed = await run(analyze as string, ['verify', '--man=no', ...missing.files], { cwd: missing.dir });
    expect(failed.code).not.toBe(0);
    expect(linesAboutOurUnits(failed.output).join('\n')).toMatch(/not executable/);
  });

  it('scores as well hardened in systemd-analyze security', async () => {
    const { dir, files } = stageUnits();
    const result = await run(analyze as string, ['security', '--offline=true', '--threshold=20', files[0] as string], { cwd: dir });
    console.log(result.output.split('\n').filter((l) => l.includes('✗') || l.includes('Overall')).join('\n'));
    expect(result.code).toBe(0);
    expect(result.output).toMatch(/Overall exposure level for syncauth\.service: [01]\.\d OK/);
  });

  it('the service: notify readiness, reload on SIGHUP, the sandbox, the file store and the token in /run', () => {
    const unit = readUnit(SERVICE);
    const service = (key: string): string | undefined => valueOf(unit, 'Service', key);
    expect(service('Type')).toBe('notify');
    expect(service('NotifyAccess')).toBe('all');
    expect(service('ExecReload')).toBe('/bin/kill -HUP $MAINPID');
    expect(service('Restart')).toBe('on-failure');
    expect(service('User')).toBe('syncauth');
    expect(service('EnvironmentFile')).toBe('/etc/syncauth/syncauth.env');
    const hardening: Record<string, string> = {
      NoNewPrivileges: 'yes',
      ProtectSystem: 'strict',
      ProtectHome: 'yes',
      PrivateTmp: 'yes',
      PrivateDevices: 'yes',
      CapabilityBoundingSet: '',
      RestrictAddressFamilies: 'AF_UNIX AF_INET AF_INET6',
      RestrictSUIDSGID: 'yes',
      StateDirectory: 'syncauth',
      StateDirectoryMode: '0700',
      RuntimeDirectory: 'syncauth',
      RuntimeDirectoryMode: '0750',
      SystemCallFilter: '@system-service',
    };
    for (const [key, value] of Object.entries(hardening)) expect([key, service(key)]).toEqual([key, value]);
    expect(environmentOf(unit)).toMatchObject({ SYNCAUTH_STORE: 'file', SYNCAUTH_CONFIG_DIR: '%S/syncauth' });
    const argv = splitCommand(service('ExecStart') as string);
    expect(argv.slice(0, 2)).toEqual([INSTALLED_BINARY, 'daemon']);
    expect(argv.join(' ')).toContain('--listen 127.0.0.1:9464');
    expect(argv.join(' ')).toContain('--token-file %t/syncauth/{profile}.token');
    expect(argv.join(' ')).toContain('--token-file-mode 0640');
    // No secret is ever on a command line or in the unit itself (only in the environment file).
    for (const file of [SERVICE, ONCE]) {
      const settings = readFileSync(file, 'utf8').split('\n').filter((line) => !line.startsWith('#'));
      expect(settings.filter((line) => /SYNCAUTH_(APP_KEY|APP_SECRET|REFRESH_TOKEN|API_KEY|STORE_KEY)/.test(line))).toEqual([]);
    }
  });

  it('the timer runs the one-shot service more often than the renewal margin', () => {
    const once = readUnit(ONCE);
    expect(valueOf(once, 'Service', 'Type')).toBe('oneshot');
    expect(splitCommand(valueOf(once, 'Service', 'ExecStart') as string)).toContain('--once');
    expect(valueOf(once, 'Service', 'RuntimeDirectoryPreserve')).toBe('yes');
    const every = valueOf(readUnit(TIMER), 'Timer', 'OnUnitActiveSec') ?? '';
    const minutes = /^(\d+)min$/.exec(every);
    expect(minutes).not.toBeNull();
    expect(Number(minutes?.[1]) * 60).toBeLessThan(900);
  });
});

// ---- the real daemon under a stand-in service manager ----

const receivers: NotifyReceiver[] = [];
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
});

function execStartOf(unit: Unit): string[] {
  return splitCommand(valueOf(unit, 'Service', 'ExecStart') as string);
}

describe('the daemon as the service runs it', () => {
  it("runs with the unit's own command line and environment, publishes 0640 to the group, reloads on ExecReload, stops on SIGTERM", async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 3600 });
    const grant = await obtainGrant(emu);
    const home = tempDir('syncauth-unit-');
    const dirs = { runtime: path.join(home, 'run'), state: path.join(home, 'state') };
    // What systemd makes before starting the service: RuntimeDirectory= and StateDirectory=.
    mkdirSync(path.join(dirs.runtime, 'syncauth'), { recursive: true });
    mkdirSync(path.join(dirs.state, 'syncauth'), { recursive: true, mode: 0o700 });
    const unit = readUnit(SERVICE);
    const group = valueOf(unit, 'Service', 'Group');
    expect(group).toBe('syncauth');
    // The unit's arguments, the binary replaced by the build, the port by a free one, and its group by one that
    // exists on this machine (nogroup, gid 65534).
    const args = execStartOf(unit)
      .slice(1)
      .map((arg) => expandSpecifiers(arg, dirs))
      .map((arg) => (arg === '127.0.0.1:9464' ? '127.0.0.1:0' : arg === group ? 'nogroup' : arg));
    const unitEnv = Object.fromEntries(Object.entries(environmentOf(unit)).map(([k, v]) => [k, expandSpecifiers(v, dirs)]));
    // The environment file's part: here the grant itself, as a host that was handed one would hold it.
    const base = containerEnv(emu, grant, home);
    delete base.SYNCAUTH_LISTEN;
    delete base.SYNCAUTH_STORE;
    delete base.SYNCAUTH_CONFIG_DIR;
    const env = { ...base, ...unitEnv };

    const child = spawn(process.execPath, [CLI, ...args], { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = { stdout: '', stderr: '' };
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out.stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out.stderr += d));
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    try {
      const start = await waitFor('the start line', () => {
        if (child.exitCode !== null) throw new Error(`the daemon exited (${child.exitCode}):\n${out.stdout}\n${out.stderr}`);
        const line = out.stdout.split('\n').find((l) => l.includes('daemon started'));
        return line ? (JSON.parse(line) as { listen: string }) : undefined;
      });
      await waitFor('readiness', async () => ((await fetch(`${start.listen}/readyz`)).status === 200 ? true : undefined), 20_000);

      const tokenFile = path.join(dirs.runtime, 'syncauth', 'container.token');
      expect(readFileSync(tokenFile, 'utf8')).toBe(latestTokenOf(emu, grant.refreshToken)?.token);
      const info = statSync(tokenFile);
      expect((info.mode & 0o777).toString(8)).toBe('640');
      expect(info.gid).toBe(65534);

      // ExecReload, as systemd runs it.
      const reload = splitCommand(valueOf(unit, 'Service', 'ExecReload') as string).map((a) => (a === '$MAINPID' ? String(child.pid) : a));
      expect((await run(reload[0] as string, reload.slice(1))).code).toBe(0);
      await waitFor('the reload', () => (out.stdout.includes('SIGHUP') ? true : undefined));
      expect(child.exitCode).toBeNull();
      expect((await fetch(`${start.listen}/readyz`)).status).toBe(200);

      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });

  it('with the drop-in: the page on loopback behind its public URL, notices sent, the secret only from the environment file', async () => {
    const dropIn = readUnit(DROP_IN);
    const added = environmentOf(dropIn);
    expect(added.SYNCAUTH_REAUTH_LISTEN).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(added.SYNCAUTH_PUBLIC_URL).toMatch(/^https:\/\//);
    expect(added.SYNCAUTH_NOTIFY_URL).toMatch(/^https:\/\//);
    // No secret in the drop-in's settings; its comments send it to the 0600 environment file.
    const settings = readFileSync(DROP_IN, 'utf8').split('\n').filter((line) => !line.startsWith('#'));
    expect(settings.filter((line) => /SECRET|STORE_KEY|API_KEY|REFRESH_TOKEN/.test(line))).toEqual([]);
    expect(readFileSync(DROP_IN, 'utf8')).toMatch(/SYNCAUTH_NOTIFY_SECRET=whsec_.*\n(.*\n)*.*mode 0600|mode 0600(.*\n)*.*SYNCAUTH_NOTIFY_SECRET=whsec_/);
    // The real daemon with the unit's environment and the drop-in's, ports made free and the receiver local.
    const emu = await emulator({ tokenLifetimeSeconds: 3600 });
    const grant = await obtainGrant(emu);
    const home = tempDir('syncauth-unit-dropin-');
    const receiver = await startWebhookReceiver();
    const pagePort = await freePort();
    const env: Record<string, string> = {
      ...containerEnv(emu, grant, home, { tokenFile: path.join(home, 'token') }),
      ...added,
      SYNCAUTH_REAUTH_LISTEN: `127.0.0.1:${pagePort}`,
      SYNCAUTH_NOTIFY_URL: receiver.url,
      // The environment file's line.
      SYNCAUTH_NOTIFY_SECRET: `whsec_${Buffer.alloc(32, 9).toString('base64')}`,
    };
    const daemon = spawnDaemon(env, home);
    try {
      const start = await daemon.started();
      expect(start).toMatchObject({ notify: [new URL(receiver.url).origin] });
      // The page answers on loopback, only for the public host (what the proxy passes through).
      const answer = await waitFor('the page', () => fetch(`http://127.0.0.1:${pagePort}/reauthorize/${'A'.repeat(43)}`, { headers: { host: new URL(added.SYNCAUTH_PUBLIC_URL as string).host } }).catch(() => undefined));
      expect(answer.status).toBe(404);
      expect(answer.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      daemon.child.kill('SIGTERM');
      expect(await daemon.exited).toBe(0);
    } finally {
      if (daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGKILL');
    }
  });

  it.skipIf(notifier === null && !isCI())('sends READY=1 only once the token is published and /readyz says 200, and STOPPING=1 on SIGTERM', async () => {
    if (!notifier) throw new Error('systemd-notify not found: install the Debian package (apt-get install -y systemd); required in CI: CI is set');
    const emu = await emulator({ tokenLifetimeSeconds: 3600 });
    const grant = await obtainGrant(emu);
    // The first renewal takes 1.5 s: a window in which the daemon is up but not ready.
    emu.setFaults([{ route: 'token', latencyMs: 1_500, times: 1 }]);
    const home = tempDir('syncauth-notify-');
    const receiver = await startNotifyReceiver(home);
    receivers.push(receiver);
    const tokenFile = path.join(home, 'token');

    // What the token file held at the instant READY=1 was read, before anything else could run.
    let publishedAtReady: string | null | undefined;
    receiver.onMessage((message) => {
      if (!message.fields.includes('READY=1') || publishedAtReady !== undefined) return;
      try {
        publishedAtReady = readFileSync(tokenFile, 'utf8');
      } catch {
        publishedAtReady = null;
      }
    });

    // A known port, so that /readyz is asked from the moment the server listens, before any start line.
    const listen = `http://127.0.0.1:${await freePort()}`;
    const env = { ...containerEnv(emu, grant, home, { tokenFile }), SYNCAUTH_LISTEN: listen.slice('http://'.length), NOTIFY_SOCKET: receiver.path };
    const daemon = spawnDaemon(env, home);
    try {
      // Poll /readyz until READY=1 came and one more answer after it; note for each answer whether READY=1 had
      // already been read when the request was sent.
      const answers: { status: number; afterReady: boolean }[] = [];
      await waitFor(
        'READY=1 and a /readyz answer after it',
        async () => {
          if (daemon.child.exitCode !== null) throw new Error(`the daemon exited (${daemon.child.exitCode}):\n${daemon.out.stdout}\n${daemon.out.stderr}`);
          const afterReady = receiver.messages.some((m) => m.fields.includes('READY=1'));
          const status = await fetch(`${listen}/readyz`).then(
            async (r) => (await r.arrayBuffer(), r.status),
            () => undefined,
          );
          if (status !== undefined) answers.push({ status, afterReady });
          return afterReady && status !== undefined ? true : undefined;
        },
        20_000,
      );
      expect(answers.some((a) => !a.afterReady && a.status === 503)).toBe(true);
      expect(answers.filter((a) => a.afterReady).map((a) => a.status)).toEqual([200]);
      expect(publishedAtReady).toBe(latestTokenOf(emu, grant.refreshToken)?.token);
      expect(receiver.messages.filter((m) => m.fields.includes('READY=1'))).toHaveLength(1);
      expect(receiver.messages.some((m) => m.fields.includes('STOPPING=1'))).toBe(false);

      daemon.child.kill('SIGTERM');
      expect(await daemon.exited).toBe(0);
      await receiver.waitFor('STOPPING=1', 5_000);
      expect(receiver.messages.filter((m) => m.fields.includes('READY=1'))).toHaveLength(1);
    } finally {
      if (daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGKILL');
    }
  });
});
