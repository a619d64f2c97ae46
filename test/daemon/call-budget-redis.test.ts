// The budget of token calls in a real redis-server (src/daemon/redis.ts, callBudgets), against a writer of Redis
// who lacks SYNCAUTH_GRANT_KEY. A fleet replica spends a failing profile's burst; the writer then replays an
// older record of it (the count read is not raised above what it was, and the replica that holds the profile
// keeps its own count), and plants records meant to hold healthy profiles: one of their own, one with a bad MAC,
// a real spent record copied from the failing profile, and a real record with its count changed. A replica that
// starts with them renews every healthy profile at once: none is frozen, and each planted record is refused once.
import { randomBytes } from 'node:crypto';
import { Redis as RedisClient } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUDGET_BURST, BUDGET_RESERVE, type BudgetBackend } from '../../src/daemon/call-budget.js';
import { createRedisCoordinator, startDaemon, type DaemonGrant, type RedisCoordinator, type RunningDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { captureLog, emulator, failingDoor, obtainGrant, profileOf, tempDir } from './helpers.js';

const availability = redisAvailability();
if (availability.skip) console.warn(`call-budget-redis.test.ts: ${availability.reason}`);


describe.skipIf(availability.skip)('a Redis writer without the grant key, against the budgets of token calls', () => {
  let redis: RedisServer;
  let writer: RedisClient;
  const coordinators: RedisCoordinator[] = [];
  const daemons: RunningDaemon[] = [];

  beforeAll(async () => {
    redis = await startRedisServer(availability);
    writer = new RedisClient(redis.url);
  });

  afterAll(async () => {
    for (const d of daemons) await d.close();
    writer?.disconnect();
    for (const c of coordinators) await c.close();
    await redis?.kill();
  });

  it('cannot raise a count by replaying an older record, nor hold a profile with a record forged, changed or copied from another', async () => {
    const prefix = 'budget-writer';
    const grantKey = randomBytes(32);
    const log = captureLog('debug');
    const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600 });
    const door = await failingDoor(emu, Date.now);
    const names = ['failing', 'own', 'badmac', 'copied', 'changed'];
    const grants = new Map<string, DaemonGrant>();
    for (const name of names) grants.set(name, await obtainGrant(emu));
    const refreshTokenOf = (name: string): string => (grants.get(name) as DaemonGrant).refreshToken;
    door.failing.add(refreshTokenOf('failing'));
    const coordinator = async (id: string): Promise<RedisCoordinator> => {
      const c = await createRedisCoordinator({ url: redis.url, keyPrefix: prefix, replicaId: id, grantKey, logger: log.logger, leaseMs: 3_000 });
      await c.ready();
      coordinators.push(c);
      return c;
    };
    const replica = async (id: string): Promise<RunningDaemon> => {
      const daemon = await startDaemon({
        profiles: () => Promise.resolve(names.map((name) => ({ ...profileOf(emu, { name, grant: grants.get(name) as DaemonGrant }), tokenUrl: door.url }))),
        profileStore: openProfileStore(tempDir()),
        renewMarginMs: 15 * 60_000,
        schedule: false,
        checkIntervalMs: 0,
        logger: log.logger.child({ replica: id }),
        coordinator: await coordinator(id),
        grantKey,
        fleet: { timers: false, leaseMs: 3_000, fallbackMs: 60_000 },
        // Retried at every sweep, so the burst is spent in a few dozen sweeps of real time.
        backoff: { baseMs: 1, maxMs: 1 },
        maxRenewalsPerSecond: 1_000,
      });
      daemons.push(daemon);
      return daemon;
    };
    const key = (name: string): string => `${prefix}:budget:${name}`;
    const outcomesOf = (name: string): unknown[] => log.records().filter((r) => r.profile === name && r.event === 'renewal.budget_spent');
    try {
      const a = await replica('a');
      await a.sweep();
      for (const name of names.filter((n) => n !== 'failing')) expect(door.calls.get(refreshTokenOf(name))?.length ?? 0).toBe(1);
      // The failing profile's burst, call by call, until the budget holds it; an older record kept on the way.
      let older: string | undefined;
      for (let sweep = 0; sweep < 3 * BUDGET_BURST && outcomesOf('failing').length === 0; sweep += 1) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        await a.sweep();
        if ((door.calls.get(refreshTokenOf('failing'))?.length ?? 0) === 10) older = (await writer.get(key('failing'))) ?? undefined;
      }
      expect(outcomesOf('failing').length).toBeGreaterThanOrEqual(1);
      const spentCalls = door.calls.get(refreshTokenOf('failing'))?.length ?? 0;
      // Its burst less the reserve kept for when the endpoint is seen answering (no other call is made to it now).
      expect(spentCalls).toBe(BUDGET_BURST - BUDGET_RESERVE);
      const spent = (await writer.get(key('failing'))) as string;
      expect(JSON.parse(spent)).toMatchObject({ v: 1, failures: spentCalls });

      // Replayed: an older record of the failing profile. Read as a replica taking it would read it, it counts
      // what it counted then, never more than now; the replica holding the profile keeps its own count.
      const reader = (await coordinator('reader')).budgets as BudgetBackend;
      await writer.set(key('failing'), older as string);
      const replayed = await reader.read('failing');
      expect(replayed?.spent).toBeLessThanOrEqual(10);
      await a.sweep();
      expect(door.calls.get(refreshTokenOf('failing'))?.length ?? 0).toBe(spentCalls);
      expect(a.status().profiles.find((p) => p.name === 'failing')).toMatchObject({ lastRenewal: { outcome: 'budget_spent' }, backoffUntil: expect.any(String) });

      // Planted, to hold the healthy profiles on the replica that takes them next.
      const redisNow = Number((await writer.time())[0]) * 1000;
      const holding = { v: 1, spent: BUDGET_BURST, at: redisNow, failures: 99, retryAt: redisNow + 86_400_000 };
      await writer.set(key('own'), JSON.stringify(holding));
      await writer.set(key('badmac'), JSON.stringify({ ...holding, mac: 'A'.repeat(43) }));
      await writer.set(key('copied'), spent);
      const real = JSON.parse((await writer.get(key('changed'))) as string) as Record<string, unknown>;
      await writer.set(key('changed'), JSON.stringify({ ...real, spent: BUDGET_BURST, failures: 99, retryAt: redisNow + 86_400_000 }));
      for (const name of ['own', 'badmac', 'copied', 'changed']) expect(await reader.read(name)).toBeUndefined();

      // The replica stops; another starts and takes every profile: the healthy ones are renewed at once.
      await a.close();
      const b = await replica('b');
      await b.sweep();
      for (const name of ['own', 'badmac', 'copied', 'changed']) {
        expect(door.calls.get(refreshTokenOf(name))?.length ?? 0).toBe(2);
        expect(outcomesOf(name)).toEqual([]);
        expect(b.status().profiles.find((p) => p.name === name)).toMatchObject({ ready: true });
        // The record a call writes verifies again: one call counted, no streak.
        expect(await reader.read(name)).toMatchObject({ failures: 0 });
      }
      const refused = log.records().filter((r) => r.event === 'budget.record_refused');
      expect(refused.length).toBeGreaterThanOrEqual(4);
      expect(refused.length).toBeLessThanOrEqual(8);
      for (const line of log.lines) expect(line).not.toContain(grantKey.toString('base64'));
    } finally {
      await door.close();
    }
  }, 60_000);
});
