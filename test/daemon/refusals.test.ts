// Every way `syncauth daemon` and `syncauth exec` refuse to start (exit 2) says "nothing was sent or written",
// and it is true: the config dir and the sinks are as they were (names, contents, times), and the emulator saw
// no request. Each case is what a person would type, run as the real binary.
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SinkLocks } from '../../src/publish/sink-lock.js';
import type { DaemonGrant } from '../../src/daemon/index.js';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.mjs';
import { emulator, obtainGrant } from './helpers.js';
import { containerEnv } from './process.js';

const UID = process.geteuid?.() ?? 0;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** Every entry under `root`: its kind, mode, size, times and content, so that any change shows. */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const file = path.join(dir, name);
      const info = lstatSync(file);
      const kind = info.isDirectory() ? 'dir' : info.isSocket() ? 'socket' : info.isSymbolicLink() ? 'link' : 'file';
      out[path.relative(root, file)] = `${kind} ${info.mode.toString(8)} ${info.ino} ${info.mtimeMs} ${kind === 'file' ? readFileSync(file, 'utf8') : ''}`;
      if (kind === 'dir') walk(file);
    }
  };
  walk(root);
  return out;
}

interface World {
  emu: RunningEmulator;
  grant: DaemonGrant;
  home: string;
  sinks: string;
  env: Record<string, string>;
}

async function world(): Promise<World> {
  const emu = await emulator();
  const grant = await obtainGrant(emu);
  const home = tempDir('syncauth-refusal-');
  const sinks = path.join(home, 'run');
  mkdirSync(sinks, { mode: 0o700 });
  mkdirSync(path.join(home, 'config'), { mode: 0o700 });
  writeFileSync(path.join(home, 'config', 'keep'), 'kept\n');
  // Something already published there by an earlier run, which a refusal must leave as it is.
  writeFileSync(path.join(sinks, 'token'), 'sl.earlier', { mode: 0o600 });
  writeFileSync(path.join(sinks, 'token.expires_at'), '2099-01-01T00:00:00.000Z\n', { mode: 0o600 });
  writeFileSync(path.join(home, 'env.tmpl'), 'TOKEN={{ access_token }}\n');
  const env = containerEnv(emu, grant, home, { profile: 'app', tokenFile: path.join(sinks, 'token') });
  delete env.SYNCAUTH_LISTEN;
  return { emu, grant, home, sinks, env };
}

async function expectRefused(w: World, args: string[], env: Record<string, string> = w.env, why?: RegExp): Promise<string> {
  const before = tree(w.home);
  const requests = w.emu.state.requests.length;
  const result = await runCli(args, { env, cwd: w.home, timeoutMs: 20_000 });
  expect(result.code, result.stdout + result.stderr).toBe(2);
  expect(result.stderr).toContain('nothing was sent or written.');
  if (why) expect(result.stderr).toMatch(why);
  expect(tree(w.home)).toEqual(before);
  expect(w.emu.state.requests.length).toBe(requests);
  return result.stderr;
}

function listenTcp(port: number): Promise<Server> {
  return new Promise((resolve) => {
    const server = createHttpServer().listen(port, '127.0.0.1', () => resolve(server));
    closers.push(() => new Promise((done) => server.close(() => done())));
  });
}

describe('daemon: every exit 2 leaves everything as it was', () => {
  it('a configuration file with a bad key', async () => {
    const w = await world();
    const file = path.join(w.home, 'syncauth.yaml');
    writeFileSync(file, 'version: 1\ndaemon:\n  colour: blue\n', { mode: 0o600 });
    await expectRefused(w, ['daemon', '--config', file], w.env, /daemon\.colour/);
  }, 30_000);

  it('bad settings: --concurrency, --profile, --socket-mode, a notify URL', async () => {
    const w = await world();
    await expectRefused(w, ['daemon', '--concurrency', '0'], w.env, /--concurrency/);
    await expectRefused(w, ['daemon', '--profile', '../etc'], w.env, /--profile/);
    await expectRefused(w, ['daemon', '--socket-mode', '0666', '--socket', path.join(w.sinks, 'sock')], w.env, /--socket-mode/);
    await expectRefused(w, ['daemon', '--notify-url', 'ftp://example.invalid/x'], w.env, /notify/i);
    await expectRefused(w, ['daemon', '--reauth-listen', '127.0.0.1:0'], w.env, /public URL/);
  }, 60_000);

  it('a token file whose directory does not exist, a template that cannot be read', async () => {
    const w = await world();
    await expectRefused(w, ['daemon'], { ...w.env, SYNCAUTH_TOKEN_FILE: path.join(w.home, 'missing', 'token') }, /does not exist/);
    await expectRefused(w, ['daemon', '--template', `${path.join(w.home, 'missing.tmpl')}:${path.join(w.sinks, 'env')}`], w.env, /--template/);
  }, 30_000);

  it("a profile's own sink in a directory that does not exist (the configuration file)", async () => {
    const w = await world();
    const file = path.join(w.home, 'syncauth.yaml');
    writeFileSync(file, `version: 1\nprofiles:\n  app:\n    sinks:\n      token_file: {path: "${path.join(w.home, 'missing', 'own.token')}"}\n`, { mode: 0o600 });
    await expectRefused(w, ['daemon', '--config', file], w.env, /profiles\.app\.sinks\.token_file/);
  }, 30_000);

  it('a shared directory whose private subdirectory is not the daemon\'s own', async () => {
    const w = await world();
    const open = path.join(w.home, 'open');
    mkdirSync(open);
    chmodSync(open, 0o1777);
    writeFileSync(path.join(open, `syncauth-${UID}`), 'not a directory');
    await expectRefused(w, ['daemon'], { ...w.env, SYNCAUTH_TOKEN_FILE: path.join(open, 'token') }, /syncauth-/);
  }, 30_000);

  it('--fleet without Redis, without SYNCAUTH_GRANT_KEY, or with --once; daemon.fleet from the file alike', async () => {
    const w = await world();
    const key = Buffer.alloc(32, 7).toString('base64');
    await expectRefused(w, ['daemon', '--fleet'], { ...w.env, SYNCAUTH_GRANT_KEY: key }, /--fleet: needs Redis .*--redis-url/);
    const redis = { ...w.env, SYNCAUTH_REDIS_URL: 'redis://127.0.0.1:9' };
    await expectRefused(w, ['daemon', '--fleet'], redis, /--fleet: needs SYNCAUTH_GRANT_KEY/);
    await expectRefused(w, ['daemon', '--fleet', '--once'], { ...redis, SYNCAUTH_GRANT_KEY: key }, /--fleet: cannot be used with --once/);
    const file = path.join(w.home, 'syncauth.yaml');
    writeFileSync(file, 'version: 1\ndaemon:\n  fleet: true\n', { mode: 0o600 });
    await expectRefused(w, ['daemon', '--config', file], redis, /--fleet: needs SYNCAUTH_GRANT_KEY/);
    writeFileSync(file, 'version: 1\ndaemon:\n  fleet: "yes"\n', { mode: 0o600 });
    await expectRefused(w, ['daemon', '--config', file], redis, /daemon\.fleet: must be true or false/);
  }, 60_000);

  it('nothing to do: no sink, no connector, a store that keeps nothing', async () => {
    const w = await world();
    const env = { ...w.env };
    for (const name of ['SYNCAUTH_TOKEN_FILE', 'SYNCAUTH_BASE_URL', 'SYNCAUTH_API_KEY', 'SYNCAUTH_REMOTE_URL']) delete env[name];
    await expectRefused(w, ['daemon'], env, /nothing to do/);
  }, 30_000);

  it('a sink another running process holds: refused naming it', async () => {
    const w = await world();
    const holder = new SinkLocks({ pid: 4242, startedAt: '2030-01-01T00:00:00.000Z', command: 'syncauth daemon --config /etc/syncauth/syncauth.yaml' });
    await holder.take([{ path: path.join(w.sinks, 'token'), field: 'test' }]);
    closers.push(() => holder.release());
    const stderr = await expectRefused(w, ['daemon'], w.env, /held by another running process/);
    expect(stderr).toContain('pid 4242, started 2030-01-01T00:00:00.000Z, running `syncauth daemon --config /etc/syncauth/syncauth.yaml`');
    await expectRefused(w, ['daemon', '--once'], w.env, /pid 4242/);
  }, 30_000);

  it('the health port, or the page\'s port, in use', async () => {
    const w = await world();
    const port = await freePort();
    await listenTcp(port);
    await expectRefused(w, ['daemon', '--listen', `127.0.0.1:${port}`], w.env, new RegExp(`port ${port} on 127.0.0.1 is already in use`));
    await expectRefused(w, ['daemon', '--listen', '127.0.0.1:0', '--reauth-listen', `127.0.0.1:${port}`, '--public-url', 'https://syncauth.example.com'], w.env, new RegExp(`--reauth-listen: port ${port}`));
  }, 30_000);

  it('a socket path another program listens on', async () => {
    const w = await world();
    const socket = path.join(w.sinks, 'other.sock');
    const other = createNetServer();
    await new Promise<void>((resolve) => other.listen(socket, resolve));
    closers.push(() => new Promise((done) => other.close(() => done())));
    await expectRefused(w, ['daemon', '--socket', socket], w.env, /another process is listening/);
  }, 30_000);
});

describe('exec: every exit 2 leaves everything as it was', () => {
  it('no command, bad flags, a template that cannot be read', async () => {
    const w = await world();
    await expectRefused(w, ['exec'], w.env, /a command is needed/);
    await expectRefused(w, ['exec', '--kill-timeout', 'soon', '--', 'true'], w.env, /--kill-timeout/);
    await expectRefused(w, ['exec', '--pass-env', 'HOME', '--', 'true'], w.env, /--pass-env/);
    await expectRefused(w, ['exec', '--template', `${path.join(w.home, 'missing.tmpl')}:${path.join(w.sinks, 'env')}`, '--', 'true'], w.env, /--template/);
  }, 30_000);

  it("a template's destination another running process holds: refused naming it, before any token is asked for", async () => {
    const w = await world();
    const dest = path.join(w.sinks, 'env');
    const holder = new SinkLocks({ pid: 4343, startedAt: '2030-01-01T00:00:00.000Z', command: 'syncauth daemon' });
    await holder.take([{ path: dest, field: 'test' }]);
    closers.push(() => holder.release());
    await expectRefused(w, ['exec', '--template', `${path.join(w.home, 'env.tmpl')}:${dest}`, '--', 'true'], w.env, /pid 4343/);
  }, 30_000);
});
