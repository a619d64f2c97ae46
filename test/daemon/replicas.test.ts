// Replicas of the real `syncauth daemon` process against one real redis-server, each as in the usual
// deployment: one sidecar per app pod, its own config dir and its own token file, the same grant from the
// environment (the env store). Redis is the only thing they share. Every replica's file must hold a live token
// at every sample, while the connector is reconciled once per lifetime by one of them; a replica kill -9'd and
// restarted is fresh again within seconds without the other noticing; and Redis away for longer than the
// margin costs no consumer its token: only the reconcile waits for it.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { CLI, tempDir } from '../helpers/cli.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { connectorsNamed, obtainGrant, tokensOf } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { containerEnv } from './process.js';
import type { DaemonGrant } from '../../src/daemon/index.js';

const LIFETIME_S = 6;
const MARGIN_S = 2;
const SAMPLE_MS = 250;

const availability = redisAvailability();
if (availability.skip) console.warn(`replicas.test.ts: ${availability.reason}`);

interface LogLine {
  level: number;
  msg: string;
  event?: string;
  [key: string]: unknown;
}

/** One `syncauth daemon` process with its own home, config dir and token file; its JSON log lines are kept. */
class Replica {
  child!: ChildProcess;
  exited!: Promise<number | null>;
  readonly tokenFile: string;
  private readonly home: string;
  private stdout = '';
  private stderr = '';
  /** This run's stdout: a restarted replica's start line and logs are its own. */
  private current = '';

  constructor(readonly name: string, private readonly env: Record<string, string>) {
    this.home = tempDir('syncauth-replica-');
    this.tokenFile = path.join(this.home, 'token');
    this.start();
  }

  /** Starts the process (again, after a kill: same home, same token file, as a restarted container). */
  start(): void {
    this.stdout += `--- start ---\n`;
    this.current = '';
    this.child = spawn(process.execPath, [CLI, 'daemon', '--sweep', '* * * * * *', '--renew-margin', String(MARGIN_S)], {
      cwd: this.home,
      env: { ...this.env, HOME: this.home, SYNCAUTH_CONFIG_DIR: path.join(this.home, 'config'), SYNCAUTH_TOKEN_FILE: this.tokenFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      this.stdout += d;
      this.current += d;
    });
    this.child.stderr?.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    const child = this.child;
    this.exited = new Promise((resolve) => child.once('close', (code) => resolve(code)));
  }

  lines(): LogLine[] {
    return this.current
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine);
  }

  logged(fragment: string): boolean {
    return this.lines().some((l) => l.msg.includes(fragment));
  }

  renewals(): number {
    return this.lines().filter((l) => l.msg.startsWith('renewed the access token')).length;
  }

  async url(): Promise<string> {
    return waitFor(`${this.name} to start`, () => {
      if (this.child.exitCode !== null) throw new Error(`${this.name} exited ${this.child.exitCode}:\n${this.stdout}\n${this.stderr}`);
      const start = this.lines().findLast((l) => l.msg.includes('daemon started'));
      return typeof start?.listen === 'string' ? start.listen : undefined;
    });
  }

  async readyz(): Promise<{ status: number; body: { ready: boolean; coordinator?: string; profiles: Record<string, { ready: boolean; reason?: string }> } }> {
    const res = await fetch(`${await this.url()}/readyz`);
    return { status: res.status, body: (await res.json()) as never };
  }

  /** What the token file holds now ('' when absent). */
  published(): string {
    try {
      return readFileSync(this.tokenFile, 'utf8');
    } catch {
      return '';
    }
  }

  describe(): string {
    return `--- ${this.name} stdout ---\n${this.stdout}\n--- ${this.name} stderr ---\n${this.stderr}`;
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Samples every replica's token file every SAMPLE_MS while `during` runs, judging each against the emulator:
 * a sample counts as stale when the file holds no token the emulator considers unexpired at that moment.
 */
async function sampleFiles(
  emu: RunningEmulator,
  group: Replica[],
  skip: (replica: Replica) => boolean,
  during: () => Promise<void>,
): Promise<Map<string, { samples: number; stale: number }>> {
  const tally = new Map(group.map((r) => [r.name, { samples: 0, stale: 0 }]));
  let running = true;
  const sampler = (async () => {
    while (running) {
      const at = Date.now();
      for (const replica of group) {
        if (skip(replica)) continue;
        const entry = tally.get(replica.name) as { samples: number; stale: number };
        entry.samples += 1;
        const issued = emu.state.accessTokens.get(replica.published());
        if (!issued || issued.expiresAt <= at) entry.stale += 1;
      }
      await sleep(SAMPLE_MS);
    }
  })();
  try {
    await during();
  } finally {
    running = false;
    await sampler;
  }
  return tally;
}

/** Updates and creations of connectors the emulator answered successfully. */
function connectorWrites(emu: RunningEmulator, since = 0): number {
  return emu.state.requests.filter((r) => r.at >= since && r.route === 'sources' && r.method !== 'GET' && r.status < 300).length;
}

describe.skipIf(availability.skip)('replicas coordinated by a real redis-server', () => {
  let redis: RedisServer;
  const replicas: Replica[] = [];
  const emulators: RunningEmulator[] = [];

  beforeAll(async () => {
    redis = await startRedisServer(availability);
  });
  afterEach(async () => {
    await Promise.all(replicas.splice(0).map((r) => r.kill()));
    await Promise.all(emulators.splice(0).map((e) => e.close()));
  });
  afterAll(async () => {
    await redis?.stop();
  });

  async function world(profile: string, count: number): Promise<{ emu: RunningEmulator; grant: DaemonGrant; group: Replica[] }> {
    const emu = await startEmulator({ autoApprove: true, tokenLifetimeSeconds: LIFETIME_S });
    emulators.push(emu);
    const grant = await obtainGrant(emu);
    const env = { ...containerEnv(emu, grant, tempDir(), { profile }), SYNCAUTH_REDIS_URL: redis.url };
    const group = Array.from({ length: count }, (_, i) => new Replica(`replica-${i + 1}`, env));
    replicas.push(...group);
    return { emu, grant, group };
  }

  async function allReady(group: Replica[], timeoutMs = 10_000): Promise<void> {
    for (const replica of group) {
      await waitFor(`${replica.name} to be ready`, async () => ((await replica.readyz()).status === 200 ? true : undefined), timeoutMs);
    }
  }

  /** The connector exists once, and holds a token the emulator still honours. */
  function connectorFresh(emu: RunningEmulator, profile: string): boolean {
    const connectors = connectorsNamed(emu, `conn-${profile}`);
    const issued = emu.state.accessTokens.get(String(connectors[0]?.config.token));
    return connectors.length === 1 && issued !== undefined && issued.expiresAt > Date.now();
  }

  it('two replicas, each with its own token file: both files always hold a live token; one reconcile per lifetime', async () => {
    const { emu, grant, group } = await world('pair', 2);
    try {
      await allReady(group);
      const since = Date.now();
      const window = 4 * LIFETIME_S * 1000;
      const tally = await sampleFiles(emu, group, () => false, () => sleep(window));
      const lifetimes = window / ((LIFETIME_S - MARGIN_S) * 1000);
      const writes = connectorWrites(emu, since);
      console.log(
        `two replicas over ${window} ms (${lifetimes.toFixed(1)} renewal cycles): ` +
          `${group.map((r) => `${r.name} renewed ${r.renewals()}×, stale ${tally.get(r.name)?.stale}/${tally.get(r.name)?.samples}`).join('; ')}; ` +
          `${writes} connector writes`,
      );
      for (const replica of group) {
        expect(tally.get(replica.name)?.stale, `${replica.name}: samples without a live token`).toBe(0);
        // Each replica renews for itself, once per cycle.
        expect(replica.renewals()).toBeGreaterThanOrEqual(Math.floor(lifetimes));
      }
      // One reconcile per cycle, not one per replica: at most one more than the cycles (a window's edges).
      expect(writes).toBeGreaterThanOrEqual(Math.floor(lifetimes) - 1);
      expect(writes).toBeLessThanOrEqual(Math.ceil(lifetimes) + 1);
      expect(connectorFresh(emu, 'pair')).toBe(true);
      expect(tokensOf(emu, grant.refreshToken).length).toBeGreaterThan(2);
    } catch (error) {
      for (const replica of group) console.log(replica.describe());
      throw error;
    }
  }, 60_000);

  it('a replica kill -9ed and restarted is fresh again within seconds; the other never notices', async () => {
    const { emu, group } = await world('restart', 2);
    const [victim, other] = group as [Replica, Replica];
    try {
      await allReady(group);
      let down = false;
      let freshAfterMs = NaN;
      const tally = await sampleFiles(emu, group, (r) => r === victim && down, async () => {
        await sleep(2_000);
        down = true;
        await victim.kill();
        await sleep(3_000);
        const restartedAt = Date.now();
        victim.start();
        await allReady([victim]);
        freshAfterMs = Date.now() - restartedAt;
        down = false;
        await sleep(2 * LIFETIME_S * 1000);
      });
      console.log(`restarted replica ready after ${freshAfterMs} ms; stale samples: ${[...tally].map(([n, t]) => `${n} ${t.stale}/${t.samples}`).join(', ')}`);
      expect(freshAfterMs).toBeLessThan(5_000);
      expect(tally.get(other.name)?.stale).toBe(0);
      expect(tally.get(victim.name)?.stale).toBe(0);
      expect(connectorFresh(emu, 'restart')).toBe(true);
    } catch (error) {
      for (const replica of group) console.log(replica.describe());
      throw error;
    }
  }, 60_000);

  it('Redis away for longer than the margin: every file stays live, only the reconcile waits; one reconcile once it is back', async () => {
    const { emu, group } = await world('outage', 2);
    try {
      await allReady(group);
      const outageMs = 2 * LIFETIME_S * 1000;
      let writesDuring = -1;
      const tally = await sampleFiles(emu, group, () => false, async () => {
        await redis.kill();
        const downAt = Date.now();
        for (const replica of group) {
          await waitFor(`${replica.name} to report Redis unreachable`, async () => {
            const { body } = await replica.readyz();
            return body.coordinator === 'unreachable' ? true : undefined;
          }, 5_000);
        }
        // A reconcile that took its lease before Redis went away may still land its write on a busy machine;
        // none may start once every replica knows Redis is gone.
        const knownAt = Date.now();
        await sleep(downAt + outageMs - Date.now());
        writesDuring = connectorWrites(emu, knownAt);
        await redis.restart();
        await waitFor('the connector reconciled after Redis came back', () => (connectorFresh(emu, 'outage') ? true : undefined), 10_000);
      });
      console.log(`Redis down ${outageMs} ms: ${writesDuring} connector writes meanwhile; stale samples ${[...tally].map(([n, t]) => `${n} ${t.stale}/${t.samples}`).join(', ')}`);
      for (const replica of group) {
        expect(tally.get(replica.name)?.stale, `${replica.name}: samples without a live token`).toBe(0);
        expect(replica.logged('Redis is unreachable: this replica keeps renewing its own tokens')).toBe(true);
        expect(replica.logged('Redis is reachable again')).toBe(true);
        const { status, body } = await replica.readyz();
        expect(status).toBe(200);
        expect(body.coordinator).toBe('available');
      }
      // Nobody reconciled without the lease.
      expect(writesDuring).toBe(0);
      expect(connectorsNamed(emu, 'conn-outage')).toHaveLength(1);
    } catch (error) {
      for (const replica of group) console.log(replica.describe());
      throw error;
    }
  }, 60_000);
});
