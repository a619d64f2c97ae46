// Replicas of the real `syncauth daemon` process against one real redis-server. Each replica has its own
// config dir and takes the same grant from the environment (the env store), as replicas in separate containers
// would: Redis is the only thing they share. Then Redis goes away: nobody renews, every replica says so and
// answers /readyz with 503; Redis comes back, empty, and exactly one replica renews again.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { CLI, tempDir } from '../helpers/cli.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { connectorsNamed, obtainGrant, tokensOf } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { containerEnv } from './process.js';
import type { DaemonGrant } from '../../src/daemon/index.js';

const LIFETIME_S = 5;
const MARGIN_S = 2;
/** The jitter the daemon adds to the margin: up to 20% of it. */
const JITTER_MAX_MS = MARGIN_S * 1000 * 0.2;
/** One replica renews every lifetime minus margin, rounded up to the next one-second sweep. */
const CADENCE_MS = (LIFETIME_S - MARGIN_S) * 1000;
const WINDOW_MS = 12_500;

const availability = redisAvailability();
if (availability.skip) console.warn(`replicas.test.ts: ${availability.reason}`);

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** One `syncauth daemon` process with its own config dir; its JSON log lines are kept. */
class Replica {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  private stdout = '';
  private stderr = '';

  constructor(readonly name: string, env: Record<string, string>) {
    const home = tempDir('syncauth-replica-');
    this.child = spawn(process.execPath, [CLI, 'daemon', '--sweep', '* * * * * *', '--renew-margin', String(MARGIN_S)], {
      cwd: home,
      env: { ...env, HOME: home, SYNCAUTH_CONFIG_DIR: path.join(home, 'config') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.setEncoding('utf8').on('data', (d: string) => (this.stdout += d));
    this.child.stderr?.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.child.once('close', (code) => resolve(code)));
  }

  lines(): LogLine[] {
    return this.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine);
  }

  logged(fragment: string): boolean {
    return this.lines().some((l) => l.msg.includes(fragment));
  }

  async url(): Promise<string> {
    return waitFor(`${this.name} to start`, () => {
      if (this.child.exitCode !== null) throw new Error(`${this.name} exited ${this.child.exitCode}:\n${this.stdout}\n${this.stderr}`);
      const start = this.lines().find((l) => l.msg.includes('daemon started'));
      return typeof start?.listen === 'string' ? start.listen : undefined;
    });
  }

  async readyz(): Promise<{ status: number; body: { ready: boolean; coordinator?: string; profiles: Record<string, { ready: boolean; reason?: string }> } }> {
    const res = await fetch(`${await this.url()}/readyz`);
    return { status: res.status, body: (await res.json()) as never };
  }

  describe(): string {
    return `--- ${this.name} stdout ---\n${this.stdout}\n--- ${this.name} stderr ---\n${this.stderr}`;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** When the emulator issued each renewed access token of the grant (the code exchange's token left out). */
function renewalTimes(emu: RunningEmulator, grant: DaemonGrant): number[] {
  return tokensOf(emu, grant.refreshToken).slice(1).map((t) => t.issuedAt);
}

function gaps(times: number[]): number[] {
  return times.slice(1).map((t, i) => t - (times[i] as number));
}

describe.skipIf(availability.skip)('replicas coordinated by a real redis-server', () => {
  let redis: RedisServer;
  const replicas: Replica[] = [];
  const emulators: RunningEmulator[] = [];

  beforeAll(async () => {
    redis = await startRedisServer(availability);
  });
  afterEach(async () => {
    await Promise.all(replicas.splice(0).map((r) => r.stop()));
    await Promise.all(emulators.splice(0).map((e) => e.close()));
  });
  afterAll(async () => {
    await redis?.stop();
  });

  async function world(profile: string, count: number): Promise<{ emu: RunningEmulator; grant: DaemonGrant; replicas: Replica[] }> {
    const emu = await startEmulator({ autoApprove: true, tokenLifetimeSeconds: LIFETIME_S });
    emulators.push(emu);
    const grant = await obtainGrant(emu);
    // One container's environment; each replica gets a home and config directory of its own (see Replica).
    const env = { ...containerEnv(emu, grant, tempDir(), { profile }), SYNCAUTH_REDIS_URL: redis.url };
    const started = Array.from({ length: count }, (_, i) => new Replica(`replica-${i + 1}`, env));
    replicas.push(...started);
    return { emu, grant, replicas: started };
  }

  /** Every replica answers /readyz with 200, the profile ready. */
  async function allReady(group: Replica[], timeoutMs = 10_000): Promise<void> {
    for (const replica of group) {
      await waitFor(`${replica.name} to be ready`, async () => ((await replica.readyz()).status === 200 ? true : undefined), timeoutMs);
    }
  }

  /**
   * Runs `group` for WINDOW_MS after the first renewal and checks that the grant was renewed as one replica
   * would renew it: once per cadence (not once per replica), never twice within the margin.
   */
  async function checkSteadyState(emu: RunningEmulator, grant: DaemonGrant, group: Replica[], profile: string): Promise<void> {
    try {
      await allReady(group);
      const first = renewalTimes(emu, grant)[0] as number;
      await sleep(first + WINDOW_MS + 200 - Date.now());
      const times = renewalTimes(emu, grant).filter((t) => t <= first + WINDOW_MS);
      // One renewer: a renewal every cadence, or a sweep later when the jitter drawn was short; never sooner
      // than the cadence less the jitter.
      const fewest = Math.ceil(WINDOW_MS / (CADENCE_MS + 1000));
      const most = Math.floor(WINDOW_MS / (CADENCE_MS - JITTER_MAX_MS - 100)) + 1;
      console.log(
        `${group.length} replicas: ${times.length} renewals in ${WINDOW_MS} ms (one renewer: ${fewest}-${most}); gaps ${gaps(times).join(', ')} ms; ` +
          `renewed by ${group.map((r) => `${r.name} ×${r.lines().filter((l) => l.msg.startsWith('renewed the access token')).length}`).join(', ')}`,
      );
      // Two replicas renewing the same token would show as two renewals a few milliseconds apart.
      for (const gap of gaps(times)) expect(gap, 'time between two renewals').toBeGreaterThan(MARGIN_S * 1000);
      expect(times.length).toBeGreaterThanOrEqual(fewest);
      expect(times.length).toBeLessThanOrEqual(most);
      expect(Math.min(...gaps(times))).toBeGreaterThanOrEqual(CADENCE_MS - JITTER_MAX_MS - 100);
      // Exactly the renewals the replicas report: nothing renewed outside them. A replica logs its renewal a few
      // milliseconds after the emulator issued the token, so the two counts are compared once they settle.
      const reported = (): number => group.reduce((n, r) => n + r.lines().filter((l) => l.msg.startsWith('renewed the access token')).length, 0);
      await waitFor('every renewal reported', () => (reported() === renewalTimes(emu, grant).length ? true : undefined), 5_000);
      expect(connectorsNamed(emu, `conn-${profile}`)).toHaveLength(1);
      await allReady(group, 3_000);
      for (const replica of group) {
        const { body } = await replica.readyz();
        expect(body).toMatchObject({ ready: true, coordinator: 'available', profiles: { [profile]: { ready: true } } });
      }
    } catch (error) {
      for (const replica of group) console.log(replica.describe());
      throw error;
    }
  }

  it('two replicas: each renewal happens once', async () => {
    const { emu, grant, replicas: group } = await world('pair', 2);
    await checkSteadyState(emu, grant, group, 'pair');
  }, 40_000);

  it('three replicas: each renewal happens once; without Redis nobody renews, and with Redis back one does', async () => {
    const { emu, grant, replicas: group } = await world('trio', 3);
    await checkSteadyState(emu, grant, group, 'trio');

    try {
      // Take Redis away right after a renewal, so that the token falls due (and expires) during the outage.
      const before = renewalTimes(emu, grant).length;
      await waitFor('the next renewal', () => (renewalTimes(emu, grant).length > before ? true : undefined), CADENCE_MS + 2_000);
      await redis.kill();
      const downAt = Date.now();
      const requestsAt = emu.state.requests.length;

      for (const replica of group) {
        await waitFor(`${replica.name} to report Redis unreachable on /readyz`, async () => {
          const { status, body } = await replica.readyz();
          return status === 503 && body.coordinator === 'unreachable' && body.ready === false ? true : undefined;
        }, 5_000);
      }
      // Long enough for the token to fall due and expire: every replica would renew now if it dared.
      await sleep(downAt + LIFETIME_S * 1000 + 1_500 - Date.now());
      const outage = emu.state.requests.slice(requestsAt).filter((r) => r.route === 'token');
      console.log(`outage of ${Date.now() - downAt} ms: ${outage.length} token requests`);
      expect(outage).toEqual([]);
      for (const replica of group) {
        expect(replica.logged('Redis is unreachable: no renewals on this replica until it is back')).toBe(true);
        expect(replica.logged('the coordinator is unreachable: this replica renews nothing until it is back')).toBe(true);
        const { status, body } = await replica.readyz();
        expect(status).toBe(503);
        expect(body.coordinator).toBe('unreachable');
      }

      await redis.restart();
      const upAt = Date.now();
      await allReady(group, 8_000);
      const after = renewalTimes(emu, grant).filter((t) => t >= upAt);
      console.log(`Redis back: ready again after ${Date.now() - upAt} ms, ${after.length} renewal(s) since`);
      expect(after.length).toBeGreaterThanOrEqual(1);
      for (const replica of group) {
        expect(replica.logged('Redis is reachable again')).toBe(true);
        const { body } = await replica.readyz();
        expect(body).toMatchObject({ ready: true, coordinator: 'available', profiles: { trio: { ready: true } } });
      }
      // Every replica found the token expired when Redis came back; still only one of them renewed it.
      await sleep(1_500);
      const recovered = renewalTimes(emu, grant).filter((t) => t >= upAt);
      for (const gap of gaps(recovered)) expect(gap).toBeGreaterThan(MARGIN_S * 1000);
      expect(connectorsNamed(emu, 'conn-trio')).toHaveLength(1);
    } catch (error) {
      for (const replica of group) console.log(replica.describe());
      throw error;
    }
  }, 60_000);
});
