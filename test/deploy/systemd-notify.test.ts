// notifySystemd: the real `systemd-notify` delivering to a datagram socket (with its barrier), and stand-ins
// for it on PATH to see what the child gets (argv, a minimal environment) and how failures come back.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { notifyArguments, notifySystemd } from '../../src/daemon/systemd.js';
import { tempDir } from '../helpers/cli.js';
import { isCI } from '../helpers/secret-service.js';
import { alive, waitFor } from '../helpers/wait.js';
import { startNotifyReceiver, type NotifyReceiver } from './notify-socket.js';

const SECRETS = {
  SYNCAUTH_APP_KEY: 'app-key-secret-1',
  SYNCAUTH_APP_SECRET: 'app-secret-secret-2',
  SYNCAUTH_REFRESH_TOKEN: 'refresh-secret-3',
  SYNCAUTH_API_KEY: 'api-key-secret-4',
  SYNCAUTH_STORE_KEY: 'store-key-secret-5',
};

/** The real systemd-notify (Debian's systemd package); outside CI its tests are skipped when it is missing. */
const hasNotify = (process.env.PATH ?? '/usr/bin:/bin').split(path.delimiter).concat('/usr/bin').some((dir) => dir !== '' && existsSync(path.join(dir, 'systemd-notify')));
if (!hasNotify && !isCI()) console.warn('systemd-notify not found (apt-get install -y systemd): skipping the tests that use it; they fail instead when CI is set');

const receivers: NotifyReceiver[] = [];
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
});

/**
 * A `systemd-notify` of our own in a fresh directory that is the child's whole PATH: it records its argv, its
 * environment and its pid in `calls.jsonl`, then exits with `exitCode` or, with 'hang', never.
 */
function fakeNotify(behaviour: number | 'hang'): { dir: string; calls: () => { argv: string[]; env: Record<string, string>; pid: number }[] } {
  const dir = tempDir('syncauth-notify-');
  const bin = path.join(dir, 'bin');
  mkdirSync(bin);
  const log = path.join(dir, 'calls.jsonl');
  const tail = behaviour === 'hang' ? 'setInterval(() => {}, 1000);' : `process.exit(${behaviour});`;
  writeFileSync(
    path.join(bin, 'systemd-notify'),
    `#!${process.execPath}\n` +
      `require('node:fs').appendFileSync(${JSON.stringify(log)}, JSON.stringify({ argv: process.argv.slice(2), env: process.env, pid: process.pid }) + '\\n');\n` +
      tail +
      '\n',
  );
  chmodSync(path.join(bin, 'systemd-notify'), 0o755);
  return {
    dir: bin,
    calls: () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { argv: string[]; env: Record<string, string>; pid: number }) : []),
  };
}

describe('notifyArguments', () => {
  it('turns READY=1 and STATUS= into options and passes other assignments as they are', () => {
    expect(notifyArguments('READY=1')).toEqual(['--ready']);
    expect(notifyArguments('READY=1\nSTATUS=serving 2 profiles')).toEqual(['--ready', '--status=serving 2 profiles']);
    expect(notifyArguments('STOPPING=1')).toEqual(['STOPPING=1']);
    expect(notifyArguments('RELOADING=1\n')).toEqual(['RELOADING=1']);
  });

  it('refuses what is not a list of assignments', () => {
    for (const bad of ['', '\n', 'READY', 'ready=1', '=1', 'READY=1\n--pid=1', '--ready']) expect(notifyArguments(bad)).toBeUndefined();
  });
});

describe.skipIf(!hasNotify && !isCI())('notifySystemd with the real systemd-notify', () => {
  it('delivers READY=1 with a status, then STOPPING=1, and resolves true once the barrier is through', async () => {
    const receiver = await startNotifyReceiver(tempDir('syncauth-notify-'));
    receivers.push(receiver);
    const env = { NOTIFY_SOCKET: receiver.path, PATH: process.env.PATH ?? '/usr/bin:/bin' };

    // true means the barrier went through: systemd-notify fails when its own 5-s barrier wait runs out, and
    // notifySystemd gives false past its own 5 s, so no clock is needed here (a busy machine could slow either).
    expect(await notifySystemd('READY=1\nSTATUS=serving 2 profiles', env)).toBe(true);
    expect(await notifySystemd('STOPPING=1', env)).toBe(true);

    // The barrier goes through when the receiver reads its message, before the line it prints for it reaches this
    // process: both barriers' lines are waited for, not only STOPPING's, printed before the second barrier.
    await waitFor('both barriers on the notify socket', () => receiver.messages.filter((m) => m.fields.includes('BARRIER=1')).length >= 2 || undefined);
    const fields = receiver.messages.map((m) => m.fields);
    expect(fields).toContainEqual(['READY=1', 'STATUS=serving 2 profiles']);
    expect(fields.filter((f) => f.includes('BARRIER=1'))).toHaveLength(2);
    const ready = fields.findIndex((f) => f.includes('READY=1'));
    const stopping = fields.findIndex((f) => f.includes('STOPPING=1'));
    expect(ready).toBeGreaterThanOrEqual(0);
    expect(stopping).toBeGreaterThan(ready);
  });

  it('gives false when nobody listens on NOTIFY_SOCKET', async () => {
    const dir = tempDir('syncauth-notify-');
    expect(await notifySystemd('READY=1', { NOTIFY_SOCKET: path.join(dir, 'nobody.sock'), PATH: process.env.PATH })).toBe(false);
  });
});

describe('notifySystemd and its child', () => {
  it('does nothing without NOTIFY_SOCKET (not run by systemd) or with a malformed state', async () => {
    const fake = fakeNotify(0);
    expect(await notifySystemd('READY=1', { PATH: fake.dir })).toBe(false);
    expect(await notifySystemd('READY=1', { PATH: fake.dir, NOTIFY_SOCKET: '' })).toBe(false);
    expect(await notifySystemd('READY', { PATH: fake.dir, NOTIFY_SOCKET: '/run/systemd/notify' })).toBe(false);
    expect(fake.calls()).toEqual([]);
  });

  it('gives the child NOTIFY_SOCKET and PATH only, never the secrets around it, and the expected argv', async () => {
    const fake = fakeNotify(0);
    const env = { ...process.env, ...SECRETS, NOTIFY_SOCKET: '@syncauth-test', PATH: fake.dir };
    expect(await notifySystemd('READY=1', env)).toBe(true);
    expect(await notifySystemd('STOPPING=1', env)).toBe(true);
    expect(await notifySystemd('STATUS=renewing docs', env)).toBe(true);

    const calls = fake.calls();
    expect(calls.map((c) => c.argv)).toEqual([['--ready'], ['STOPPING=1'], ['--status=renewing docs']]);
    for (const call of calls) {
      expect(call.env).toEqual({ NOTIFY_SOCKET: '@syncauth-test', PATH: fake.dir });
      for (const secret of Object.values(SECRETS)) expect(JSON.stringify(call)).not.toContain(secret);
    }
  });

  it('gives false when systemd-notify fails or is missing, and never throws', async () => {
    const failing = fakeNotify(1);
    expect(await notifySystemd('READY=1', { NOTIFY_SOCKET: '/run/systemd/notify', PATH: failing.dir })).toBe(false);
    expect(failing.calls()).toHaveLength(1);
    const empty = tempDir('syncauth-notify-');
    expect(await notifySystemd('READY=1', { NOTIFY_SOCKET: '/run/systemd/notify', PATH: empty })).toBe(false);
  });

  it('kills a systemd-notify that outlasts the deadline and gives false', async () => {
    const hanging = fakeNotify('hang');
    const started = Date.now();
    expect(await notifySystemd('READY=1', { NOTIFY_SOCKET: '/run/systemd/notify', PATH: hanging.dir }, { timeoutMs: 1_500 })).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    expect(Date.now() - started).toBeLessThan(5_000);
    const [call] = hanging.calls();
    expect(call).toBeDefined();
    await waitFor('the hanging systemd-notify to be gone', () => (alive((call as { pid: number }).pid) ? undefined : true));
  });
});
