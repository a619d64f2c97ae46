// A config dir another local user may write, as that user (uid 65534, run for real through setpriv) would leave
// it: `/tmp/x`, 0777 without the sticky bit, made by them. Every command that opens a config dir refuses it at
// start (exit 2, naming the path, owner, mode and rule) and writes nothing there; the daemon refuses before it
// serves the re-authorization page or sends a notice, so a link digest, an outbox entry and a profile state
// that user planted there are never acted on. A config dir in a temporary directory under /tmp still works, and
// a root-owned one every user may write (a Kubernetes emptyDir) works through `<dir>/syncauth-<uid>/`.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OUTBOX_VERSION, type Delivery } from '../../src/notify/outbox.js';
import { parseNotifyUrl } from '../../src/notify/targets.js';
import { openProfileStore } from '../../src/profile/index.js';
import { fileLinkStore, LINKS_FILE_NAME, mintLink } from '../../src/reauth/links.js';
import { OUTBOX_FILE } from '../../src/notify/file-outbox.js';
import { containerEnv, spawnDaemon } from '../daemon/process.js';
import { emulator, obtainGrant } from '../daemon/helpers.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';
import { freePort } from '../helpers/onboarding.js';
import { startReceiver } from '../notify/receiver.js';

const NOBODY = 65534;
const UID = process.geteuid?.() ?? 0;
const RULE = 'the config directory and every directory above it must belong to this user or root, and no other user may write them';

function asNobody(script: string, args: string[], input?: string): void {
  const result = spawnSync('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'sh', '-ec', script, 'sh', ...args], { encoding: 'utf8', ...(input !== undefined ? { input } : {}) });
  expect(result.status, result.stderr).toBe(0);
}

const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** What uid 65534 does: `mkdir -m 0777 /tmp/x`. */
function nobodysTmpX(): string {
  const dir = path.join(tmpdir(), `syncauth-x-${process.pid}-${made.length}`);
  asNobody('mkdir -m 0777 "$1"', [dir]);
  made.push(dir);
  return dir;
}

/** Every file under `dir` with its content, to show nothing was written there. */
function snapshot(dir: string): Record<string, string> {
  const found: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const file = path.join(dir, entry);
    found[entry] = statSync(file).isDirectory() ? '<dir>' : readFileSync(file, 'utf8');
  }
  return found;
}

function expectRefusal(stderr: string, dir: string): void {
  expect(stderr).toContain(`refusing the config directory ${dir}: ${dir} (owner uid 65534, nobody, mode 0777) belongs to another user`);
  expect(stderr).toContain(RULE);
  expect(stderr).toContain('network file system without id mapping (NFS)');
}

describe("uid 65534's /tmp/x (0777, no sticky bit) as the config dir", () => {
  const commands: [string, string[]][] = [
    ['setup', ['setup', '--yes', '--no-open']],
    ['daemon', ['daemon', '--once']],
    ['status', ['status']],
    ['token', ['token']],
    ['refresh', ['refresh']],
    ['logout', ['logout', '--no-revoke']],
    ['exec', ['exec', '--', 'true']],
    ['reauth-link', ['reauth-link', '--public-url', 'https://syncauth.example.com']],
    ['source list', ['source', 'list']],
    ['source get', ['source', 'get', '6f1c9a2e-8d4b-4c3a-9e7f-2b5d8c1a0e93']],
    ['workflow list', ['workflow', 'list']],
    ['jobs list', ['jobs', 'list']],
    ['destination list', ['destination', 'list']],
    ['profile set', ['profile', 'set', '--no-workflow']],
    ['profile rotate', ['profile', 'rotate', 'api-key']],
    ['profile rekey', ['profile', 'rekey']],
  ];

  it.each(commands)('%s refuses it at start, exit 2 naming the path, owner, mode and rule, and writes nothing there', async (_name, args) => {
    const dir = nobodysTmpX();
    // What that user planted, as they would: a profile state and a link digest.
    asNobody('mkdir "$1/profiles" && printf "%s" "$2" > "$1/profiles/default.json"', [dir, '{"version":1}']);
    const before = snapshot(dir);
    const result = await runInProcess(args, {
      env: {
        SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: 'k'.repeat(32),
        SYNCAUTH_BASE_URL: 'http://127.0.0.1:9', SYNCAUTH_API_KEY: 'key', SYNCAUTH_REMOTE_URL: 'dropbox://data',
      },
      stdin: 'new-secret-value\n',
    });
    expect(result.code, result.stderr).toBe(2);
    expectRefusal(result.stderr, dir);
    expect(snapshot(dir)).toEqual(before);
  });

  it('doctor reports the same rule as its failing config-dir line and reads nothing there', async () => {
    const dir = nobodysTmpX();
    const result = await runInProcess(['doctor', '--json'], { env: { SYNCAUTH_CONFIG_DIR: dir } });
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as { checks: { check: string; status: string; message: string; fix?: string }[] };
    expect(report.checks).toHaveLength(1);
    expect(report.checks[0]).toMatchObject({ check: 'config-dir', status: 'fail' });
    expectRefusal(`${report.checks[0]?.message} ${report.checks[0]?.fix}`, dir);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a planted link digest, outbox notice and profile state are never acted on: the daemon refuses before it serves the page or sends anything', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 3600 });
    const grant = await obtainGrant(emu);
    const home = tempDir('syncauth-config-dir-daemon-');
    const dir = nobodysTmpX();
    const receiver = await startReceiver();
    const port = await freePort();
    const publicUrl = `http://127.0.0.1:${port}`;

    // What uid 65534 writes into the directory: files made the way syncauth makes them, elsewhere, then copied
    // in by that user. A link to the page that lets any account take the profile over, a profile state naming
    // their Dropbox account, and a "re-authorization needed" notice with their phishing link in the outbox.
    const scratch = tempDir('syncauth-config-dir-scratch-');
    const { url: link } = await mintLink(fileLinkStore(scratch), { profile: 'docs', publicUrl, allowAccountChange: true });
    await openProfileStore(scratch).update('docs', () => ({ remoteUrl: 'dropbox://data', accountId: 'dbid:AAattackersaccount' }));
    const now = Date.now();
    const forged: Delivery = {
      key: `msg_forged.${parseNotifyUrl(receiver.url, 'url').key}`,
      id: 'msg_forged',
      target: parseNotifyUrl(receiver.url, 'url').key,
      payload: { type: 'profile.reauthorization_needed', timestamp: new Date(now).toISOString(), data: { profile: 'docs', reason: 'the grant was revoked', link: 'https://phish.example.com/reauthorize' } },
      firstAt: now,
      attempts: 0,
      nextAt: 0,
    };
    asNobody('cat > "$1/$2"', [dir, LINKS_FILE_NAME], readFileSync(path.join(scratch, LINKS_FILE_NAME), 'utf8'));
    asNobody('cat > "$1/$2"', [dir, OUTBOX_FILE], JSON.stringify({ version: OUTBOX_VERSION, deliveries: [forged], reminders: [], seen: {} }));
    asNobody('mkdir "$1/profiles" && cat > "$1/profiles/docs.json"', [dir], readFileSync(path.join(scratch, 'profiles', 'docs.json'), 'utf8'));
    const before = snapshot(dir);

    const env = {
      ...containerEnv(emu, grant, home, { profile: 'docs' }),
      SYNCAUTH_CONFIG_DIR: dir,
      SYNCAUTH_NOTIFY_SECRET: `whsec_${Buffer.from('config-dir-test-secret-32-bytes!').toString('base64')}`,
    };
    const daemon = spawnDaemon(env, home, ['--token-file', path.join(home, 'token'), '--reauth-listen', `127.0.0.1:${port}`, '--public-url', publicUrl, '--notify-url', receiver.url]);
    try {
      const code = await Promise.race([daemon.exited, new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 15_000))]);
      // While it ran (if it did), the planted link and notice were there for the taking.
      const page = await fetch(link).then((answer) => answer.status, () => 'nothing listening');
      expect({ code, page, delivered: receiver.received.length }).toEqual({ code: 2, page: 'nothing listening', delivered: 0 });
      expectRefusal(daemon.out.stderr, dir);
      expect(snapshot(dir)).toEqual(before);
      expect(existsSync(path.join(home, 'token'))).toBe(false);
    } finally {
      daemon.child.kill('SIGKILL');
      await daemon.exited;
    }
  });
});

describe('config dirs that still work', () => {
  it('`syncauth demo`, whose commands keep their state in a temporary directory under /tmp', async () => {
    const result = await runCli(['demo'], { timeoutMs: 60_000 });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('refusing the config directory');
  }, 90_000);

  it('a config dir in a temporary directory under /tmp, as `syncauth demo` makes one', async () => {
    const home = tempDir('syncauth-demo-');
    const dir = path.join(home, 'config');
    await openProfileStore(dir).update('docs', () => ({ remoteUrl: 'dropbox://data' }));
    const result = await runInProcess(['status', '--json'], { env: { SYNCAUTH_CONFIG_DIR: dir } });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('"docs"');
  });

  it('a root-owned 02777 directory (an emptyDir) holds the state in syncauth-<uid>, 0700; one another user made there is refused', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 3600 });
    const grant = await obtainGrant(emu);
    const home = tempDir('syncauth-config-dir-emptydir-');
    // Another user of the pod (another container's uid) can reach the volume.
    chmodSync(home, 0o755);
    const volume = path.join(home, 'state');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(volume);
    chmodSync(volume, 0o2777);
    const env = { ...containerEnv(emu, grant, home, { profile: 'docs' }), SYNCAUTH_CONFIG_DIR: volume };
    const once = await runInProcess(['daemon', '--once', '--token-file', path.join(home, 'token')], { env, cwd: home });
    expect(once.code, once.stderr).toBe(0);
    const own = path.join(volume, `syncauth-${UID}`);
    expect(readdirSync(volume)).toEqual([`syncauth-${UID}`]);
    expect(statSync(own).mode & 0o777).toBe(0o700);
    expect(existsSync(path.join(own, 'profiles', 'docs.json'))).toBe(true);
    const status = await runInProcess(['status', '--json'], { env, cwd: home });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('"docs"');
    const doctor = await runInProcess(['doctor', '--json'], { env, cwd: home });
    expect(doctor.stdout).toContain(`${own} is a writable directory; the state lives there, in a directory of this user's own, because ${volume} (owner uid ${UID}, root, mode 02777) is writable by every user`);

    // Another user's directory in its place (renamed away and replaced, as any writer of the volume may).
    asNobody('mv "$1/$2" "$1/old" && mkdir -m 0777 "$1/$2"', [volume, `syncauth-${UID}`]);
    const refused = await runInProcess(['daemon', '--once', '--token-file', path.join(home, 'token')], { env, cwd: home });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`refusing the config directory ${volume}: ${volume} (owner uid ${UID}, root, mode 02777) is writable by every user, so its state lives in ${own}, but ${own} belongs to uid 65534`);
    expect(readdirSync(own)).toEqual([]);
  });
});
