// The fleet's membership in a real redis-server (src/daemon/redis.ts, fleetMembers), against a writer of Redis
// who lacks SYNCAUTH_GRANT_KEY: a forged member, a member copied under another name, a record replayed after its
// lease ended, a hash flooded past any fleet's size. None of them becomes a member; the flood makes the replica
// treat Redis as unusable (it falls back: fleet.ts), never read without end. A clean stop is said, signed.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCoordinator, type RedisCoordinator } from '../../src/daemon/index.js';
import type { FleetBackend } from '../../src/daemon/fleet.js';
import type { PauseBackend } from '../../src/daemon/account-pause.js';
import { isCoordinatorUnavailable } from '../../src/daemon/coordinator.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { captureLog } from './helpers.js';

const availability = redisAvailability();
if (availability.skip) console.warn(`fleet-redis.test.ts: ${availability.reason}`);

describe.skipIf(availability.skip)('fleet members in a real redis-server', () => {
  let redis: RedisServer;
  let writer: Redis;
  const key = randomBytes(32);
  const coordinators: RedisCoordinator[] = [];
  const log = captureLog('info');
  let prefix = 0;

  const members = async (): Promise<{ a: FleetBackend; b: FleetBackend; hash: string }> => {
    prefix += 1;
    const keyPrefix = `fleet-${prefix}`;
    const open = async (id: string) => {
      const c = await createRedisCoordinator({ url: redis.url, keyPrefix, replicaId: id, grantKey: key, logger: log.logger });
      await c.ready();
      coordinators.push(c);
      return c.fleet as FleetBackend;
    };
    return { a: await open('a'), b: await open('b'), hash: `${keyPrefix}:fleet:members` };
  };

  beforeAll(async () => {
    redis = await startRedisServer(availability);
    writer = new Redis(redis.url, { lazyConnect: true });
    await writer.connect();
  });

  afterAll(async () => {
    for (const c of coordinators) await c.close();
    writer?.disconnect();
    await redis?.kill();
  });

  it('counts only members whose signed lease runs past Redis\'s time', async () => {
    const { a, b, hash } = await members();
    const at = await a.heartbeat('a', 30_000);
    await b.heartbeat('b', 30_000);
    const view = await a.members();
    expect(view.live.sort()).toEqual(['a', 'b']);
    expect(Math.abs(view.now - at)).toBeLessThan(60_000);
    // A lease of 1 ms has ended by the next read.
    await b.heartbeat('b', 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await a.members()).toMatchObject({ live: ['a'], ended: ['b'] });
    expect(await writer.hlen(hash)).toBe(2);
  });

  it('refuses a forged member, a member copied under another name, and a record replayed after its lease ended', async () => {
    const { a, b, hash } = await members();
    await a.heartbeat('a', 30_000);
    await b.heartbeat('b', 1);
    const replay = (await writer.hget(hash, 'b')) as string;
    await b.heartbeat('b', 30_000);
    const current = (await writer.hget(hash, 'a')) as string;
    const until = Date.now() + 3_600_000;
    await writer.hset(hash, 'forged', JSON.stringify({ v: 1, until }));
    await writer.hset(hash, 'badmac', JSON.stringify({ v: 1, until, mac: 'AAAA' }));
    await writer.hset(hash, 'copy-of-a', current);
    await writer.hset(hash, 'garbage', '{not json');
    const view = await a.members();
    expect(view.live.sort()).toEqual(['a', 'b']);
    // b's record of a finished lease, put back: b is not live by it.
    await writer.hset(hash, 'b', replay);
    expect((await a.members()).live).toEqual(['a']);
    const refused = log.records().filter((r) => r.event === 'fleet.record_refused');
    expect(refused.length).toBeGreaterThanOrEqual(4);
    // Each refused record is logged once, not at every read.
    const before = refused.length;
    await a.members();
    expect(log.records().filter((r) => r.event === 'fleet.record_refused')).toHaveLength(before);
    for (const line of log.lines) expect(line).not.toContain(key.toString('base64'));
  });

  it('a hash flooded past any fleet\'s size is not read: the replica is told Redis is unusable', async () => {
    const { a, hash } = await members();
    await a.heartbeat('a', 30_000);
    const flood: string[] = [];
    for (let i = 0; i < 300; i++) flood.push(`x${i}`, 'y');
    await writer.hset(hash, ...flood);
    const failed = await a.members().catch((error: unknown) => error);
    expect(isCoordinatorUnavailable(failed)).toBe(true);
    expect(String((failed as Error).message)).toMatch(/more than a fleet has/);
  });

  it('a clean stop says so, signed: the others drop the member at once, and a forged "left" is refused', async () => {
    const { a, b, hash } = await members();
    await a.heartbeat('a', 30_000);
    await b.heartbeat('b', 30_000);
    await writer.hset(hash, 'a', JSON.stringify({ v: 1, until: 0, left: true, mac: 'AAAA' }));
    expect((await b.members()).live).toEqual(['b']);
    expect((await b.members()).left ?? []).toEqual([]);
    await a.heartbeat('a', 30_000);
    await a.leave('a');
    expect(await b.members()).toMatchObject({ live: ['b'], left: ['a'] });
  });

  it("an account's pause: one replica's is read by another; a forged or lengthened one pauses nothing; it ends with its time", async () => {
    prefix += 1;
    const keyPrefix = `pause-${prefix}`;
    const open = async (id: string) => {
      const c = await createRedisCoordinator({ url: redis.url, keyPrefix, replicaId: id, grantKey: key, logger: log.logger });
      await c.ready();
      coordinators.push(c);
      return c.pauses as PauseBackend;
    };
    const [a, b] = [await open('a'), await open('b')];
    const until = Date.now() + 60_000;
    await a.writePause('dbid:one', until);
    expect(Math.abs((await b.readPause('dbid:one')) as number - until)).toBeLessThan(1_000);
    // An earlier end never shortens it.
    await b.writePause('dbid:one', Date.now() + 10_000);
    expect(Math.abs((await a.readPause('dbid:one')) as number - until)).toBeLessThan(1_000);
    // A writer without the key: a forged pause, and a real one moved to another account or lengthened.
    const at = (account: string) => `${keyPrefix}:pause:${account}`;
    const real = (await writer.get(at('dbid:one'))) as string;
    await writer.set(at('dbid:two'), real);
    await writer.set(at('dbid:three'), JSON.stringify({ v: 1, until: Date.now() + 3_600_000, mac: 'AAAA' }));
    const lengthened = JSON.parse(real) as Record<string, unknown>;
    await writer.set(at('dbid:four'), JSON.stringify({ ...lengthened, until: (lengthened.until as number) + 3_600_000 }));
    for (const account of ['dbid:two', 'dbid:three', 'dbid:four']) expect(await b.readPause(account)).toBeUndefined();
    expect(log.records().filter((r) => r.event === 'pause.record_refused').length).toBeGreaterThanOrEqual(3);
    // It lives no longer than the pause.
    await a.writePause('dbid:short', Date.now() + 300);
    expect(await writer.pttl(at('dbid:short'))).toBeLessThanOrEqual(1_300);
  });
});
