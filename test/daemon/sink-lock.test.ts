// A sink (token file, template, socket) belongs to one running process at a time. A second `syncauth daemon`
// over the same sinks, from the same configuration file or the same flags, refuses (exit 2) before it touches
// them, naming the first; the first goes on serving them. A holder killed with -9 leaves a lock that the next
// daemon takes over, adopting the live token. A published file removed or replaced under a running daemon is put
// back at the next sweep, and /readyz is not 200 meanwhile.
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.mjs';
import { waitFor } from '../helpers/wait.js';
import { emulator, obtainGrant } from './helpers.js';
import { containerEnv, daemonsKilledAfterEach } from './process.js';
import type { RunningEmulator } from '../../src/emulator/index.js';

const start = daemonsKilledAfterEach();

function socketGet(socketPath: string, route: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: route, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** What a sink holds now: each file's content and inode, so that a rewrite of the same token is seen too. */
function snapshot(files: string[]): Record<string, string> {
  const of = (file: string): string => {
    if (!existsSync(file)) return 'absent';
    const info = statSync(file);
    return `${info.ino}:${info.mtimeMs}:${info.isSocket() ? 'socket' : readFileSync(file, 'utf8')}`;
  };
  return Object.fromEntries(files.map((file) => [file, of(file)]));
}

/** Requests the emulator has answered so far. */
function requestCount(emu: RunningEmulator): number {
  return emu.state.requests.length;
}

interface Setup {
  dir: string;
  tokenFile: string;
  rendered: string;
  socket: string;
  port: number;
  config: string;
}

async function sinks(long = false): Promise<Setup> {
  let dir = tempDir('syncauth-sinklock-');
  if (long) {
    // Deeper than a Unix socket's path may be (108 bytes), so that the lock beside a sink cannot be bound by name.
    dir = path.join(dir, 'a-directory-whose-name-is-long-enough'.repeat(2), 'and-deeper-still-to-pass-the-limit'.repeat(2));
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }
  const source = path.join(dir, 'env.tmpl');
  writeFileSync(source, 'TOKEN={{ access_token }}\n');
  const port = await freePort();
  const setup = { dir, tokenFile: path.join(dir, 'token'), rendered: path.join(dir, 'token.env'), socket: path.join(dir.length > 80 ? tempDir('s-') : dir, 'token.sock'), port, config: path.join(dir, 'syncauth.yaml') };
  writeFileSync(
    setup.config,
    [
      'version: 1',
      'sinks:',
      `  token_file: {path: "${setup.tokenFile}"}`,
      `  templates: [{source: "${source}", dest: "${setup.rendered}"}]`,
      `  socket: {path: "${setup.socket}"}`,
      'daemon:',
      `  listen: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return setup;
}

/** The container's environment without the sinks and listener, which the configuration file gives. */
function envFor(emu: RunningEmulator, grant: Awaited<ReturnType<typeof obtainGrant>>, home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env = containerEnv(emu, grant, home, { profile: 'app' });
  delete env.SYNCAUTH_LISTEN;
  return { ...env, ...extra };
}

async function expectServing(setup: Setup, emu: RunningEmulator, listen: string): Promise<void> {
  const token = readFileSync(setup.tokenFile, 'utf8');
  expect(emu.state.accessTokens.get(token)?.expiresAt).toBeGreaterThan(Date.now());
  expect(Date.parse(readFileSync(`${setup.tokenFile}.expires_at`, 'utf8').trim())).toBeGreaterThan(Date.now());
  expect(readFileSync(setup.rendered, 'utf8')).toBe(`TOKEN=${token}\n`);
  expect(await socketGet(setup.socket, '/v1/token')).toEqual({ status: 200, body: token });
  expect((await fetch(`${listen}/readyz`)).status).toBe(200);
}

describe('one process per sink', () => {
  for (const how of ['the configuration file', 'flags'] as const) {
    it(`a second daemon over the same sinks (${how}) refuses, naming the first, and leaves its sinks as they are`, async () => {
      const emu = await emulator();
      const grant = await obtainGrant(emu);
      const setup = await sinks();
      const args = how === 'flags'
        ? ['--token-file', setup.tokenFile, '--template', `${path.join(setup.dir, 'env.tmpl')}:${setup.rendered}`, '--socket', setup.socket, '--listen', `127.0.0.1:${setup.port}`]
        : ['--config', setup.config];
      const first = start(envFor(emu, grant, setup.dir), setup.dir, args);
      const { listen } = await first.started();
      await first.ready(listen);
      await expectServing(setup, emu, listen);
      const files = [setup.tokenFile, `${setup.tokenFile}.expires_at`, setup.rendered, setup.socket];
      const before = snapshot(files);
      const requests = requestCount(emu);

      const second = await runCli(['daemon', ...args], { env: envFor(emu, grant, setup.dir), cwd: setup.dir, timeoutMs: 20_000 });
      expect(second.code, second.stdout + second.stderr).toBe(2);
      expect(second.stderr).toContain(`pid ${first.child.pid}`);
      expect(second.stderr).toMatch(/syncauth daemon/);
      expect(second.stderr).toContain('nothing was sent or written');
      expect(snapshot(files)).toEqual(before);
      expect(requestCount(emu)).toBe(requests);

      // The first still serves every sink (one removed under it would be put back at its next sweep: see below).
      await expectServing(setup, emu, listen);
      expect(first.child.exitCode).toBeNull();
    }, 60_000);
  }

  it('a holder killed with -9 leaves a lock the next daemon takes over, adopting the live token', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const setup = await sinks(true);
    const first = start(envFor(emu, grant, setup.dir), setup.dir, ['--config', setup.config]);
    const { listen } = await first.started();
    await first.ready(listen);
    const token = readFileSync(setup.tokenFile, 'utf8');
    first.child.kill('SIGKILL');
    await first.exited;
    const issued = emu.state.accessTokens.size;

    const next = start(envFor(emu, grant, setup.dir), setup.dir, ['--config', setup.config]);
    const started = await next.started();
    await next.ready(started.listen);
    expect(next.out.stdout).toContain('"event":"token.adopted"');
    expect(emu.state.accessTokens.size).toBe(issued);
    expect(readFileSync(setup.tokenFile, 'utf8')).toBe(token);
    await expectServing(setup, emu, started.listen);
  }, 60_000);

  it('a published file removed or replaced under a running daemon is put back at the next sweep, and /readyz is not 200 until then', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const setup = await sinks();
    // /readyz looks at the files itself, so it is 503 between the removal and the next sweep, however soon that is.
    const daemon = start(envFor(emu, grant, setup.dir), setup.dir, ['--config', setup.config, '--sweep', '*/5 * * * * *']);
    const { listen } = await daemon.started();
    await daemon.ready(listen);
    const token = readFileSync(setup.tokenFile, 'utf8');

    rmSync(setup.tokenFile);
    // Until it is put back, /readyz is never 200 without the file: whenever it says ready, the file is there.
    await waitFor('the token file put back', async () => {
      const ready = (await fetch(`${listen}/readyz`)).status === 200;
      const there = existsSync(setup.tokenFile);
      if (ready) expect(there, '/readyz answered 200 while the token file was missing').toBe(true);
      return ready && there ? true : undefined;
    }, 25_000);
    expect(readFileSync(setup.tokenFile, 'utf8')).toBe(token);
    expect(daemon.out.stdout).toContain('"event":"publish.restored"');
    await daemon.ready(listen);

    writeFileSync(setup.rendered, 'TOKEN=something-else\n');
    await waitFor('the template put back', () => (readFileSync(setup.rendered, 'utf8') === `TOKEN=${token}\n` ? true : undefined), 25_000);
    await daemon.ready(listen);
  }, 60_000);

  it("a reload that moves a profile's own token file gives the old one's lock back", async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const dir = tempDir('syncauth-sinklock-');
    const config = path.join(dir, 'syncauth.yaml');
    const own = (file: string) => `version: 1\nprofiles:\n  app:\n    sinks:\n      token_file: {path: "${file}"}\n`;
    const [before, after] = [path.join(dir, 'before.token'), path.join(dir, 'after.token')];
    writeFileSync(config, own(before), { mode: 0o600 });
    const env = envFor(emu, grant, dir, { SYNCAUTH_LISTEN: '127.0.0.1:0' });
    const daemon = start(env, dir, ['--config', config]);
    const { listen } = await daemon.started();
    await daemon.ready(listen);
    expect(existsSync(`${before}.lock`)).toBe(true);
    writeFileSync(config, own(after), { mode: 0o600 });
    daemon.child.kill('SIGHUP');
    await waitFor('the token file at its new place', () => (existsSync(after) ? true : undefined), 20_000);
    await waitFor('the old lock given back', () => (existsSync(`${before}.lock`) ? undefined : true), 20_000);
    expect(existsSync(`${after}.lock`)).toBe(true);
  }, 60_000);
});
