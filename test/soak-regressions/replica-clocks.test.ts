// Replicas whose clocks disagree, and a replica that stops: found by the year soak (soak/virtual.mjs). The
// shared record of the connector's token is kept on the coordinator's clock, so a replica whose wall clock is
// an hour ahead does not make the others believe the connector's token lives an hour longer; and a replica
// that finds the connector reconciled by another looks again before that token runs out, so a stopped replica
// does not leave the connector with an expired token. Reconciles held while Redis was away go ahead as soon as
// it is back (found by the real-process soak, soak/real.mjs).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorUnavailableError, type SharedReconcile } from '../../src/daemon/coordinator.js';
import { createRedisCoordinator, startDaemon, type DaemonGrant, type RunningDaemon } from '../../src/daemon/index.js';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { memoryCoordinator, type MemoryRedis } from '../helpers/replicas.mjs';
import { captureLog, connectorsNamed, emulator, fakeClock, obtainGrant, seededRandom, tempDir } from '../daemon/helpers.js';

const availability = redisAvailability();
if (availability.skip) console.warn(`replica-clocks.test.ts: ${availability.reason}`);

describe.skipIf(availability.skip)('Redis as the replicas\' coordinator', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer(availability);
  });
  afterAll(async () => redis?.stop());

  it('reads the same remaining life whatever the writer’s wall clock says', async () => {
    const ahead = await createRedisCoordinator({ url: redis.url, keyPrefix: 'clocks', replicaId: 'ahead', now: () => Date.now() + 3_600_000 });
    const right = await createRedisCoordinator({ url: redis.url, keyPrefix: 'clocks', replicaId: 'right' });
    try {
      await Promise.all([ahead.ready(), right.ready()]);
      const aheadNow = Date.now() + 3_600_000;
      await ahead.recordReconcile('p1', { expiresAt: aheadNow + 600_000, reconciledAt: aheadNow, replica: 'ahead' });
      const seen = (await right.lastReconcile('p1')) as SharedReconcile;
      expect(Math.abs(seen.expiresAt - (Date.now() + 600_000))).toBeLessThan(5_000);
      expect(Math.abs(seen.reconciledAt - Date.now())).toBeLessThan(5_000);
      // And back: the replica that is ahead reads it on its own clock.
      const own = (await ahead.lastReconcile('p1')) as SharedReconcile;
      expect(Math.abs(own.expiresAt - (Date.now() + 3_600_000 + 600_000))).toBeLessThan(5_000);
      // A later record from the replica with the right clock is not refused as older.
      await right.recordReconcile('p1', { expiresAt: Date.now() + 900_000, reconciledAt: Date.now(), replica: 'right' });
      expect(((await right.lastReconcile('p1')) as SharedReconcile).replica).toBe('right');
    } finally {
      await ahead.close();
      await right.close();
    }
  });

  // Seen in the real-process soak (seed 1): Redis restarted just after a renewal, the reconcile waited for it,
  // and the connector was given the new token only at the next sweep, after its old one had expired. With the
  // default schedule that wait is up to a minute.
  it('reconciles held while Redis was down go ahead as soon as it is back, not at the next sweep', async () => {
    const clock = fakeClock();
    const emu = await emulator({ tokenLifetimeSeconds: 600, now: clock.now });
    const grant: DaemonGrant = await obtainGrant(emu);
    const coordinator = await createRedisCoordinator({ url: redis.url, keyPrefix: 'back', replicaId: 'only', now: clock.now });
    const log = captureLog();
    const daemon = await startDaemon({
      profiles: [{ name: 'p1', tokenUrl: emu.tokenUrl, grant, reconcile: { baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, connectorName: 'conn-p1', remoteUrl: 'dropbox://data', recursive: false } }],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      // Once a year: in this test no sweep comes from the schedule.
      schedule: '0 0 1 1 *',
      sweepOnStart: false,
      logger: log.logger,
      now: clock.now,
      random: seededRandom(3),
      coordinator,
      backoff: { baseMs: 50 },
      serviceRetry: { retries: 0 },
    });
    const held = (): string | undefined => connectorsNamed(emu, 'conn-p1')[0]?.config.token as string | undefined;
    try {
      await coordinator.ready();
      await daemon.sweep();
      const first = held();
      expect(first).toBeTruthy();

      await redis.kill();
      clock.advance(570_000);
      await daemon.sweep();
      const renewed = daemon.status().profiles[0]?.expiresAt;
      expect(renewed).toBeDefined();
      expect(held()).toBe(first);
      expect(log.records().some((r) => r.event === 'coordinator.down')).toBe(true);

      await redis.start();
      const deadline = Date.now() + 15_000;
      while (held() === first && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(held(), 'the connector still holds the token from before the outage').not.toBe(first);
      expect(emu.state.accessTokens.get(held() as string)?.expiresAt).toBeGreaterThan(clock.now() + 500_000);
    } finally {
      await daemon.close();
      await coordinator.close();
    }
  });
});

describe('replicas sharing one connector', () => {
  const LIFETIME_S = 600;
  const MARGIN_MS = 60_000;

  async function twoReplicas(offsets: { a: number; b: number }) {
    const clock = fakeClock();
    const emu = await emulator({ tokenLifetimeSeconds: LIFETIME_S, now: clock.now });
    const grant: DaemonGrant = await obtainGrant(emu);
    const shared: MemoryRedis = { now: clock.now, records: new Map(), leases: new Map() };
    const daemons: Record<'a' | 'b', RunningDaemon> = {} as Record<'a' | 'b', RunningDaemon>;
    for (const id of ['a', 'b'] as const) {
      const now = (): number => clock.now() + offsets[id];
      daemons[id] = await startDaemon({
        profiles: [{ name: 'p1', tokenUrl: emu.tokenUrl, grant, reconcile: { baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, connectorName: 'conn-p1', remoteUrl: 'dropbox://data', recursive: false } }],
        profileStore: openProfileStore(tempDir()),
        renewMarginMs: MARGIN_MS,
        schedule: false,
        logger: captureLog().logger,
        now,
        monotonicNow: clock.now,
        random: seededRandom(id === 'a' ? 1 : 2),
        coordinator: memoryCoordinator(shared, id, CoordinatorUnavailableError, now),
        serviceRetry: { retries: 0 },
      });
    }
    const connectorExpiry = (): number => {
      const [connector] = connectorsNamed(emu, 'conn-p1');
      const token = connector?.config.token as string | undefined;
      return (token && emu.state.accessTokens.get(token)?.expiresAt) || 0;
    };
    return { clock, emu, daemons, connectorExpiry, close: () => Promise.all([daemons.a.close(), daemons.b.close()]) };
  }

  it('a replica takes over the connector when the one that reconciled stops', async () => {
    const w = await twoReplicas({ a: 0, b: 0 });
    try {
      await w.daemons.a.sweep();
      w.clock.advance(120_000);
      await w.daemons.b.sweep();
      // From here replica a is stopped (SIGSTOP, a dead pod); b alone runs for three lifetimes.
      for (let step = 0; step < 3 * LIFETIME_S / 10; step++) {
        w.clock.advance(10_000);
        await w.daemons.b.sweep();
        expect(w.connectorExpiry(), `the connector's token expired at step ${step}`).toBeGreaterThan(w.clock.now());
      }
      expect(connectorsNamed(w.emu, 'conn-p1')).toHaveLength(1);
    } finally {
      await w.close();
    }
  });

  it('a replica whose wall clock is ahead does not leave the connector with an expired token', async () => {
    const w = await twoReplicas({ a: 0, b: 4 * 60_000 });
    try {
      let reconciles = 0;
      for (let step = 0; step < 6 * LIFETIME_S / 10; step++) {
        for (const id of ['b', 'a'] as const) {
          const report = await w.daemons[id].sweep();
          if (report.profiles.some((p) => p.reconcile === 'updated' || p.reconcile === 'created')) reconciles++;
        }
        if (step > 0) expect(w.connectorExpiry(), `the connector's token expired at step ${step}`).toBeGreaterThan(w.clock.now());
        w.clock.advance(10_000);
      }
      expect(connectorsNamed(w.emu, 'conn-p1')).toHaveLength(1);
      // Still about one reconcile per lifetime between the two, not one per replica per lifetime twice over.
      expect(reconciles).toBeLessThanOrEqual(6 * 2);
    } finally {
      await w.close();
    }
  });
});
