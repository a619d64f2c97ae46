// What someone who can write Redis, but has no SYNCAUTH_GRANT_KEY, can do to a fleet's membership, done with a
// plain Redis client against two replicas' real coordinators: a member they add is not counted, a dead member's
// record cannot be made live again (changed, copied under another name, or replayed), deleting a live member's
// record makes its share served twice (more token requests, never fewer) until the deleting stops, and a hash
// flooded past any fleet's size sends the replicas to their fallback, which ends in serving every profile, never
// in serving none. Leases here are short and on Redis's own clock, so the test waits real time past them.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis as RedisClient } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCoordinator, type RedisCoordinator } from '../../src/daemon/index.js';
import { Fleet } from '../../src/daemon/fleet.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { captureLog } from './helpers.js';

const availability = redisAvailability();
const LEASE = 3_000;
const PROFILES = Array.from({ length: 60 }, (_, i) => `profile-${i}`);

describe.skipIf(availability.skip)('a Redis writer without the grant key, against the fleet\'s member records', () => {
  let redis: RedisServer;
  let writer: RedisClient;
  const coordinators: RedisCoordinator[] = [];

  beforeAll(async () => {
    redis = await startRedisServer(availability);
    writer = new RedisClient(redis.url);
  });

  afterAll(async () => {
    writer?.disconnect();
    for (const c of coordinators) await c.close();
    await redis?.kill();
  });

  /** Two replicas of one fleet (prefix of their own per test), their heartbeats driven by the test. */
  async function fleetOfTwo(prefix: string, fallbackMs = 60_000) {
    const grantKey = randomBytes(32);
    const log = captureLog('info');
    const member = async (id: string): Promise<Fleet> => {
      const coordinator = await createRedisCoordinator({ url: redis.url, keyPrefix: prefix, replicaId: id, grantKey, logger: log.logger, leaseMs: LEASE });
      coordinators.push(coordinator);
      await coordinator.ready();
      return new Fleet({ backend: coordinator.fleet as NonNullable<RedisCoordinator['fleet']>, replicaId: id, leaseMs: LEASE, fallbackMs, timers: false, log: log.logger });
    };
    const a = await member('a');
    const b = await member('b');
    await a.start();
    await b.start();
    await a.tick();
    // Half a lease with Redis answering: from then on a member whose lease ended is dropped.
    await sleep(LEASE / 2 + 100);
    await a.tick();
    await b.tick();
    expect([a.members, b.members]).toEqual([['a', 'b'], ['a', 'b']]);
    const hash = `${prefix}:fleet:members`;
    return { a, b, log, hash, refused: () => log.records().filter((r) => r.event === 'fleet.record_refused').length };
  }

  it('cannot add a member: a record of their own, or a real one copied under another name, is not counted', async () => {
    const f = await fleetOfTwo('writer-add');
    const share = PROFILES.filter((p) => f.a.owns(p));
    const real = (await writer.hget(f.hash, 'b')) as string;
    await writer.hset(f.hash, 'intruder', JSON.stringify({ v: 1, until: Date.now() + 3_600_000, mac: 'A'.repeat(43) }));
    await writer.hset(f.hash, 'copy-of-b', real);
    await f.a.tick();
    await f.b.tick();
    expect([f.a.members, f.b.members]).toEqual([['a', 'b'], ['a', 'b']]);
    expect(PROFILES.filter((p) => f.a.owns(p))).toEqual(share);
    // Logged once per record, however often it is read.
    await f.a.tick();
    expect(f.refused()).toBe(4);
  });

  it('cannot keep a dead member alive: its record lengthened, or replayed after its lease ended, gives an ended lease', async () => {
    const f = await fleetOfTwo('writer-extend');
    const recorded = (await writer.hget(f.hash, 'b')) as string;
    const { until } = JSON.parse(recorded) as { until: number };
    // b stops (killed: no heartbeat, no word); the writer pushes its lease's end an hour on, keeping the MAC.
    await writer.hset(f.hash, 'b', JSON.stringify({ ...(JSON.parse(recorded) as object), until: until + 3_600_000 }));
    await sleep(LEASE + 200);
    await f.a.tick();
    expect(f.a.members).toEqual(['a']);
    expect(PROFILES.every((p) => f.a.owns(p))).toBe(true);
    // The real record, replayed: its lease ended when it ended.
    await writer.hset(f.hash, 'b', recorded);
    await f.a.tick();
    expect(f.a.members).toEqual(['a']);
    expect(PROFILES.every((p) => f.a.owns(p))).toBe(true);
  });

  it("can delete a live member's record: the others serve its share too (more renewals, never fewer) until the deleting stops", async () => {
    const f = await fleetOfTwo('writer-delete');
    const bShare = PROFILES.filter((p) => f.b.owns(p));
    expect(bShare.length).toBeGreaterThan(0);
    // b keeps its heartbeat; the writer deletes its record each time, before a looks.
    const started = Date.now();
    while (Date.now() - started < LEASE * 1.5) {
      await f.b.tick();
      await writer.hdel(f.hash, 'b');
      await f.a.tick();
      // Never fewer: every profile is served by someone all along.
      expect(PROFILES.every((p) => f.a.owns(p) || f.b.owns(p))).toBe(true);
      await sleep(LEASE / 6);
    }
    // A whole lease without seeing b: a serves everything, and b still serves its share.
    expect(f.a.members).toEqual(['a']);
    expect(PROFILES.every((p) => f.a.owns(p))).toBe(true);
    expect(bShare.every((p) => f.b.owns(p))).toBe(true);
    // The deleting stops: b's next heartbeat writes its record, and a hands its share back.
    await f.b.tick();
    await f.a.tick();
    expect(f.a.members).toEqual(['a', 'b']);
    expect(PROFILES.filter((p) => f.b.owns(p))).toEqual(bShare);
    expect(bShare.some((p) => f.a.owns(p))).toBe(false);
  });

  it('can flood the hash: the replicas fall back (what they owned, then everything), never serve nothing, and return once it is gone', async () => {
    const f = await fleetOfTwo('writer-flood', 1_000);
    const aShare = PROFILES.filter((p) => f.a.owns(p));
    const flood: string[] = [];
    for (let i = 0; i < 300; i += 1) flood.push(`flood-${i}`, 'x');
    await writer.hset(f.hash, ...flood);
    await f.a.tick();
    expect(f.a.mode).toBe('last_owned');
    expect(PROFILES.filter((p) => f.a.owns(p))).toEqual(aShare);
    expect(f.log.records().some((r) => r.event === 'fleet.down')).toBe(true);
    await sleep(1_100);
    await f.a.tick();
    expect(f.a.mode).toBe('all');
    expect(PROFILES.every((p) => f.a.owns(p))).toBe(true);
    // A renewal's confirm answers by the same rule.
    expect(await f.a.confirm(PROFILES.find((p) => !aShare.includes(p)) as string)).toBe(true);
    await writer.del(f.hash);
    await f.a.tick();
    await f.b.tick();
    await f.a.tick();
    expect(f.a.mode).toBe('shares');
    expect(f.a.members).toEqual(['a', 'b']);
    expect(PROFILES.filter((p) => f.a.owns(p))).toEqual(aShare);
  });
});
