// A real redis-server for the replica tests (DESIGN.md, "Tests and CI"): Debian's `redis-server` package, run
// on a free loopback port with no persistence, in a temporary directory. In CI a missing redis-server fails the
// tests; elsewhere they are skipped, saying why. The server can be killed and started again on the same port,
// as an outage of the coordinator looks to the replicas.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { tempDir } from './cli.js';
import { freePort } from './onboarding.js';
import { isCI } from './secret-service.js';

export const DEFAULT_REDIS_SERVER = '/usr/bin/redis-server';

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `redis-server` on PATH, else /usr/bin/redis-server, else null. */
export function findRedisServer(env: NodeJS.ProcessEnv = process.env): string | null {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'redis-server');
    if (isExecutable(candidate)) return candidate;
  }
  return isExecutable(DEFAULT_REDIS_SERVER) ? DEFAULT_REDIS_SERVER : null;
}

export interface RedisAvailability {
  executablePath: string | null;
  /** True outside CI when redis-server is missing: the caller skips its tests. */
  skip: boolean;
  /** Why there is no server, for the skip notice or the CI failure; empty when there is one. */
  reason: string;
}

const MISSING = 'redis-server not found (neither `redis-server` on PATH nor /usr/bin/redis-server); ' +
  'install the Debian package: apt-get install -y redis-server';

export function redisAvailability(env: NodeJS.ProcessEnv = process.env): RedisAvailability {
  const executablePath = findRedisServer(env);
  if (executablePath) return { executablePath, skip: false, reason: '' };
  if (isCI()) return { executablePath: null, skip: false, reason: `${MISSING} (required in CI: CI is set)` };
  return { executablePath: null, skip: true, reason: `${MISSING}; skipping the replica tests (they fail instead when CI is set)` };
}

export interface RedisServer {
  port: number;
  /** `redis://127.0.0.1:PORT` */
  url: string;
  /** Whether a server process is running now. */
  readonly running: boolean;
  /** SIGKILL: the outage a crashed or unreachable Redis causes. Resolves once the process is gone. */
  kill(): Promise<void>;
  /** Starts the server again on the same port (empty: nothing was persisted). */
  restart(): Promise<void>;
  /** Stops it for good (afterAll). */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Resolves when a PING on `port` answers PONG; rejects after `timeoutMs`. */
async function waitForPong(port: number, timeoutMs: number, exited: () => string | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const why = exited();
    if (why) throw new Error(why);
    const answered = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      let data = '';
      const done = (ok: boolean): void => {
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
    if (answered) return;
    if (Date.now() > deadline) throw new Error(`redis-server did not answer PING on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Starts redis-server on a free loopback port: no RDB snapshots, no AOF, bound to 127.0.0.1 only, its working
 * directory a temporary one. Throws the reason when there is no redis-server (call it from a `beforeAll` of a
 * `describe.skipIf(availability.skip)`, so that CI fails with that reason).
 */
export async function startRedisServer(availability: RedisAvailability = redisAvailability()): Promise<RedisServer> {
  const executable = availability.executablePath;
  if (!executable) throw new Error(availability.reason);
  const port = await freePort();
  const dir = tempDir('syncauth-redis-');
  let child: ChildProcess | undefined;
  let output = '';

  async function start(): Promise<void> {
    output = '';
    let exitReason: string | undefined;
    const proc = spawn(
      executable as string,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes', '--loglevel', 'warning'],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = proc;
    live.add(proc);
    proc.stdout?.setEncoding('utf8').on('data', (d: string) => (output += d));
    proc.stderr?.setEncoding('utf8').on('data', (d: string) => (output += d));
    proc.once('exit', (code, signal) => {
      live.delete(proc);
      exitReason = `redis-server exited (${signal ?? code}) before answering on 127.0.0.1:${port}:\n${output}`;
    });
    proc.once('error', (error) => {
      exitReason = `redis-server could not be started: ${error.message}`;
    });
    await waitForPong(port, 10_000, () => exitReason);
  }

  async function kill(): Promise<void> {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await gone;
  }

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    kill,
    async restart() {
      await kill();
      await start();
    },
    stop: kill,
  };
}
