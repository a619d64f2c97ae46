// The ways the real `syncauth daemon` process hands the token to its neighbours, each run for real: a token
// file another user can read when told so (mode and group), templates rendered after each renewal and
// replaced atomically (a broken one keeps the previous file), and a Unix socket that answers its owner and
// refuses other users. Bad handover flags are refused before anything is sent.
import { spawn } from 'node:child_process';
import { chmodSync, readFileSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';
import { emulator, obtainGrant } from './helpers.js';
import { containerEnv, daemonsKilledAfterEach } from './process.js';

const NOBODY = { uid: 65534, gid: 65534 };

const start = daemonsKilledAfterEach();

/** Runs `argv` as the nobody user and gives its exit code and output. */
function asNobody(argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(argv[0] as string, argv.slice(1), { ...NOBODY, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A directory other users may traverse (mkdtemp makes 0700 ones). */
function sharedDir(): string {
  const dir = tempDir('syncauth-handover-');
  chmodSync(dir, 0o755);
  return dir;
}

function askSocket(socketPath: string, route: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: route, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('handing the token over', () => {
  it('a token file with mode 0640 and a group is readable by a consumer running as another user; the default 0600 is not', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const dir = sharedDir();
    const shared = path.join(dir, 'shared.token');
    const daemon = start(containerEnv(emu, grant, dir, { profile: 'app', tokenFile: shared }), dir, ['--token-file-mode', '0640', '--token-file-group', 'nogroup']);
    await daemon.ready((await daemon.started()).listen);
    const info = statSync(shared);
    expect((info.mode & 0o777).toString(8)).toBe('640');
    expect(info.gid).toBe(65534);
    expect((statSync(`${shared}.expires_at`).mode & 0o777).toString(8)).toBe('640');
    const read = await asNobody(['cat', shared]);
    expect(read.code).toBe(0);
    expect(emu.state.accessTokens.get(read.stdout)?.expiresAt).toBeGreaterThan(Date.now());

    const privateFile = path.join(dir, 'private.token');
    const other = start(containerEnv(emu, grant, dir, { profile: 'own', tokenFile: privateFile }), dir, []);
    await other.ready((await other.started()).listen);
    expect((statSync(privateFile).mode & 0o777).toString(8)).toBe('600');
    const refused = await asNobody(['cat', privateFile]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/Permission denied/);
  }, 30_000);

  it('templates are rendered after each renewal, replaced whole, with their mode; a broken one keeps the previous file', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 5 });
    const grant = await obtainGrant(emu);
    const dir = tempDir();
    const rcloneSource = path.join(dir, 'rclone.conf.tpl');
    const rclone = path.join(dir, 'rclone.conf');
    const envSource = path.join(dir, 'env.tpl');
    const envFile = path.join(dir, 'dropbox.env');
    writeFileSync(rcloneSource, '[dropbox]\ntype = dropbox\ntoken = {"access_token":"{{ access_token }}","token_type":"bearer","expiry":"{{ expires_at }}"}\n');
    writeFileSync(envSource, 'DROPBOX_ACCOUNT={{account_id}}\nDROPBOX_ACCESS_TOKEN={{access_token}}\nDROPBOX_EXPIRES_AT={{expires_at_unix}}\n');
    const daemon = start(containerEnv(emu, grant, dir, { profile: 'tpl' }), dir, [
      '--sweep', '* * * * * *', '--renew-margin', '2',
      '--template', `${rcloneSource}:${rclone}`, '--template', `${envSource}:${envFile}:0640`,
    ]);
    await daemon.ready((await daemon.started()).listen);
    expect((statSync(rclone).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(envFile).mode & 0o777).toString(8)).toBe('640');
    expect(readFileSync(envFile, 'utf8')).toContain(`DROPBOX_ACCOUNT=${emu.state.account.accountId}\n`);

    // A reader looping on the file through several renewals sees only whole renders of live tokens.
    const whole = /^\[dropbox\]\ntype = dropbox\ntoken = \{"access_token":"([^"]+)","token_type":"bearer","expiry":"([^"]+)"\}\n$/;
    const seen = new Set<string>();
    let torn = 0;
    let stale = 0;
    const until = Date.now() + 7_000;
    while (Date.now() < until) {
      const match = whole.exec(readFileSync(rclone, 'utf8'));
      const issued = match ? emu.state.accessTokens.get(match[1] as string) : undefined;
      if (!match) torn += 1;
      else if (!issued || issued.expiresAt <= Date.now() || Math.abs(issued.expiresAt - Date.parse(match[2] as string)) > 1_000) stale += 1;
      else seen.add(match[1] as string);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(torn).toBe(0);
    expect(stale).toBe(0);
    expect(seen.size).toBeGreaterThanOrEqual(2);

    // A template broken by an edit: the next renewal logs the failure and leaves the last good render.
    const before = readFileSync(rclone, 'utf8');
    writeFileSync(rcloneSource, 'token = {{ acess_token }}\n');
    const renewals = (): number => daemon.out.stdout.split('\n').filter((l) => l.includes('"event":"renewal.succeeded"')).length;
    const count = renewals();
    await waitFor('a renewal after the edit', () => (renewals() > count ? true : undefined), 8_000);
    await waitFor('the render failure logged', () => (daemon.out.stdout.includes('"event":"template.failed"') ? true : undefined), 2_000);
    expect(readFileSync(rclone, 'utf8')).toBe(before);
    // The other template went on: rendered beside the renewal, it may land just after the failure is logged.
    const previous = whole.exec(before)?.[1] as string;
    await waitFor('the other template rendered with the new token', () => (readFileSync(envFile, 'utf8').includes(previous) ? undefined : true), 5_000);
    const failure = daemon.out.stdout.split('\n').find((l) => l.includes('"event":"template.failed"')) as string;
    expect(failure).toContain('tpl');
    for (const token of emu.state.accessTokens.keys()) expect(daemon.out.stdout).not.toContain(token);
  }, 40_000);

  it('a Unix socket serves the current token to its owner only, and goes away with the daemon', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const dir = sharedDir();
    const socketPath = path.join(dir, 'token.sock');
    const tokenFile = path.join(dir, 'token');
    const daemon = start({ ...containerEnv(emu, grant, dir, { profile: 'sock', tokenFile }), SYNCAUTH_SOCKET: socketPath }, dir, []);
    await daemon.ready((await daemon.started()).listen);
    expect((statSync(socketPath).mode & 0o777).toString(8)).toBe('600');
    const answer = await askSocket(socketPath, '/v1/token');
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(readFileSync(tokenFile, 'utf8'));
    const json = JSON.parse((await askSocket(socketPath, '/v1/token/sock?format=json')).body) as { access_token: string; profile: string };
    expect(json).toMatchObject({ access_token: answer.body, profile: 'sock' });
    expect((await askSocket(socketPath, '/v1/token/other')).status).toBe(404);

    const probe = `require('node:http').get({ socketPath: ${JSON.stringify(socketPath)}, path: '/v1/token' }, (r) => process.exit(r.statusCode === 200 ? 0 : 3)).on('error', (e) => { console.error(e.code); process.exit(2); })`;
    const other = await asNobody([process.execPath, '-e', probe]);
    expect(other.code).toBe(2);
    expect(other.stderr).toContain('EACCES');

    daemon.child.kill('SIGTERM');
    expect(await daemon.exited).toBe(0);
    expect(existsSync(socketPath)).toBe(false);
  }, 30_000);

  it.each([
    [['--template', 'missing.tpl'], '--template'],
    [['--template', '/nonexistent/source.tpl:/tmp/out'], '--template'],
    [['--token-file-mode', '0666'], 'SYNCAUTH_TOKEN_FILE_MODE'],
    [['--token-file-group', 'no-such-group-here'], '--token-file-group'],
    [['--socket-mode', '0660'], '--socket-mode'],
  ])('refuses %j naming %s, before anything is sent', async (args, field) => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const before = emu.state.requests.length;
    const dir = tempDir();
    const env = containerEnv(emu, grant, dir, { tokenFile: path.join(dir, 'token') });
    // The mode given in the environment, to see the variable named.
    const flags = args[0] === '--token-file-mode' ? [] : args;
    const result = await runCli(['daemon', ...flags], { env: args[0] === '--token-file-mode' ? { ...env, SYNCAUTH_TOKEN_FILE_MODE: args[1] } : env, cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(field);
    expect(emu.state.requests.slice(before)).toEqual([]);
  });
});
