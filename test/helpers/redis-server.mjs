// A real redis-server process on a free loopback port: no RDB snapshots, no AOF, bound to 127.0.0.1 only, its
// working directory a temporary one. It can be killed and started again on the same port (empty: nothing was
// persisted), as an outage of the coordinator looks to the replicas. Plain JavaScript, so that the replica
// tests (through redis.ts) and the real-process soak (soak/real.mjs, run by plain node) share one copy.
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { setTimeout } from 'node:timers';
import path from 'node:path';
import { freePort } from './ports.mjs';

export const DEFAULT_REDIS_SERVER = '/usr/bin/redis-server';

const live = new Set();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `redis-server` on PATH, else /usr/bin/redis-server, else null. */
export function findRedisServer(env = process.env) {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, 'redis-server'))) return path.join(dir, 'redis-server');
  }
  return isExecutable(DEFAULT_REDIS_SERVER) ? DEFAULT_REDIS_SERVER : null;
}

/** Whether a PING on `port` answers PONG within half a second. */
export function pong(port) {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let data = '';
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      data += chunk.toString('utf8');
      if (data.includes('\r\n')) done(data.startsWith('+PONG'));
    });
  });
}

export { freePort };

/** Starts `executable` (a redis-server) and resolves once it answers; see redis-server.d.mts. */
export async function startRedisProcess(executable, { startTimeoutMs = 10_000 } = {}) {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'syncauth-redis-'));
  let child;

  const start = async () => {
    let output = '';
    let exitReason;
    const proc = spawn(
      executable,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes', '--loglevel', 'warning'],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = proc;
    live.add(proc);
    proc.stdout.setEncoding('utf8').on('data', (d) => (output += d));
    proc.stderr.setEncoding('utf8').on('data', (d) => (output += d));
    proc.once('exit', (code, signal) => {
      live.delete(proc);
      exitReason = `redis-server exited (${signal ?? code}) before answering on 127.0.0.1:${port}:\n${output}`;
    });
    proc.once('error', (error) => {
      exitReason = `redis-server could not be started: ${error.message}`;
    });
    const deadline = Date.now() + startTimeoutMs;
    for (;;) {
      if (exitReason) throw new Error(exitReason);
      if (await pong(port)) return;
      if (Date.now() > deadline) throw new Error(`redis-server did not answer PING on 127.0.0.1:${port} within ${startTimeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };

  const kill = async () => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await gone;
  };

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    kill,
    start,
    async restart() {
      await kill();
      await start();
    },
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
