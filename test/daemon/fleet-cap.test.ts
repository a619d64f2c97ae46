// The fleet's cap on token requests while Redis is away. Three replicas share a cap of 3 a second (1 each); Redis
// goes away past the fallback bound, and each replica serves every profile (mode `all`), renewing at once the
// profiles it did not hold: each keeps the part it last had, so the fleet as a whole still sends at most 3 a
// second. A replica started during the outage has never seen the members: it takes the whole cap, as it may be
// the only one, and its part once it sees them.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startDaemon, type DaemonGrant, type RunningDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import type { MemoryRedis } from '../helpers/replicas.mjs';
import { captureLog, emulator, fleetReplicaOptions, obtainGrant, profileOf, tempDir, virtualClocks } from './helpers.js';

const MINUTE = 60_000;
const FALLBACK = 20 * MINUTE;
const CAP = 3;

describe("the fleet's cap while Redis is away", () => {
  it('each replica in mode `all` keeps the part it last had; one started during the outage takes the whole cap until it sees the members', async () => {
    const clocks = virtualClocks();
    const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600, now: clocks.now });
    const redis: MemoryRedis = { now: clocks.now, leases: new Map(), records: new Map() };
    const grantKey = randomBytes(32);
    const names = Array.from({ length: 30 }, (_, i) => `c${String(i).padStart(2, '0')}`);
    const grants = new Map<string, DaemonGrant>();
    for (const name of names) grants.set(name, await obtainGrant(emu));
    const log = captureLog('info');
    const daemons = new Map<string, RunningDaemon>();
    const start = async (id: string): Promise<RunningDaemon> => {
      const daemon = await startDaemon({
        profiles: () => Promise.resolve(names.map((name) => profileOf(emu, { name, grant: grants.get(name) as DaemonGrant }))),
        profileStore: openProfileStore(tempDir()),
        ...fleetReplicaOptions(id, { clocks, redis, grantKey, log, leaseMs: 3 * MINUTE, fallbackMs: FALLBACK }),
        spreadRenewals: false,
        maxRenewalsPerSecond: CAP,
        // One renewal at a time, so the cap's wait moves the shared clock as real waits would: request by request.
        concurrency: 1,
      });
      daemons.set(id, daemon);
      return daemon;
    };
    /** One sweep of one replica: the token requests it sent, and the shortest gap between two of them. */
    const sweep = async (daemon: RunningDaemon): Promise<{ sent: number; gapMs: number }> => {
      const first = emu.state.requests.length;
      await daemon.sweep();
      const ats = emu.state.requests.slice(first).filter((r) => r.route === 'token').map((r) => r.at);
      const gaps = ats.slice(1).map((at, i) => at - (ats[i] as number));
      return { sent: ats.length, gapMs: Math.min(...gaps) };
    };
    const advance = async (ms: number): Promise<void> => {
      for (let left = ms; left > 0; left -= MINUTE) {
        clocks.advance(MINUTE);
        for (const daemon of daemons.values()) await daemon.sweep();
      }
    };
    try {
      const replicas = [await start('a'), await start('b'), await start('c')];
      for (const daemon of replicas) await daemon.sweep();
      for (const daemon of replicas) await daemon.sweep();
      for (const daemon of replicas) expect(daemon.status().fleet).toMatchObject({ members: 3, mode: 'shares' });

      // Redis away past the bound: at the sweep that finds it so, each replica starts the profiles it did not hold
      // and renews them, at its part of the cap (1 a second), not the whole of it.
      redis.down = true;
      await advance(FALLBACK);
      clocks.advance(MINUTE);
      let total = 0;
      for (const daemon of replicas) {
        const { sent, gapMs } = await sweep(daemon);
        expect(daemon.status().fleet).toMatchObject({ mode: 'all', members: 3 });
        expect(sent).toBeGreaterThan(10);
        total += sent;
        // Its part of the cap: the cap over the three members it last saw.
        expect(gapMs).toBeGreaterThanOrEqual((1000 * 3) / CAP - 1);
      }
      // Every replica renewed what it did not hold: twenty each, the fleet's sixty at a third of the cap each.
      expect(total).toBe(60);

      // A replica started while Redis is away has never seen the members: it serves everything at once, and
      // takes the whole cap (it may be the fleet's only replica).
      const d = await start('d');
      const alone = await sweep(d);
      expect(d.status().fleet).toMatchObject({ members: 1 });
      expect(alone.sent).toBe(30);
      expect(alone.gapMs).toBeGreaterThanOrEqual(1000 / CAP - 1);
      expect(alone.gapMs).toBeLessThan((1000 * 2) / CAP);

      // Redis back: each sees the four members and takes a quarter.
      redis.down = false;
      await advance(5 * MINUTE);
      for (const daemon of daemons.values()) expect(daemon.status().fleet).toMatchObject({ members: 4, mode: 'shares' });
    } finally {
      for (const daemon of daemons.values()) await daemon.close();
    }
  }, 60_000);
});
