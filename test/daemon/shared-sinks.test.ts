// The daemon's sinks on a host shared with another local user (uid 65534, run for real through setpriv): a
// token, an expiry or a link planted in a shared directory such as /tmp is never adopted nor followed, the
// daemon publishes in a private subdirectory of its own there instead, and a subdirectory of that name that
// someone else made is refused at start with exit 2.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';
import { connectorsNamed, emulator, latestTokenOf, obtainGrant } from './helpers.js';
import { containerEnv, spawnDaemon } from './process.js';

const NOBODY = 65534;
const UID = process.geteuid?.() ?? 0;
const FUTURE = '2099-01-01T00:00:00.000Z\n';

/** A directory like /tmp: sticky and world-writable. */
function stickyDir(): string {
  const dir = tempDir('syncauth-shared-');
  chmodSync(dir, 0o1777);
  return dir;
}

/** Runs a shell script as uid/gid 65534 with no supplementary group: the other local user. */
function asNobody(script: string, ...args: string[]): void {
  const result = spawnSync('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'sh', '-ec', script, 'sh', ...args], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
}

/** A file only root may read, standing in for a secret of the daemon's user (its secret store). */
function rootOnlyFile(content: string): string {
  const dir = tempDir('syncauth-private-');
  chmodSync(dir, 0o700);
  const file = path.join(dir, 'secrets.enc');
  writeFileSync(file, content, { mode: 0o600 });
  return file;
}

function socketGet(socketPath: string, urlPath: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: urlPath, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('a token file in a directory another user may write', () => {
  it('a fake token and a future expiry planted by another user are not adopted: --once renews and gives the connector the real token', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const shared = stickyDir();
    const tokenFile = path.join(shared, 'x.token');
    asNobody('printf %s sl.FAKE-planted-by-nobody > "$1"; printf %s "$2" > "$1.expires_at"; chmod 600 "$1" "$1.expires_at"', tokenFile, FUTURE);

    const result = await runCli(['daemon', '--once'], { env: containerEnv(emu, grant, home, { profile: 'shared', tokenFile }), cwd: home, timeoutMs: 20_000 });
    expect(result.code, result.stdout + result.stderr).toBe(0);
    const real = latestTokenOf(emu, grant.refreshToken)?.token as string;
    expect(connectorsNamed(emu, 'conn-shared').map((c) => c.config.token)).toEqual([real]);
    // Published in the daemon's own subdirectory, 0750 and its own; the planted files are left to their owner.
    const own = path.join(shared, `syncauth-${UID}`);
    expect(readFileSync(path.join(own, 'x.token'), 'utf8')).toBe(real);
    expect(statSync(own).uid).toBe(UID);
    expect((statSync(own).mode & 0o7777).toString(8)).toBe('750');
    expect(readFileSync(tokenFile, 'utf8')).toBe('sl.FAKE-planted-by-nobody');
    const moved = result.stdout.split('\n').filter((l) => l.includes('"sink.moved"')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(moved).toEqual([expect.objectContaining({ configured: tokenFile, path: path.join(own, 'x.token') })]);
  }, 40_000);

  it('a link to a root-only file planted at the token path is not read: --once never sends its content', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const shared = stickyDir();
    const secret = rootOnlyFile('sl.ROOT-ONLY-CONTENT');
    const tokenFile = path.join(shared, 'x.token');
    asNobody('ln -s "$2" "$1"; printf %s "$3" > "$1.expires_at"; chmod 600 "$1.expires_at"', tokenFile, secret, FUTURE);

    const result = await runCli(['daemon', '--once'], { env: containerEnv(emu, grant, home, { profile: 'linked', tokenFile }), cwd: home, timeoutMs: 20_000 });
    expect(result.code, result.stdout + result.stderr).toBe(0);
    const sent = connectorsNamed(emu, 'conn-linked').map((c) => c.config.token);
    expect(sent).toEqual([latestTokenOf(emu, grant.refreshToken)?.token]);
    expect(JSON.stringify(emu.state.requests)).not.toContain('ROOT-ONLY-CONTENT');
    expect(result.stdout).not.toContain('ROOT-ONLY-CONTENT');
    expect(readFileSync(secret, 'utf8')).toBe('sl.ROOT-ONLY-CONTENT');
  }, 40_000);

  it('a subdirectory of its name that another user made first is refused at start: exit 2 naming the path and the rule, nothing sent', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const shared = stickyDir();
    const own = path.join(shared, `syncauth-${UID}`);
    asNobody('mkdir -m 0755 "$1"', own);
    const tokenFile = path.join(shared, 'x.token');

    const result = await runCli(['daemon', '--once'], { env: containerEnv(emu, grant, home, { profile: 'squat', tokenFile }), cwd: home, timeoutMs: 20_000 });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(own);
    expect(result.stderr).toContain(`belongs to uid ${NOBODY}`);
    expect(result.stderr).toContain('private subdirectory');
    expect(connectorsNamed(emu, 'conn-squat')).toEqual([]);
    expect(emu.state.requests.filter((r) => r.route === 'token')).toHaveLength(1); // the grant's own code exchange
    expect(existsSync(path.join(own, 'x.token'))).toBe(false);
  }, 40_000);

  it('so is a link of that name, even to a directory of its own', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const shared = stickyDir();
    const mine = tempDir('syncauth-mine-');
    chmodSync(mine, 0o750);
    asNobody('ln -s "$2" "$1"', path.join(shared, `syncauth-${UID}`), mine);
    const result = await runCli(['daemon', '--once'], { env: containerEnv(emu, grant, home, { profile: 'link', tokenFile: path.join(shared, 'x.token') }), cwd: home, timeoutMs: 20_000 });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('is a symbolic link');
    expect(existsSync(path.join(mine, 'x.token'))).toBe(false);
  }, 40_000);
});

describe('a token file left where only the daemon writes', () => {
  it('a link planted at the token path (a root-only file behind it) is removed, not served on the socket: one line says why, a fresh token is served', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const secret = rootOnlyFile('sl.ROOT-ONLY-CONTENT');
    const tokenFile = path.join(home, 'x.token');
    symlinkSync(secret, tokenFile);
    writeFileSync(`${tokenFile}.expires_at`, FUTURE, { mode: 0o600 });
    const socket = path.join(home, 'token.sock');
    const daemon = spawnDaemon(containerEnv(emu, grant, home, { profile: 'sock', tokenFile }), home, ['--socket', socket]);
    try {
      const start = await daemon.started();
      await daemon.ready(start.listen);
      const reply = await socketGet(socket, '/v1/token/sock');
      expect(reply.status).toBe(200);
      expect(reply.body).not.toContain('ROOT-ONLY-CONTENT');
      expect(reply.body).toBe(latestTokenOf(emu, grant.refreshToken)?.token);
      await waitFor('the token file', () => (lstatSync(tokenFile).isFile() ? true : undefined));
      const refused = daemon.out.stdout.split('\n').filter((l) => l.includes('"token_file.refused"')).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(refused).toEqual([expect.objectContaining({ profile: 'sock', path: tokenFile, reason: 'it is a symbolic link', removed: true })]);
      expect(readFileSync(secret, 'utf8')).toBe('sl.ROOT-ONLY-CONTENT');
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
  }, 40_000);
});

describe('a socket in a directory another user may write', () => {
  it('listens in the daemon\'s own subdirectory there, with the socket group on it', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const shared = stickyDir();
    const configured = path.join(shared, 'token.sock');
    const daemon = spawnDaemon(containerEnv(emu, grant, home, { profile: 'ask' }), home, ['--socket', configured, '--socket-mode', '0660', '--socket-group', String(NOBODY)]);
    try {
      const start = await daemon.started();
      await daemon.ready(start.listen);
      const own = path.join(shared, `syncauth-${UID}`);
      const socket = path.join(own, 'token.sock');
      expect(lstatSync(socket).isSocket()).toBe(true);
      expect(existsSync(configured)).toBe(false);
      expect(statSync(own).gid).toBe(NOBODY);
      expect((await socketGet(socket, '/v1/token/ask')).body).toBe(latestTokenOf(emu, grant.refreshToken)?.token);
      expect((JSON.parse(daemon.out.stdout.split('\n').find((l) => l.includes('daemon started')) as string) as { socket: string }).socket).toBe(socket);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
  }, 40_000);
});

describe('a template DEST in a directory another user may write', () => {
  it('a link planted at DEST by another user is not followed: the file it points at (the secret store) stays as it was', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const shared = stickyDir();
    const store = rootOnlyFile('the encrypted secret store');
    const dest = path.join(shared, 'rclone.conf');
    asNobody('ln -s "$2" "$1"', dest, store);
    const source = path.join(home, 'rclone.conf.tpl');
    writeFileSync(source, 'token = {{ access_token }}\n');

    const result = await runCli(['daemon', '--once', '--template', `${source}:${dest}`], { env: containerEnv(emu, grant, home, { profile: 'tpl' }), cwd: home, timeoutMs: 20_000 });
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(readFileSync(store, 'utf8')).toBe('the encrypted secret store');
    expect(lstatSync(dest).isSymbolicLink()).toBe(true);
    const rendered = path.join(shared, `syncauth-${UID}`, 'rclone.conf');
    expect(readFileSync(rendered, 'utf8')).toBe(`token = ${latestTokenOf(emu, grant.refreshToken)?.token}\n`);
    expect((statSync(rendered).mode & 0o777).toString(8)).toBe('600');
  }, 40_000);
});

describe('a Kubernetes emptyDir (0777, the pod group set on it)', () => {
  it('the token goes to <dir>/syncauth-<uid>/ with the group, which the group can traverse and read', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const volume = path.join(home, 'dropbox-token');
    mkdirSync(volume);
    chmodSync(volume, 0o2777);
    const tokenFile = path.join(volume, 'token');
    const env = { ...containerEnv(emu, grant, home, { profile: 'pod', tokenFile }), SYNCAUTH_TOKEN_FILE_MODE: '0640', SYNCAUTH_TOKEN_FILE_GROUP: String(NOBODY) };
    const result = await runCli(['daemon', '--once'], { env, cwd: home, timeoutMs: 20_000 });
    expect(result.code, result.stdout + result.stderr).toBe(0);
    const own = path.join(volume, `syncauth-${UID}`);
    expect(statSync(own).gid).toBe(NOBODY);
    expect((statSync(own).mode & 0o7777).toString(8)).toBe('750');
    // A reader in the group (and only the group) reads the token through the subdirectory.
    chmodSync(home, 0o755);
    const read = spawnSync('setpriv', ['--reuid', '4242', '--regid', '4242', `--groups=${NOBODY}`, 'cat', path.join(own, 'token')], { encoding: 'utf8' });
    expect(read.stdout).toBe(latestTokenOf(emu, grant.refreshToken)?.token);
    const outsider = spawnSync('setpriv', ['--reuid', '4242', '--regid', '4242', '--clear-groups', 'cat', path.join(own, 'token')], { encoding: 'utf8' });
    expect(outsider.status).not.toBe(0);
  }, 40_000);
});
