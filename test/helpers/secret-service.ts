// A private D-Bus session bus with an unlocked gnome-keyring on it, for tests that use a real Secret Service.
// Everything lives in a temporary directory (HOME, XDG dirs, the bus socket), so the tests never touch the
// keyring of whoever runs them. Needs the Debian packages `dbus` (dbus-daemon, dbus-send) and `gnome-keyring`.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface Bus {
  /** A DBUS_SESSION_BUS_ADDRESS for this bus. */
  address: string;
  stop(): Promise<void>;
}

export type SecretServiceStart = { ok: true; bus: Bus } | { ok: false; reason: string };

/** True when running in CI, where a real part that cannot be started is a failure, not a skip. */
export function isCI(): boolean {
  const value = process.env.CI;
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Starts a bus with an unlocked gnome-keyring providing org.freedesktop.secrets, or says why it could not.
 * The keyring's password is empty; the default collection is checked to be unlocked before returning.
 */
export async function startSecretService(): Promise<SecretServiceStart> {
  let bus: PrivateBus | undefined;
  try {
    bus = await startPrivateBus();
    const keyring = track(
      spawn('gnome-keyring-daemon', ['--foreground', '--unlock', '--components=secrets'], {
        env: { ...bus.env },
        stdio: ['pipe', 'ignore', 'pipe'],
      }),
    );
    bus.children.push(keyring);
    const keyringFailed = exitReason(keyring, 'gnome-keyring-daemon', 'gnome-keyring');
    // --unlock reads the password up to end of input; a lone newline is the empty password. (With --daemonize
    // the password would be dropped, hence --foreground.)
    keyring.stdin?.end('\n');
    await Promise.race([waitForUnlockedCollection(bus.env), keyringFailed]);
    return { ok: true, bus: bus.public };
  } catch (error) {
    await bus?.public.stop();
    return { ok: false, reason: (error as Error).message };
  }
}

/** A bus on which nothing provides the Secret Service and nothing can be activated to provide it. */
export async function startBareBus(): Promise<Bus> {
  return (await startPrivateBus()).public;
}

interface PrivateBus {
  public: Bus;
  env: Record<string, string>;
  children: ChildProcess[];
}

async function startPrivateBus(): Promise<PrivateBus> {
  const dir = mkdtempSync(path.join(tmpdir(), 'syncauth-dbus-'));
  for (const sub of ['home', 'runtime', 'data', 'config', 'cache']) mkdirSync(path.join(dir, sub), { mode: 0o700 });
  const socket = path.join(dir, 'bus');
  const config = path.join(dir, 'bus.conf');
  // No <servicedir>: nothing gets activated on demand, so a test sees exactly the services it started.
  writeFileSync(
    config,
    `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=${socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`,
  );
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: path.join(dir, 'home'),
    XDG_RUNTIME_DIR: path.join(dir, 'runtime'),
    XDG_DATA_HOME: path.join(dir, 'data'),
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    XDG_CACHE_HOME: path.join(dir, 'cache'),
  };
  const children: ChildProcess[] = [];
  const stop = async () => {
    for (const child of [...children].reverse()) await terminate(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const daemon = track(
      spawn('dbus-daemon', [`--config-file=${config}`, '--nofork', '--print-address=1'], {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    children.push(daemon);
    const address = await Promise.race([firstLine(daemon), exitReason(daemon, 'dbus-daemon', 'dbus')]);
    env.DBUS_SESSION_BUS_ADDRESS = address;
    return { public: { address, stop }, env, children };
  } catch (error) {
    await stop();
    throw error;
  }
}

function track(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error('dbus-daemon printed no address within 5 s')), 5_000);
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
      const newline = text.indexOf('\n');
      if (newline >= 0) {
        clearTimeout(timer);
        resolve(text.slice(0, newline).trim());
      }
    });
  });
}

/** Rejects when `child` cannot start or exits; never resolves. */
function exitReason(child: ChildProcess, command: string, debianPackage: string): Promise<never> {
  return new Promise((_resolve, reject) => {
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < 2000) stderr += chunk;
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        new Error(
          error.code === 'ENOENT'
            ? `${command} is not installed (Debian package ${debianPackage})`
            : `${command} could not start: ${error.message}`,
        ),
      );
    });
    child.once('exit', (code, signal) => {
      reject(new Error(`${command} exited (${signal ?? `code ${String(code)}`}): ${stderr.trim().slice(0, 500)}`));
    });
  });
}

// Polls until org.freedesktop.secrets is on the bus and its default collection reports Locked=false.
async function waitForUnlockedCollection(env: Record<string, string>): Promise<void> {
  const deadline = Date.now() + 10_000;
  let last = '';
  while (Date.now() < deadline) {
    const result = await run(
      'dbus-send',
      [
        '--session',
        '--print-reply',
        '--dest=org.freedesktop.secrets',
        '/org/freedesktop/secrets/aliases/default',
        'org.freedesktop.DBus.Properties.Get',
        'string:org.freedesktop.Secret.Collection',
        'string:Locked',
      ],
      env,
    );
    if (result.missing) throw new Error('dbus-send is not installed (Debian package dbus)');
    if (/boolean false/.test(result.output)) return;
    last = result.output.trim();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the Secret Service did not come up with an unlocked default collection within 10 s: ${last}`);
}

function run(command: string, args: string[], env: Record<string, string>): Promise<{ output: string; missing: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', (error: NodeJS.ErrnoException) => resolve({ output: error.message, missing: error.code === 'ENOENT' }));
    child.once('close', () => resolve({ output, missing: false }));
  });
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
  await exited;
  clearTimeout(timer);
}
