// Fleet mode end to end: three `syncauth daemon --fleet` processes of the built CLI, one real redis-server and
// the emulator (four-hour tokens), over 24 profiles kept in the encrypted file store as setup leaves them (the
// grant and the service's API key in the store, the endpoints and the connector's name in the state), each
// reconciling its own connector and published nowhere: every profile is shared. The three replicas see one
// config dir, as pods mounting one volume do: the renewal locks, the state and the access token a replica keeps
// in the store are seen by all three, so a replica that takes a profile takes the token its last owner kept
// when it is still good, rather than renewing again.
//
// What is counted comes from the emulator (access tokens issued per grant, token requests) and from each
// replica's own words: `/readyz` (its `fleet` field, and the profiles it holds) and its JSON log lines. Each
// phase does what happens to a fleet: it starts; a replica is killed -9, and another started; one is stopped
// (SIGSTOP) for longer than its lease and resumed; someone who can write Redis but has no grant key forges
// members, floods the members' hash and deletes it; Redis goes away and comes back. The phases run in order on
// one fleet, each from where the previous one left it.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import type { DaemonGrant } from '../../src/daemon/index.js';
import { CLI, tempDir } from '../helpers/cli.js';
import { newHome, type Home } from '../helpers/onboarding.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { connectorsNamed, obtainGrant, tokenRequests, tokensOf } from './helpers.js';

const PROFILES = 24;
const LIFETIME_S = 4 * 3600;
/** A small margin, so that the bound after which a replica without Redis serves everything, min(5 min, margin / 2), is 15 s. */
const MARGIN_S = 30;
const FALLBACK_MS = (MARGIN_S * 1000) / 2;
/** The fleet's lease (its default; not a flag). */
const LEASE_MS = 30_000;
const MEMBERS_HASH = 'syncauth:fleet:members';

const availability = redisAvailability();
if (availability.skip) console.warn(`fleet-replicas.test.ts: ${availability.reason}`);

interface LogLine {
  level: number;
  msg: string;
  event?: string;
  profile?: string;
  [key: string]: unknown;
}

interface FleetView {
  replica: string;
  members: number;
  mode: 'shares' | 'last_owned' | 'all';
  served: number;
  shared: number;
}

interface Readyz {
  status: number;
  ready: boolean;
  coordinator?: string;
  fleet?: FleetView;
  profiles: Record<string, { ready: boolean; reason?: string; expiresAt: string | null }>;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One `syncauth daemon --fleet` process of the built CLI; its JSON log lines are kept. */
class Replica {
  child!: ChildProcess;
  exited!: Promise<number | null>;
  stopped = false;
  private stdout = '';
  private stderr = '';
  private readonly cwd = tempDir('syncauth-fleet-replica-');

  constructor(readonly name: string, private readonly env: Record<string, string>, private readonly args: string[]) {
    this.start();
  }

  private start(): void {
    this.child = spawn(process.execPath, [CLI, 'daemon', ...this.args], { cwd: this.cwd, env: { ...this.env, HOME: this.cwd }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout?.setEncoding('utf8').on('data', (d: string) => (this.stdout += d));
    this.child.stderr?.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    const child = this.child;
    this.exited = new Promise((resolve) => child.once('close', (code) => resolve(code)));
  }

  /** Whole JSON lines logged so far. */
  lines(): LogLine[] {
    return this.stdout
      .slice(0, this.stdout.lastIndexOf('\n') + 1)
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine);
  }

  events(event: string, since = 0): LogLine[] {
    return this.lines().filter((l) => l.event === event && Date.parse(String(l.time)) >= since);
  }

  async url(): Promise<string> {
    return waitFor(`${this.name} to start`, () => {
      if (this.child.exitCode !== null) throw new Error(`${this.name} exited ${this.child.exitCode}:\n${this.describe()}`);
      const start = this.lines().find((l) => l.msg.includes('daemon started'));
      return typeof start?.listen === 'string' ? start.listen : undefined;
    }, 30_000);
  }

  async readyz(): Promise<Readyz> {
    const res = await fetch(`${await this.url()}/readyz`, { signal: AbortSignal.timeout(5_000) });
    return { status: res.status, ...((await res.json()) as Omit<Readyz, 'status'>) };
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
    if (signal === 'SIGSTOP') this.stopped = true;
    if (signal === 'SIGCONT') this.stopped = false;
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }

  /** Everything it wrote, both streams. */
  output(): string {
    return this.stdout + this.stderr;
  }

  describe(): string {
    return `--- ${this.name} stdout ---\n${this.stdout}\n--- ${this.name} stderr ---\n${this.stderr}`;
  }
}

/** Runs the built CLI to its exit with exactly `env`. */
function run(env: Record<string, string>, argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...argv], { cwd: tempDir('syncauth-fleet-refused-'), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

/** The profile names a group of replicas hold, each view with them. */
interface Snapshot {
  views: Map<Replica, Readyz>;
  /** Profile → the replicas holding it. */
  holders: Map<string, Replica[]>;
}

describe.skipIf(availability.skip)('three `syncauth daemon --fleet` processes over one redis-server', () => {
  let redis: RedisServer;
  let writer: Redis;
  let emu: RunningEmulator;
  let home: Home;
  let env: Record<string, string>;
  const names = Array.from({ length: PROFILES }, (_, i) => `f${String(i).padStart(2, '0')}`);
  const grants = new Map<string, DaemonGrant>();
  const everyone: Replica[] = [];
  let fleet: Replica[] = [];
  let count = 0;

  const args = (): string[] => ['--fleet', '--redis-url', redis.url, '--listen', '127.0.0.1:0', '--sweep', '* * * * * *', '--renew-margin', String(MARGIN_S)];

  function startReplica(): Replica {
    count += 1;
    const replica = new Replica(`replica-${count}`, env, args());
    everyone.push(replica);
    return replica;
  }

  /** Access tokens issued per profile beyond the code exchange's: its renewals. */
  function renewals(): Map<string, number> {
    return new Map(names.map((name) => [name, tokensOf(emu, (grants.get(name) as DaemonGrant).refreshToken).length - 1]));
  }

  function since(before: Map<string, number>): Map<string, number> {
    const now = renewals();
    return new Map(names.map((name) => [name, (now.get(name) as number) - (before.get(name) as number)]));
  }

  /** Tokens taken from the shared store instead of renewing, per profile, by `group` since `at`. */
  function adoptions(group: Replica[], at: number): Map<string, number> {
    const taken = new Map(names.map((name) => [name, 0]));
    for (const replica of group) for (const line of replica.events('token.shared', at)) taken.set(line.profile as string, (taken.get(line.profile as string) ?? 0) + 1);
    return taken;
  }

  async function snapshot(group: Replica[]): Promise<Snapshot> {
    const views = new Map<Replica, Readyz>();
    const holders = new Map<string, Replica[]>(names.map((name) => [name, []]));
    for (const replica of group) {
      const view = await replica.readyz();
      views.set(replica, view);
      for (const name of Object.keys(view.profiles)) holders.get(name)?.push(replica);
    }
    return { views, holders };
  }

  /**
   * Waits until every replica of `group` is ready, in mode `shares` with `group.length` members, and the profiles
   * they hold are each held by exactly one of them, their served counts summing to the profile count.
   */
  async function settled(group: Replica[], timeoutMs = 20_000): Promise<Snapshot> {
    return waitFor(`${group.map((r) => r.name).join(', ')} to settle on their shares`, async () => {
      const shot = await snapshot(group);
      const views = [...shot.views.values()];
      const served = views.reduce((sum, view) => sum + (view.fleet?.served ?? 0), 0);
      const ok =
        views.every((v) => v.status === 200 && v.ready && v.fleet?.members === group.length && v.fleet.mode === 'shares' && v.fleet.shared === names.length) &&
        served === names.length &&
        [...shot.holders.values()].every((h) => h.length === 1);
      return ok ? shot : undefined;
    }, timeoutMs);
  }

  const shareOf = (shot: Snapshot, replica: Replica): string[] => Object.keys(shot.views.get(replica)?.profiles ?? {}).sort();

  /**
   * Renewals since `counted` that the phase caused: less each renewal a replica of `owners` logged since `at` for
   * a profile it served in `before`. Spreading (on by default with --fleet) draws a profile's next renewal
   * anywhere in its token's four-hour window, so any moment may bring one, by the profile's owner and on no
   * account of the phase; a takeover is by another replica, and counts.
   */
  function caused(counted: Map<string, number>, at: number, before: Snapshot, owners: Replica[]): Map<string, number> {
    const renewed = since(counted);
    for (const owner of owners) {
      const served = new Set(shareOf(before, owner));
      for (const line of owner.events('renewal.succeeded', at)) {
        const name = line.profile as string;
        // Never below none: a renewal the emulator answered just before `counted` may be logged just after `at`.
        if (served.has(name)) renewed.set(name, Math.max(0, (renewed.get(name) as number) - 1));
      }
    }
    return renewed;
  }

  /** Every profile's connector exists once and holds a token of its own grant that the emulator still honours. */
  function connectorsFresh(): boolean {
    return names.every((name) => {
      const connectors = connectorsNamed(emu, `conn-${name}`);
      const issued = emu.state.accessTokens.get(String(connectors[0]?.config.token));
      const grantId = tokensOf(emu, (grants.get(name) as DaemonGrant).refreshToken)[0]?.grantId;
      return connectors.length === 1 && issued !== undefined && issued.grantId === grantId && issued.expiresAt > Date.now();
    });
  }

  /** Writes the profile into the shared config dir through the package's stores, as setup does. */
  async function store(name: string): Promise<void> {
    const grant = grants.get(name) as DaemonGrant;
    const secrets = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
    await secrets.set(name, { app_key: grant.appKey, app_secret: grant.appSecret, refresh_token: grant.refreshToken, api_key: DEFAULT_EMULATOR_API_KEY });
    await openProfileStore(home.configDir).update(name, () => ({
      baseUrl: emu.url,
      remoteUrl: 'dropbox://data',
      recursive: false,
      access: 'read',
      connectorName: `conn-${name}`,
      authorizeUrl: emu.authorizeUrl,
      tokenUrl: emu.tokenUrl,
      dropboxApiUrl: emu.apiUrl,
    }));
  }

  beforeAll(async () => {
    redis = await startRedisServer(availability);
    writer = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
    // While Redis is killed on purpose the writer's reconnects fail; it has nothing to say then.
    writer.on('error', () => undefined);
    await writer.connect();
    emu = await startEmulator({ autoApprove: true, tokenLifetimeSeconds: LIFETIME_S });
    for (const name of names) grants.set(name, await obtainGrant(emu));
    // The config dir as setup leaves it: the grant and the API key in the file store, the rest in the state.
    home = newHome();
    for (const name of names) await store(name);
    env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      SYNCAUTH_CONFIG_DIR: home.configDir,
      SYNCAUTH_STORE: 'file',
      SYNCAUTH_STORE_KEY: home.storeKey,
      SYNCAUTH_GRANT_KEY: randomBytes(32).toString('base64'),
    };
  }, 60_000);

  afterAll(async () => {
    await Promise.all(everyone.map(async (r) => {
      if (r.stopped) r.signal('SIGCONT');
      await r.kill();
    }));
    writer?.disconnect();
    await emu?.close();
    await redis?.stop();
  });

  /** On a failure, what each replica logged. */
  async function telling<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      for (const replica of everyone) console.log(replica.describe());
      throw error;
    }
  }

  it('--fleet without SYNCAUTH_GRANT_KEY, or without --redis-url, is refused before anything starts (exit 2)', async () => {
    const requests = tokenRequests(emu);
    const { SYNCAUTH_GRANT_KEY: _key, ...keyless } = env;
    const noKey = await run(keyless, ['daemon', '--fleet', '--redis-url', redis.url, '--listen', '127.0.0.1:0']);
    expect(noKey.code, noKey.stderr).toBe(2);
    expect(noKey.stderr).toContain('--fleet');
    expect(noKey.stderr).toContain('SYNCAUTH_GRANT_KEY');
    const noRedis = await run(env, ['daemon', '--fleet', '--listen', '127.0.0.1:0']);
    expect(noRedis.code, noRedis.stderr).toBe(2);
    expect(noRedis.stderr).toContain('--fleet');
    expect(noRedis.stderr).toContain('--redis-url');
    for (const refused of [noKey, noRedis]) for (const secret of [env.SYNCAUTH_GRANT_KEY, env.SYNCAUTH_STORE_KEY] as string[]) expect(refused.stdout + refused.stderr).not.toContain(secret);
    // Refused before a profile was loaded or a token asked for; nothing joined the fleet.
    expect(tokenRequests(emu)).toBe(requests);
    expect(await writer.hlen(MEMBERS_HASH)).toBe(0);
  }, 60_000);

  it('three replicas start: each profile renewed once across the fleet, and held by exactly one replica', () =>
    telling(async () => {
      fleet = [startReplica(), startReplica(), startReplica()];
      const shot = await settled(fleet, 60_000);
      // Nothing more comes after a few sweeps: the shares are what they are.
      await sleep(3_000);
      const again = await settled(fleet);
      for (const replica of fleet) expect(shareOf(again, replica)).toEqual(shareOf(shot, replica));
      // Each profile renewed once across the fleet: by the one replica holding it. (A second renewal by that same
      // replica is its token's next, which spreading may draw at any moment of its window: not the start's.)
      const renewedBy = new Map(names.map((name) => [name, new Set<Replica>()]));
      for (const r of fleet) for (const line of r.events('renewal.succeeded')) renewedBy.get(line.profile as string)?.add(r);
      for (const name of names) expect([...(renewedBy.get(name) ?? [])], name).toEqual(again.holders.get(name));
      const firsts = new Map(names.map((name) => [name, 0]));
      for (const r of fleet) for (const name of new Set(r.events('renewal.succeeded').map((l) => l.profile as string))) firsts.set(name, (firsts.get(name) as number) + 1);
      expect([...firsts.values()], 'profiles renewed by more than one replica').toEqual(names.map(() => 1));
      for (const [name, count] of renewals()) expect(count, name).toBe(fleet.flatMap((r) => r.events('renewal.succeeded')).filter((l) => l.profile === name).length);
      await waitFor('every connector to hold its profile\'s live token', () => (connectorsFresh() ? true : undefined), 30_000);
      console.log(`shares at start: ${fleet.map((r) => `${r.name} ${shareOf(again, r).length}`).join(', ')}; token requests ${tokenRequests(emu)}`);
    }), 120_000);

  it('members forged in Redis without the grant key are refused, logged once, and given no profile', () =>
    telling(async () => {
      const start = await settled(fleet);
      const before = renewals();
      const at = Date.now();
      const until = Date.now() + 365 * 24 * 3600 * 1000;
      await writer.hset(MEMBERS_HASH, 'forged-bad-mac', JSON.stringify({ v: 1, until, mac: randomBytes(32).toString('base64url') }));
      await writer.hset(MEMBERS_HASH, 'forged-no-mac', JSON.stringify({ v: 1, until }));
      for (const replica of fleet) {
        await waitFor(`${replica.name} to refuse both forged members`, () => (replica.events('fleet.record_refused', at).length >= 2 ? true : undefined), 15_000);
      }
      // Some sweeps later (each reads the members), still once per record, and the shares are the three's.
      await sleep(3_000);
      // One line per forged record and replica; a record without a MAC fails the MAC's check as a wrong one does.
      for (const replica of fleet) expect(replica.events('fleet.record_refused', at).map((l) => l.reason)).toEqual(['mac', 'mac']);
      const shot = await settled(fleet);
      expect([...caused(before, at, start, fleet).values()]).toEqual(names.map(() => 0));
      expect(shot.views.size).toBe(3);
      await writer.hdel(MEMBERS_HASH, 'forged-bad-mac', 'forged-no-mac');
    }), 60_000);
  it('a replica killed -9: once its lease has run out the other two take each of its profiles, once, and count two members', () =>
    telling(async () => {
      const before = await settled(fleet);
      const [a, b, victim] = fleet as [Replica, Replica, Replica];
      const share = shareOf(before, victim);
      const id = before.views.get(victim)?.fleet?.replica as string;
      const counted = renewals();
      const at = Date.now();
      await victim.kill();
      // The lease its last heartbeat bought, on Redis's clock (the record outlives the process).
      const { until } = JSON.parse((await writer.hget(MEMBERS_HASH, id)) as string) as { until: number };
      fleet = [a, b];
      const after = await settled(fleet, LEASE_MS + 30_000);
      const tookMs = Date.now() - at;
      // Nobody took its profiles while its lease ran: each survivor counted it gone only once Redis's clock passed it.
      for (const survivor of fleet) {
        const dropped = survivor.events('fleet.members', at).find((l) => l.members === 2);
        expect(dropped, `${survivor.name} saw the fleet shrink`).toBeDefined();
        expect(Date.parse(String(dropped?.time))).toBeGreaterThanOrEqual(until - 5);
      }
      // Each of its profiles came to one survivor, once: renewed, or the token the dead replica kept in the shared
      // store taken (it is good for hours); the survivors' own profiles stayed where they were.
      const renewed = caused(counted, at, before, [a, b, victim]);
      const adopted = adoptions(fleet, at);
      const moved = names.filter((name) => (renewed.get(name) as number) + (adopted.get(name) as number) > 0);
      expect(moved).toEqual(share);
      for (const name of share) expect((renewed.get(name) as number) + (adopted.get(name) as number), name).toBe(1);
      for (const survivor of fleet) expect(shareOf(after, survivor)).toEqual(expect.arrayContaining(shareOf(before, survivor)));
      expect(connectorsFresh()).toBe(true);
      console.log(`kill -9: ${share.length} profiles taken ${tookMs} ms after the kill (lease ended ${until - at} ms after it); ` +
        `${[...renewed.values()].reduce((x, y) => x + y, 0)} renewed, ${[...adopted.values()].reduce((x, y) => x + y, 0)} taken from the store`);

      // A replica started in its place joins, and takes its share from the two, each profile once.
      const counted2 = renewals();
      const at2 = Date.now();
      const fresh = startReplica();
      fleet = [a, b, fresh];
      const rejoined = await settled(fleet, 30_000);
      const renewed2 = caused(counted2, at2, after, [a, b]);
      const adopted2 = adoptions([fresh], at2);
      const share2 = shareOf(rejoined, fresh);
      for (const name of names) expect((renewed2.get(name) as number) + (adopted2.get(name) as number), name).toBe(share2.includes(name) ? 1 : 0);
    }), 120_000);

  it('a replica stopped cleanly (SIGTERM, as a rolling update does): the other two take its profiles at once, not a lease later', () =>
    telling(async () => {
      const before = await settled(fleet);
      const [a, leaving, c] = fleet as [Replica, Replica, Replica];
      const share = shareOf(before, leaving);
      const id = before.views.get(leaving)?.fleet?.replica as string;
      const { until } = JSON.parse((await writer.hget(MEMBERS_HASH, id)) as string) as { until: number };
      const counted = renewals();
      const at = Date.now();
      leaving.signal('SIGTERM');
      expect(await leaving.exited).toBe(0);
      fleet = [a, c];
      const after = await settled(fleet, LEASE_MS + 30_000);
      // Taken on the record it left behind, well before the lease its last heartbeat bought had run out.
      for (const survivor of fleet) {
        const dropped = survivor.events('fleet.members', at).find((l) => l.members === 2);
        expect(Date.parse(String(dropped?.time)), `${survivor.name} saw it leave`).toBeLessThan(until);
      }
      const renewed = caused(counted, at, before, [a, leaving, c]);
      const adopted = adoptions(fleet, at);
      for (const name of names) expect((renewed.get(name) as number) + (adopted.get(name) as number), name).toBe(share.includes(name) ? 1 : 0);
      for (const survivor of fleet) expect(shareOf(after, survivor)).toEqual(expect.arrayContaining(shareOf(before, survivor)));
      console.log(`SIGTERM: ${share.length} profiles taken ${Date.now() - at} ms after the signal (its lease had ${until - at} ms to run)`);
      const fresh = startReplica();
      fleet = [a, c, fresh];
      await settled(fleet, 30_000);
    }), 90_000);

  it('a replica stopped past its lease: its profiles are taken meanwhile; resumed, it renews none of them again, and serves its share', () =>
    telling(async () => {
      const before = await settled(fleet);
      const stopped = fleet[1] as Replica;
      const others = fleet.filter((r) => r !== stopped);
      const share = shareOf(before, stopped);
      const counted = renewals();
      const at = Date.now();
      stopped.signal('SIGSTOP');
      const id = before.views.get(stopped)?.fleet?.replica as string;
      const { until } = JSON.parse((await writer.hget(MEMBERS_HASH, id)) as string) as { until: number };
      // The other two hold every profile between them once its lease has run out, and not before.
      const meanwhile = await settled(others, LEASE_MS + 30_000);
      for (const other of others) {
        const dropped = other.events('fleet.members', at).find((l) => l.members === 2);
        expect(Date.parse(String(dropped?.time)), `${other.name} counted it gone`).toBeGreaterThanOrEqual(until - 5);
      }
      const takenBy = new Map(share.map((name) => [name, meanwhile.holders.get(name)?.[0]?.name]));
      expect([...takenBy.values()].every((holder) => holder !== undefined)).toBe(true);
      // Stopped for longer than a whole lease, whenever its last heartbeat was.
      await sleep(Math.max(0, at + LEASE_MS + 1_000 - Date.now()));
      const resumedAt = Date.now();
      stopped.signal('SIGCONT');
      const after = await settled(fleet, 30_000);
      // A few sweeps more: whatever a resumed replica would renew, it has by now.
      await sleep(3_000);
      await settled(fleet);
      const renewed = caused(counted, at, before, others);
      const adopted = adoptions(others, at);
      const byResumed = new Set(stopped.events('renewal.succeeded', resumedAt).map((l) => l.profile));
      const byOthers = new Set(others.flatMap((r) => r.events('renewal.succeeded', at)).map((l) => l.profile));
      for (const name of names) {
        // No profile renewed twice since the stop: not by the two and then again by the resumed one.
        expect(renewed.get(name), name).toBeLessThanOrEqual(1);
        expect(byResumed.has(name) && byOthers.has(name), name).toBe(false);
      }
      // Each of its profiles was taken by one of the two while it was stopped (renewed, or the kept token taken).
      for (const name of share) expect((renewed.get(name) as number) - (byResumed.has(name) ? 1 : 0) + (adopted.get(name) as number), name).toBe(1);
      for (const name of names.filter((n) => !share.includes(n))) expect((renewed.get(name) as number) + (adopted.get(name) as number), name).toBe(0);
      // Back: the same three members, so the same share as before the stop.
      expect(shareOf(after, stopped)).toEqual(share);
      console.log(`SIGSTOP ${resumedAt - at} ms: ${share.length} profiles taken by ${[...new Set(takenBy.values())].join(', ')}; ` +
        `after SIGCONT the resumed replica renewed ${byResumed.size}, logged ${stopped.events('fleet.lease_lapsed', resumedAt).length} lease_lapsed; ` +
        `renewals since the stop ${[...renewed.values()].reduce((x, y) => x + y, 0)}`);
    }), 120_000);

  it('a profile set up while the fleet runs, then SIGHUP to every replica: one of them serves it, renewed once', () =>
    telling(async () => {
      const before = await settled(fleet);
      const counted = renewals();
      const added = `f${String(names.length).padStart(2, '0')}`;
      grants.set(added, await obtainGrant(emu));
      await store(added);
      names.push(added);
      counted.set(added, 0);
      const at = Date.now();
      for (const replica of fleet) replica.signal('SIGHUP');
      for (const replica of fleet) await waitFor(`${replica.name} to reload`, () => (replica.events('daemon.reloaded', at).length > 0 ? true : undefined), 30_000);
      const after = await settled(fleet, 30_000);
      expect(after.holders.get(added)).toHaveLength(1);
      await waitFor(`${added} renewed`, () => (renewals().get(added) === 1 ? true : undefined), 15_000);
      await sleep(2_000);
      const renewed = caused(counted, at, before, fleet);
      for (const name of names) expect(renewed.get(name), name).toBe(name === added ? 1 : 0);
      await waitFor('every connector to hold its profile\'s live token', () => (connectorsFresh() ? true : undefined), 30_000);
    }), 90_000);

  it('300 fields flooded into the members\' hash: the replicas keep what they owned, still ready, and return to their shares once it is gone', () =>
    telling(async () => {
      const before = await settled(fleet);
      const counted = renewals();
      const at = Date.now();
      const until = Date.now() + 365 * 24 * 3600 * 1000;
      const flood = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`flood-${i}`, JSON.stringify({ v: 1, until })]));
      await writer.hset(MEMBERS_HASH, flood);
      for (const replica of fleet) {
        const view = await waitFor(`${replica.name} to stop trusting the members' hash`, async () => {
          const v = await replica.readyz();
          return v.fleet?.mode !== 'shares' ? v : undefined;
        }, 30_000);
        expect(view.status).toBe(200);
        // Within the bound it serves what it owned; past it (a very slow machine), everything.
        if (view.fleet?.mode === 'last_owned') expect(Object.keys(view.profiles).sort()).toEqual(shareOf(before, replica));
        else expect(Date.now() - at).toBeGreaterThanOrEqual(FALLBACK_MS);
        expect(replica.events('fleet.down', at)).toHaveLength(1);
      }
      // Not frozen, and nothing left without a holder: every profile held, ready, by one of them.
      const during = await snapshot(fleet);
      for (const name of names) expect(during.holders.get(name)?.length, name).toBeGreaterThanOrEqual(1);
      for (const view of during.views.values()) expect(Object.values(view.profiles).every((p) => p.ready)).toBe(true);
      await writer.hdel(MEMBERS_HASH, ...Object.keys(flood));
      const after = await settled(fleet, 30_000);
      for (const replica of fleet) expect(shareOf(after, replica)).toEqual(shareOf(before, replica));
      expect([...caused(counted, at, before, fleet).values()]).toEqual(names.map(() => 0));
    }), 90_000);

  it('the members\' hash deleted: no replica takes every profile, and no burst of token requests', () =>
    telling(async () => {
      const before = await settled(fleet);
      const counted = renewals();
      const requests = tokenRequests(emu);
      const at = Date.now();
      await writer.del(MEMBERS_HASH);
      // Longer than a heartbeat's interval (a third of the lease): every replica has written its record again since.
      const most = new Map(fleet.map((r) => [r, 0]));
      const end = Date.now() + LEASE_MS / 3 + 2_000;
      while (Date.now() < end) {
        for (const replica of fleet) {
          const view = await replica.readyz();
          most.set(replica, Math.max(most.get(replica) as number, Object.keys(view.profiles).length, view.fleet?.served ?? 0));
        }
        await sleep(100);
      }
      for (const replica of fleet) expect(most.get(replica), replica.name).toBeLessThan(names.length);
      const after = await settled(fleet);
      for (const replica of fleet) expect(shareOf(after, replica)).toEqual(shareOf(before, replica));
      expect(tokenRequests(emu) - requests).toBeLessThan(names.length);
      expect([...caused(counted, at, before, fleet).values()]).toEqual(names.map(() => 0));
      console.log(`members' hash deleted: most profiles held by one replica meanwhile ${Math.max(...most.values())} (share before ${Math.max(...fleet.map((r) => shareOf(before, r).length))})`);
    }), 60_000);

  it('Redis killed: each replica keeps its share, then after the bound serves every profile; Redis back, the shares again', () =>
    telling(async () => {
      const before = await settled(fleet);
      const counted = renewals();
      const at = Date.now();
      await redis.kill();
      for (const replica of fleet) {
        const view = await waitFor(`${replica.name} to notice Redis is gone`, async () => {
          const v = await replica.readyz();
          return v.fleet?.mode !== 'shares' ? v : undefined;
        }, 15_000);
        expect(view.status).toBe(200);
        if (view.fleet?.mode === 'last_owned') expect(Object.keys(view.profiles).sort()).toEqual(shareOf(before, replica));
      }
      // After the bound, min(5 min, margin / 2), each serves every profile, and is ready.
      for (const replica of fleet) {
        await waitFor(`${replica.name} to serve every profile`, async () => {
          const v = await replica.readyz();
          return v.fleet?.mode === 'all' && v.status === 200 && Object.keys(v.profiles).length === names.length && Object.values(v.profiles).every((p) => p.ready) ? v : undefined;
        }, FALLBACK_MS + 30_000);
      }
      const allMs = Date.now() - at;
      expect(allMs).toBeGreaterThanOrEqual(FALLBACK_MS - 1_000);
      for (const replica of fleet) expect(replica.events('fleet.fallback_all', at)).toHaveLength(1);
      // Every replica renews, or takes from the shared store, each profile it did not own: at most once per replica.
      const meanwhile = caused(counted, at, before, fleet);
      for (const name of names) expect(meanwhile.get(name), name).toBeLessThanOrEqual(fleet.length - 1);
      const backAt = Date.now();
      await redis.start();
      const after = await settled(fleet, 30_000);
      for (const replica of fleet) expect(replica.events('fleet.up', backAt).length).toBeGreaterThanOrEqual(1);
      for (const replica of fleet) expect(shareOf(after, replica)).toEqual(shareOf(before, replica));
      // Through all of it, no replica wrote a token or a key.
      const secrets = [...emu.state.accessTokens.keys(), ...[...grants.values()].flatMap((g) => [g.refreshToken, g.appSecret]), env.SYNCAUTH_GRANT_KEY, env.SYNCAUTH_STORE_KEY] as string[];
      for (const replica of everyone) for (const secret of secrets) expect(replica.output().includes(secret), `${replica.name} wrote a secret`).toBe(false);
      const writes = emu.state.requests.filter((r) => r.route === 'sources' && r.method !== 'GET' && r.status < 300).length;
      const calls = emu.state.requests.filter((r) => r.route !== 'token').length;
      console.log(`whole run: ${tokenRequests(emu)} token requests (${names.length} of them code exchanges), ${writes} connector writes, ${calls} other calls to the emulator`);
      console.log(`Redis killed: every replica in mode all after ${allMs} ms (bound ${FALLBACK_MS} ms); renewals meanwhile ` +
        `${[...meanwhile.values()].reduce((x, y) => x + y, 0)}, taken from the store ${[...adoptions(fleet, at).values()].reduce((x, y) => x + y, 0)}; back to shares ${Date.now() - backAt} ms after Redis returned`);
    }), 120_000);
});
