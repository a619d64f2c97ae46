// Fleet mode in one process: three daemons over one Redis stand-in (test/helpers/replicas.mjs, the same
// membership the Redis coordinator keeps) and the emulator, on one hand-moved clock, with four-hour tokens and
// thirty profiles that no replica publishes. Each profile is renewed by one replica; a replica that stops
// answering has its profiles taken within one sweep after its lease ends; while Redis is away each replica
// renews what it owned, and after the bound every profile; once Redis is back each profile is renewed once again.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { Fleet, ownerOf } from '../../src/daemon/fleet.js';
import { startDaemon, type DaemonGrant, type DaemonProfile, type RunningDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { memoryFleet, type MemoryRedis } from '../helpers/replicas.mjs';
import type { RunningEmulator } from '../../src/emulator/index.js';
import type { ProfileSinks } from '../../src/publish/token-file.js';
import { captureLog, emulator, fleetReplicaOptions, obtainGrant, profileOf, renewalsOf, rotatingTokenEndpoint, tempDir, tokensOf, connectorsNamed, virtualClocks } from './helpers.js';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const LEASE = 30_000;
/** The daemons' lease, with their heartbeat left to the sweeps (one a minute here, as the default schedule). */
const DAEMON_LEASE = 3 * MINUTE;
/** How long Redis may be away before a daemon serves every profile (the default is 5 min with the 15 min margin). */
const FALLBACK = 20 * MINUTE;

describe('rendezvous ownership', () => {
  const names = Array.from({ length: 1_000 }, (_, i) => `profile-${i}`);

  it('spreads a thousand profiles evenly over three members, and one leaving moves only its own', () => {
    const members = ['replica-a', 'replica-b', 'replica-c'];
    const count = new Map<string, number>();
    for (const name of names) count.set(ownerOf(name, members) as string, (count.get(ownerOf(name, members) as string) ?? 0) + 1);
    for (const member of members) expect(count.get(member)).toBeGreaterThan(290);
    for (const member of members) expect(count.get(member)).toBeLessThan(380);
    for (const name of names) {
      const before = ownerOf(name, members);
      const after = ownerOf(name, ['replica-a', 'replica-b']);
      if (before !== 'replica-c') expect(after).toBe(before);
    }
  });

  it('gives the same owner whatever the order the members are read in', () => {
    for (const name of names.slice(0, 50)) expect(ownerOf(name, ['x', 'y', 'z'])).toBe(ownerOf(name, ['z', 'x', 'y']));
  });
});

describe('a member of the fleet', () => {
  const world = () => {
    let t = 1_000_000;
    let mono = 0;
    const redis: MemoryRedis = { now: () => t, leases: new Map(), records: new Map() };
    const fleet = (id: string, fallbackMs = 5 * MINUTE) => new Fleet({ backend: memoryFleet(redis, CoordinatorUnavailableError), replicaId: id, leaseMs: LEASE, fallbackMs, mono: () => mono, timers: false });
    return { redis, fleet, advance: (ms: number) => ((t += ms), (mono += ms)) };
  };

  it('renews nothing once its lease has run out on the backend\'s clock (a process stopped and resumed), until it has joined again', async () => {
    const w = world();
    const a = w.fleet('a');
    const b = w.fleet('b');
    await a.start();
    await b.start();
    await a.tick();
    const mine = Array.from({ length: 40 }, (_, i) => `p${i}`).find((name) => a.owns(name)) as string;
    expect(await a.confirm(mine)).toBe(true);
    // a is stopped past its lease; b keeps its heartbeat and takes over.
    w.advance(LEASE + 1);
    await b.tick();
    expect(b.members).toEqual(['b']);
    expect(b.owns(mine)).toBe(true);
    // a resumes in the middle of a renewal: refused on the backend's clock, whatever it last computed.
    expect(a.owns(mine)).toBe(true);
    expect(await a.confirm(mine)).toBe(false);
    // It joins again (the confirm started the heartbeat), and owns its share once b has seen it too.
    await a.tick();
    await b.tick();
    expect(a.members).toEqual(['a', 'b']);
    expect(await a.confirm(mine)).toBe(true);
    expect(b.owns(mine)).toBe(false);
  });

  it('with Redis away keeps what it owned, after the bound serves everything, and returns to its share', async () => {
    const w = world();
    const a = w.fleet('a', 2 * MINUTE);
    const b = w.fleet('b', 2 * MINUTE);
    await a.start();
    await b.start();
    await a.tick();
    const names = Array.from({ length: 60 }, (_, i) => `p${i}`);
    const share = names.filter((name) => a.owns(name));
    expect(share.length).toBeGreaterThan(10);
    expect(share.length).toBeLessThan(50);
    w.redis.down = true;
    await a.tick();
    expect(a.mode).toBe('last_owned');
    expect(names.filter((name) => a.owns(name))).toEqual(share);
    // A renewal's confirm answers by the same rule while Redis is away.
    expect(await a.confirm(share[0] as string)).toBe(true);
    w.advance(2 * MINUTE);
    await a.tick();
    expect(a.mode).toBe('all');
    expect(names.every((name) => a.owns(name))).toBe(true);
    w.redis.down = false;
    await a.tick();
    await b.tick();
    expect(a.mode).toBe('shares');
    expect(names.filter((name) => a.owns(name))).toEqual(share);
  });
});

interface Replica {
  id: string;
  daemon: RunningDaemon;
  running: boolean;
}

async function fleetWorld(
  count: number,
  options: { tokenUrl?: (emu: RunningEmulator) => Promise<string>; sinks?: (name: string) => ProfileSinks | undefined; account?: string; concurrency?: number; rate?: number; spread?: boolean; reconcile?: boolean } = {},
) {
  const clocks = virtualClocks();
  const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600, now: clocks.now });
  const tokenUrl = options.tokenUrl ? await options.tokenUrl(emu) : emu.tokenUrl;
  const redis: MemoryRedis = { now: clocks.now, leases: new Map(), records: new Map() };
  const grantKey = randomBytes(32);
  const names = Array.from({ length: count }, (_, i) => `f${String(i).padStart(2, '0')}`);
  const grants = new Map<string, DaemonGrant>();
  for (const name of names) grants.set(name, await obtainGrant(emu));
  const profiles = (): Promise<DaemonProfile[]> =>
    Promise.resolve(names.map((name) => ({ ...profileOf(emu, { name, grant: grants.get(name) as DaemonGrant, ...(options.reconcile ? { reconcile: true } : {}) }), tokenUrl })));
  const profileSinks = new Map(names.flatMap((name) => {
    const own = options.sinks?.(name);
    return own ? [[name, own] as const] : [];
  }));
  const log = captureLog('info');
  const replicas: Replica[] = [];
  const start = async (id: string): Promise<Replica> => {
    const profileStore = openProfileStore(tempDir());
    // The account the profiles' state records (as setup records it).
    if (options.account) for (const name of names) await profileStore.update(name, () => ({ accountId: options.account }));
    const daemon = await startDaemon({
      profiles,
      profileStore,
      // The fleet's cap on token requests waits on the virtual clocks (both of their readings move), not in real time.
      ...fleetReplicaOptions(id, { clocks, log, redis, grantKey, leaseMs: DAEMON_LEASE, fallbackMs: FALLBACK }),
      ...(profileSinks.size > 0 ? { profileSinks } : {}),
      ...(options.concurrency ? { concurrency: options.concurrency } : {}),
      ...(options.rate ? { maxRenewalsPerSecond: options.rate } : {}),
      // Counted renewal by renewal here; the spreading has a test of its own.
      spreadRenewals: options.spread ?? false,
    });
    const replica = { id, daemon, running: true };
    replicas.push(replica);
    return replica;
  };
  const sweepAll = async (): Promise<void> => {
    for (const r of replicas) if (r.running) await r.daemon.sweep();
  };
  /** Moves the clock a minute at a time, every running replica sweeping at each minute (its heartbeat with it). */
  const advance = async (ms: number): Promise<void> => {
    for (let left = ms; left > 0; left -= MINUTE) {
      const step = Math.min(MINUTE, left);
      clocks.advance(step);
      await sweepAll();
    }
  };
  const renewals = (): Map<string, number> => new Map(names.map((name) => [name, renewalsOf(emu, (grants.get(name) as DaemonGrant).refreshToken)]));
  const served = (r: Replica): string[] => r.daemon.status().profiles.map((p) => p.name);
  const close = async (): Promise<void> => {
    for (const r of replicas) await r.daemon.close();
  };
  return { emu, redis, names, grants, replicas, start, advance, sweepAll, renewals, served, close, log, now: clocks.now };
}

describe('three daemons in fleet mode', () => {
  it('renew each profile once, take a silent replica\'s profiles within a sweep of its lease ending, and fall back while Redis is away', async () => {
    const w = await fleetWorld(30);
    try {
      const [a, b, c] = [await w.start('a'), await w.start('b'), await w.start('c')] as [Replica, Replica, Replica];
      await w.sweepAll();
      await w.sweepAll();
      // Each profile renewed once across the fleet (each replica's first look at a profile it owns renews it).
      expect([...w.renewals().values()]).toEqual(w.names.map(() => 1));
      const shares = [a, b, c].map((r) => w.served(r));
      expect(shares.flat().sort()).toEqual(w.names);
      for (const share of shares) expect(share.length).toBeGreaterThan(2);
      for (const r of [a, b, c]) expect(r.daemon.status()).toMatchObject({ ready: true, fleet: { members: 3, mode: 'shares', shared: 30 } });

      // A whole lifetime later, still one renewal per profile per lifetime.
      await w.advance(4 * HOUR - 14 * MINUTE);
      expect([...w.renewals().values()]).toEqual(w.names.map(() => 2));

      // c stops answering (killed, or stopped): nothing moves until its lease ends, then the next sweep takes it all.
      c.running = false;
      const cShare = w.served(c);
      await w.advance(DAEMON_LEASE - MINUTE);
      expect([...w.renewals().values()]).toEqual(w.names.map(() => 2));
      await w.advance(2 * MINUTE);
      const after = w.renewals();
      for (const name of w.names) expect(after.get(name)).toBe(cShare.includes(name) ? 3 : 2);
      expect([...w.served(a), ...w.served(b)].sort()).toEqual(w.names);

      // Redis away past the due time: a and b each renew what they owned; after the bound, a renews every
      // profile it does not hold, b too; once back, one renewal per profile per lifetime again.
      await w.advance(4 * HOUR - 30 * MINUTE);
      w.redis.down = true;
      await w.advance(16 * MINUTE);
      const owned = w.renewals();
      for (const name of w.names) expect(owned.get(name)).toBe((after.get(name) as number) + 1);
      await w.advance(FALLBACK - 16 * MINUTE + MINUTE);
      for (const r of [a, b]) expect(r.daemon.status().fleet?.mode).toBe('all');
      for (const r of [a, b]) expect(w.served(r).sort()).toEqual(w.names);
      const fallback = w.renewals();
      for (const name of w.names) expect(fallback.get(name)).toBe((owned.get(name) as number) + 1);
      w.redis.down = false;
      await w.advance(2 * MINUTE);
      expect([...w.served(a), ...w.served(b)].sort()).toEqual(w.names);
      await w.advance(4 * HOUR);
      const back = w.renewals();
      for (const name of w.names) expect(back.get(name)).toBe((fallback.get(name) as number) + 1);
    } finally {
      await w.close();
    }
  }, 60_000);
});

describe('what passes from one owner to the next', () => {
  it('a rotated refresh token: the replica that takes the profile renews with the token the last owner was given', async () => {
    let proxy: Awaited<ReturnType<typeof rotatingTokenEndpoint>> | undefined;
    const w = await fleetWorld(8, {
      tokenUrl: async (emu) => {
        proxy = await rotatingTokenEndpoint(emu);
        return proxy.url;
      },
    });
    const rotation = proxy as NonNullable<typeof proxy>;
    try {
      const [a, b] = [await w.start('a'), await w.start('b')] as [Replica, Replica];
      await w.sweepAll();
      await w.sweepAll();
      const aShare = w.served(a);
      expect(aShare.length).toBeGreaterThan(0);
      expect(rotation.issued).toHaveLength(8);
      // Which rotated token each of a's profiles was given, by the original it was sent.
      const original = new Map(w.names.map((name) => [(w.grants.get(name) as DaemonGrant).refreshToken, name]));
      const rotatedFor = new Map(rotation.sent.map((sent, i) => [original.get(sent) as string, rotation.issued[i] as string]));
      a.running = false;
      await w.advance(DAEMON_LEASE + MINUTE);
      expect(w.served(b).sort()).toEqual(w.names);
      const sentSince = rotation.sent.slice(8);
      expect(sentSince).toHaveLength(aShare.length);
      for (const name of aShare) expect(sentSince).toContain(rotatedFor.get(name));
      for (const name of aShare) expect(sentSince).not.toContain((w.grants.get(name) as DaemonGrant).refreshToken);
      for (const line of w.log.lines) for (const token of rotation.issued) expect(line).not.toContain(token);
    } finally {
      await w.close();
      await rotation.close();
    }
  }, 60_000);

  it("a re-authorization completed on a replica that does not own the profile reaches the owner, which leaves re-authorization", async () => {
    const w = await fleetWorld(6);
    try {
      const [a, b] = [await w.start('a'), await w.start('b')] as [Replica, Replica];
      await w.sweepAll();
      await w.sweepAll();
      const name = w.served(a)[0] as string;
      expect(w.served(b)).not.toContain(name);
      w.emu.revokeGrant((w.grants.get(name) as DaemonGrant).refreshToken);
      await w.advance(4 * HOUR);
      const parked = a.daemon.status().profiles.find((p) => p.name === name);
      expect(parked?.ready).toBe(false);
      expect(parked?.reason).toMatch(/re-?authori[sz]/i);
      const fresh = await obtainGrant(w.emu);
      // b renews with it and runs the page's checks, so the person sees the loop closed, then shares it.
      const result = await b.daemon.reauthorized(name, { ...fresh, accountId: '' });
      expect(result).toMatchObject({ stored: true });
      expect(result.error).toBeUndefined();
      expect(renewalsOf(w.emu, fresh.refreshToken)).toBe(1);
      // b served it only for the while: it still serves its own share alone.
      expect(w.served(b)).not.toContain(name);
      await w.advance(2 * MINUTE);
      expect(a.daemon.status().profiles.find((p) => p.name === name)?.ready).toBe(true);
      expect(renewalsOf(w.emu, fresh.refreshToken)).toBeGreaterThanOrEqual(2);
      expect(await b.daemon.reauthorized('no-such-profile', { ...fresh, accountId: '' })).toMatchObject({ stored: false, error: expect.stringContaining('does not serve') });
    } finally {
      await w.close();
    }
  }, 60_000);

  it('a profile with a token file of its own here is renewed by every replica, the others by one', async () => {
    const dir = tempDir();
    const w = await fleetWorld(6, { sinks: (name) => (name === 'f00' ? { tokenFile: `${dir}/f00.token` } : undefined) });
    try {
      const replicas = [await w.start('a'), await w.start('b')];
      await w.sweepAll();
      await w.sweepAll();
      for (const r of replicas) expect(w.served(r)).toContain('f00');
      for (const r of replicas) expect(r.daemon.status().fleet).toMatchObject({ shared: 5 });
      const renewals = w.renewals();
      expect(renewals.get('f00')).toBe(2);
      for (const name of w.names.filter((n) => n !== 'f00')) expect(renewals.get(name)).toBe(1);
    } finally {
      await w.close();
    }
  }, 60_000);

  it('a reload (SIGHUP) that adds and removes profiles: each added one is served by one replica, a removed one by none', async () => {
    const w = await fleetWorld(6);
    try {
      const replicas = [await w.start('a'), await w.start('b'), await w.start('c')];
      await w.sweepAll();
      const removed = w.names.shift() as string;
      for (const name of ['g1', 'g2', 'g3', 'g4']) {
        w.grants.set(name, await obtainGrant(w.emu));
        w.names.push(name);
      }
      for (const r of replicas) await r.daemon.reload();
      await w.sweepAll();
      const served = replicas.flatMap((r) => w.served(r));
      expect(served.sort()).toEqual([...w.names].sort());
      expect(served).not.toContain(removed);
      const renewals = w.renewals();
      for (const name of ['g1', 'g2', 'g3', 'g4']) expect(renewals.get(name)).toBe(1);
      for (const r of replicas) expect(r.daemon.status().fleet).toMatchObject({ shared: 9 });
    } finally {
      await w.close();
    }
  }, 60_000);
});

describe('a 429 of the token endpoint pauses the Dropbox account on every replica', () => {
  it("one replica meets Retry-After: the account's profiles on the others send nothing until it ends, then resume spread, never past a token's expiry less the safety window", async () => {
    // One renewal at a time per replica: a request already on its way when the 429 arrives is not what is tested.
    const w = await fleetWorld(12, { account: 'dbid:shared-account', concurrency: 1 });
    try {
      const replicas = [await w.start('a'), await w.start('b'), await w.start('c')];
      await w.sweepAll();
      await w.sweepAll();
      expect([...w.renewals().values()]).toEqual(w.names.map(() => 1));
      // The next renewals fall due over a few minutes (jitter); the first one meets a 429 asking for 10 minutes.
      w.emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 600, times: 1 }]);
      const before = w.emu.state.requests.filter((r) => r.route === 'token').length;
      await w.advance(4 * HOUR - 18 * MINUTE);
      await w.advance(8 * MINUTE);
      // One request met the 429; every other profile of the account, on every replica, sent nothing since.
      expect(w.emu.state.requests.filter((r) => r.route === 'token').length).toBe(before + 1);
      expect(w.log.records().filter((r) => r.event === 'renewal.account_paused')).toHaveLength(1);
      // After the pause (10 min from the 429) each profile renews once, and not all in the same minute.
      const resumed = new Map<number, number>();
      const start = w.emu.state.requests.length;
      for (let minute = 0; minute < 10; minute += 1) {
        await w.advance(MINUTE);
        resumed.set(minute, w.emu.state.requests.slice(start).filter((r) => r.route === 'token').length);
      }
      expect([...w.renewals().values()]).toEqual(w.names.map(() => 2));
      // Every token is still alive: none was left to expire by the pause.
      for (const name of w.names) expect(tokensOf(w.emu, (w.grants.get(name) as DaemonGrant).refreshToken).at(-1)?.expiresAt).toBeGreaterThan(w.now() + 3 * HOUR);
      expect(Math.max(...[...resumed.values()].map((n, i, all) => n - (all[i - 1] ?? 0)))).toBeLessThan(12);
      for (const r of replicas) expect(r.daemon.status().ready).toBe(true);
    } finally {
      await w.close();
    }
  }, 60_000);
});

describe('the fleet on /metrics', () => {
  /** One replica's fleet series, as a scrape shows them. */
  const fleetSeries = async (r: Replica): Promise<Record<string, number>> => {
    const text = await r.daemon.registry.metrics();
    const out: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const match = /^(syncauth_fleet_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
      if (match) out[match[1] as string] = Number(match[2]);
    }
    return out;
  };
  const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0);

  it("show each replica's members, mode and share; a dead replica's share unserved while Redis is away, until every replica serves all", async () => {
    const w = await fleetWorld(9);
    try {
      const [a, b, c] = [await w.start('a'), await w.start('b'), await w.start('c')] as [Replica, Replica, Replica];
      await w.sweepAll();
      await w.sweepAll();
      const all = await Promise.all([a, b, c].map(fleetSeries));
      for (const series of all) {
        expect(series).toMatchObject({
          syncauth_fleet_members: 3,
          syncauth_fleet_shared_profiles: 9,
          'syncauth_fleet_mode{mode="shares"}': 1,
          'syncauth_fleet_mode{mode="last_owned"}': 0,
          'syncauth_fleet_mode{mode="all"}': 0,
        });
      }
      // Every shared profile served by one replica: the sum across the fleet is the shared count.
      expect(sum(all.map((s) => s.syncauth_fleet_served_profiles as number))).toBe(9);
      for (const [r, s] of [[a, all[0]], [b, all[1]], [c, all[2]]] as const) expect(s?.syncauth_fleet_served_profiles).toBe(w.served(r).length);

      // c dies and Redis goes away before its lease ends: a and b serve what they owned, c's share is served by none.
      c.running = false;
      const cShare = w.served(c).length;
      expect(cShare).toBeGreaterThan(0);
      w.redis.down = true;
      await w.advance(MINUTE);
      const away = await Promise.all([a, b].map(fleetSeries));
      for (const series of away) expect(series).toMatchObject({ 'syncauth_fleet_mode{mode="shares"}': 0, 'syncauth_fleet_mode{mode="last_owned"}': 1, syncauth_fleet_shared_profiles: 9 });
      expect(sum(away.map((s) => s.syncauth_fleet_served_profiles as number))).toBe(9 - cShare);

      // After the bound each serves every profile.
      await w.advance(FALLBACK);
      for (const series of await Promise.all([a, b].map(fleetSeries))) {
        expect(series).toMatchObject({ 'syncauth_fleet_mode{mode="all"}': 1, 'syncauth_fleet_mode{mode="last_owned"}': 0, syncauth_fleet_served_profiles: 9 });
      }
    } finally {
      await w.close();
    }
  }, 60_000);

  it('are absent without a fleet', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600 });
    const grant = await obtainGrant(emu);
    const daemon = await startDaemon({
      profiles: () => Promise.resolve([profileOf(emu, { name: 'solo', grant })]),
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 15 * MINUTE,
      schedule: false,
      checkIntervalMs: 0,
      logger: captureLog('info').logger,
    });
    try {
      await daemon.sweep();
      const text = await daemon.registry.metrics();
      expect(text).toContain('syncauth_renewals_total');
      expect(text).not.toContain('syncauth_fleet_');
    } finally {
      await daemon.close();
    }
  });
});

describe("the fleet's cap on token requests", () => {
  it('is shared by the live replicas: three replicas with a cap of 3 a second send at most 3 a second between them', async () => {
    const w = await fleetWorld(30, { rate: 3 });
    try {
      await w.start('a');
      await w.start('b');
      await w.start('c');
      const before = w.now();
      const first = w.emu.state.requests.length;
      await w.sweepAll();
      expect([...w.renewals().values()]).toEqual(w.names.map(() => 1));
      // Each replica renews its ten or so at one a second (the cap over three), one after the other here:
      // about 27 s of the clock; a cap of 3 a second on each replica would have taken about 9.
      const tokens = w.emu.state.requests.slice(first).filter((r) => r.route === 'token').map((r) => r.at);
      expect(tokens).toHaveLength(30);
      expect(w.now() - before).toBeGreaterThanOrEqual(24_000);
    } finally {
      await w.close();
    }
  }, 60_000);
});

describe('renewals spread over the renewal window', () => {
  const windows = (ats: number[], from: number, to: number, size: number): number[] => {
    const counts: number[] = [];
    for (let start = from; start + size <= to; start += size) counts.push(ats.filter((at) => at >= start && at < start + size).length);
    return counts;
  };

  it('after a cold start of every replica, the next lifetime has no 10-minute window above twice the average', async () => {
    for (const spread of [false, true]) {
      const w = await fleetWorld(240, { spread, rate: 1_000 });
      try {
        for (const id of ['a', 'b', 'c']) await w.start(id);
        await w.sweepAll();
        const first = w.emu.state.requests.length;
        const from = w.now();
        await w.advance(8 * HOUR);
        const ats = w.emu.state.requests.slice(first).filter((r) => r.route === 'token').map((r) => r.at);
        // The second lifetime on: the first cycle after the cold start is where the spreading happens.
        const counts = windows(ats, from + 4 * HOUR, from + 8 * HOUR, 10 * MINUTE);
        const average = counts.reduce((a, b) => a + b, 0) / counts.length;
        if (spread) {
          expect(Math.max(...counts)).toBeLessThanOrEqual(2 * average);
          // At the cost of one early renewal per profile at most.
          for (const n of w.renewals().values()) expect(n).toBeLessThanOrEqual(4);
        } else {
          // Without it the cold start's bunch comes back at every lifetime.
          expect(Math.max(...counts)).toBeGreaterThan(5 * average);
        }
      } finally {
        await w.close();
      }
    }
  }, 120_000);
});

describe('a re-authorized grant while Redis is away past the bound', () => {
  it("a replica serving the profile only for the fallback, with the old grant, does not flag it for re-authorization", async () => {
    const w = await fleetWorld(6);
    try {
      const [a, b] = [await w.start('a'), await w.start('b')] as [Replica, Replica];
      await w.sweepAll();
      await w.sweepAll();
      const name = w.served(a)[0] as string;
      // Revoked, and re-authorized on its owner: a takes the new grant; b's configuration still has the old one.
      w.emu.revokeGrant((w.grants.get(name) as DaemonGrant).refreshToken);
      const fresh = await obtainGrant(w.emu);
      expect(await a.daemon.reauthorized(name, { ...fresh, accountId: '' })).toMatchObject({ stored: true });
      // Redis away past the bound: b serves every profile, this one with the grant it was configured with.
      w.redis.down = true;
      await w.advance(FALLBACK + 2 * MINUTE);
      expect(b.daemon.status().fleet?.mode).toBe('all');
      expect(w.served(b)).toContain(name);
      const flagged = w.log.records().filter((r) => r.event === 'profile.reauthorization_needed' && r.profile === name);
      expect(flagged).toEqual([]);
      expect(w.log.records().filter((r) => r.event === 'fleet.fallback_refused' && r.profile === name && r.replica === 'b').length).toBeGreaterThan(0);
      expect(a.daemon.status().profiles.find((p) => p.name === name)?.ready).toBe(true);
      // Its own refusal, which b recorded in its state, is not another process's news: b tries the old grant again
      // only when its retry is due, not at every sweep to see for itself.
      const refusedBefore = w.log.records().filter((r) => r.event === 'fleet.fallback_refused' && r.profile === name && r.replica === 'b').length;
      await w.advance(12 * MINUTE);
      const refused = w.log.records().filter((r) => r.event === 'fleet.fallback_refused' && r.profile === name && r.replica === 'b').length - refusedBefore;
      expect(w.log.records().filter((r) => r.event === 'grant.failed_elsewhere' && r.profile === name && r.replica === 'b')).toEqual([]);
      expect(refused).toBeGreaterThanOrEqual(1);
      expect(refused).toBeLessThanOrEqual(3);
      // Redis back: b lets it go again; a, its owner, kept it fresh throughout.
      w.redis.down = false;
      await w.advance(2 * MINUTE);
      expect(w.served(b)).not.toContain(name);
      expect(b.daemon.status().profiles.every((p) => p.ready)).toBe(true);
    } finally {
      await w.close();
    }
  }, 60_000);
});

describe("a fleet's early renewal reaches the connector", () => {
  it('each renewal of a shared profile, early ones included, is given to the connector at once, not when its token nears the margin', async () => {
    const w = await fleetWorld(12, { spread: true, reconcile: true, rate: 1_000 });
    try {
      for (const id of ['a', 'b', 'c']) await w.start(id);
      await w.sweepAll();
      await w.sweepAll();
      let behind = 0;
      for (let step = 0; step < 24; step += 1) {
        await w.advance(10 * MINUTE);
        for (const name of w.names) {
          const newest = tokensOf(w.emu, (w.grants.get(name) as DaemonGrant).refreshToken).at(-1);
          const held = connectorsNamed(w.emu, `conn-${name}`)[0]?.config.token as string | undefined;
          const given = held === undefined ? undefined : w.emu.state.accessTokens.get(held);
          // A sweep (a minute) to give it: a token issued since the last sweep may not be there yet.
          if (newest && given && given.expiresAt < newest.expiresAt && newest.issuedAt < w.now() - 2 * MINUTE) behind += 1;
        }
      }
      expect(behind).toBe(0);
    } finally {
      await w.close();
    }
  }, 120_000);
});
