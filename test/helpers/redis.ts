// A real redis-server for the replica tests (DESIGN.md, "Tests and CI"): Debian's `redis-server` package, run
// on a free loopback port with no persistence, in a temporary directory. In CI a missing redis-server fails the
// tests; elsewhere they are skipped, saying why. The server can be killed and started again on the same port,
// as an outage of the coordinator looks to the replicas.
import { isCI } from './secret-service.js';
import { findRedisServer, startRedisProcess, type RedisProcess } from './redis-server.mjs';

export { findRedisServer } from './redis-server.mjs';

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

export type RedisServer = RedisProcess;

/**
 * Starts redis-server on a free loopback port (redis-server.mjs). Throws the reason when there is none (call it
 * from a `beforeAll` of a `describe.skipIf(availability.skip)`, so that CI fails with that reason).
 */
export async function startRedisServer(availability: RedisAvailability = redisAvailability()): Promise<RedisServer> {
  if (!availability.executablePath) throw new Error(availability.reason);
  return startRedisProcess(availability.executablePath);
}
