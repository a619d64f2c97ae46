// Signals that reach the real `syncauth daemon` while it is still starting, before its running handlers are in
// place. The start is held open by a Redis that accepts the connection and never answers (the daemon waits its
// deadline for it, then starts without it): a SIGTERM then is a clean stop (exit 0, as docs/daemon.md promises;
// 143 for a one-shot --once, as a pass stopped later exits), within a generous bound, no lock directory or
// temporary file left, not Node's default death by the signal; a SIGHUP then does not kill it either, and it
// goes on to start and serve.
import { readdirSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { containerEnv, spawnDaemon } from './process.js';
import { emulator, obtainGrant, tempDir } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

/** A TCP server that takes connections and never says a word: a Redis that hangs. */
async function silentRedis(): Promise<{ url: string; connected: () => boolean; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let seen = 0;
  const server: Server = createServer((socket) => {
    seen++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    connected: () => seen > 0,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Every lock directory, holder record and temporary file (`<file>.<digits>`) under `dir`. */
function leftovers(dir: string): string[] {
  const found: string[] = [];
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      if (/\.lock$|\.owner$|\.\d+$|\.tmp$/.test(entry.name)) found.push(full);
      if (entry.isDirectory()) walk(full);
    }
  };
  walk(dir);
  return found;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function startingDaemon(args: string[] = []) {
  const emu = await emulator();
  const grant = await obtainGrant(emu);
  const home = tempDir('syncauth-start-signals-');
  const redis = await silentRedis();
  closers.push(redis.close);
  const env = { ...containerEnv(emu, grant, home, { profile: 'docs' }), SYNCAUTH_TOKEN_FILE: path.join(home, 'token') };
  const daemon = spawnDaemon(env, home, ['--redis-url', redis.url, ...args]);
  closers.push(async () => {
    if (daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGKILL');
  });
  // The daemon has read its settings and is waiting on Redis: in the middle of its start.
  await waitFor('the connection to Redis', () => (redis.connected() ? true : undefined), 20_000);
  expect(daemon.out.stdout).not.toContain('daemon started');
  return { daemon, home };
}

describe('signals while the daemon starts', () => {
  it('SIGTERM during the start stops it cleanly: exit 0, logged, nothing left behind', async () => {
    const { daemon, home } = await startingDaemon();
    const started = performance.now();
    daemon.child.kill('SIGTERM');
    const code = await daemon.exited;
    expect(daemon.child.signalCode, daemon.out.stderr).toBeNull();
    expect(code, daemon.out.stdout + daemon.out.stderr).toBe(0);
    expect(performance.now() - started).toBeLessThan(15_000);
    const stopping = daemon.out.stdout.split('\n').find((line) => line.includes('"event":"daemon.stopping"'));
    expect(stopping).toBeDefined();
    expect(JSON.parse(stopping as string)).toMatchObject({ signal: 'SIGTERM', during: 'start' });
    expect(daemon.out.stdout).toContain('"event":"daemon.stopped"');
    expect(daemon.out.stdout).not.toContain('daemon started');
    expect(leftovers(home)).toEqual([]);
  });

  it('SIGTERM during the start of one pass (--once): exit 143, as a stopped pass exits, nothing left behind', async () => {
    const { daemon, home } = await startingDaemon(['--once']);
    daemon.child.kill('SIGTERM');
    expect(await daemon.exited, daemon.out.stdout + daemon.out.stderr).toBe(143);
    expect(daemon.child.signalCode).toBeNull();
    expect(daemon.out.stdout).toContain('"during":"start"');
    expect(leftovers(home)).toEqual([]);
  });

  it('SIGHUP during the start does not end it: it starts, then stops on SIGTERM with exit 0', async () => {
    const { daemon } = await startingDaemon();
    daemon.child.kill('SIGHUP');
    const { listen } = await daemon.started();
    expect(listen).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // The reload asked for during the start is done once started.
    await waitFor('the reload', () => (daemon.out.stdout.includes('"event":"daemon.reloading"') ? true : undefined), 10_000);
    daemon.child.kill('SIGTERM');
    expect(await daemon.exited).toBe(0);
    expect(daemon.child.signalCode).toBeNull();
  });
});
