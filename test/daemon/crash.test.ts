// `kill -9` of the real `syncauth daemon` process at random moments of its renewals and reconciles, over and
// over: the refresh token is never lost, the state file always parses, and no second connector appears.
//
// The daemon serves one profile set up with the encrypted file store. Tokens live 2 s and the margin is 3 s, so
// every one-second sweep renews, stores the rotated refresh token and reconciles the connector. Its requests go
// through a gateway in this process that
//   - rotates the refresh token on every renewal, as an OAuth server with rotation does (the emulator, like
//     Dropbox, does not): a refresh token dies once its successor has been used, so a daemon that used a new
//     refresh token before storing it, or stored it torn, loses the grant;
//   - records which requests were in flight when the process was killed, and lets them finish upstream (a
//     request the server received is processed whether or not its client lives).
// The emulator's latency faults on the token and sources routes stretch each request so that kills land inside
// them; some runs start with the connector deleted at the service, so that kills also land between creating a
// replacement and recording its id.
//
// A lock left by a killed process is taken over once it is 10 s stale. Rather than wait 10 s after each kill,
// the test ages the lock directories (their mtime is what the stale-time rule reads), as if that time had passed.
//
// Kill timings come from a seeded generator; the seed is printed, and SYNCAUTH_CRASH_SEED=<seed> repeats the
// choices (not the timing of the processes, which the machine decides).
import { spawn } from 'node:child_process';
import { existsSync, lutimesSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSecretStore, type StoredSecrets } from '../../src/credentials/index.js';
import { routeOf } from '../../src/emulator/faults.js';
import type { EmulatorRoute, StoredSource } from '../../src/emulator/index.js';
import { ProfileStateSchema, type ProfileState } from '../../src/profile/index.js';
import { CLI } from '../helpers/cli.js';
import { grantRefreshToken, newHome, onboardingEnv, runCli, startOnboarding, type Home, type Onboarding } from '../helpers/onboarding.js';
import { seededRandom } from './helpers.js';

const PROFILE = 'docs';
const CONNECTOR = 'crash-docs';
const KILLS = 50;
const LIFETIME_S = 2;
const MARGIN_S = 3;
/** The profile store's and the file store's stale time: a lock not refreshed this long is taken over. */
const LOCK_STALE_MS = 10_000;
const SEED = Number(process.env.SYNCAUTH_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31));

// ---- the gateway: refresh-token rotation and a record of what was in flight ----

interface InFlight {
  route: EmulatorRoute;
  method: string;
}

type GatewayEvent = 'request' | 'response';

class Gateway {
  url = '';
  private readonly listeners = new Set<(event: GatewayEvent, entry: InFlight) => void>();
  private server: Server | undefined;
  private readonly inflight = new Set<InFlight>();
  private idle: (() => void)[] = [];
  /** Refresh token -> generation; the real one is generation 0. */
  private readonly generation = new Map<string, number>();
  private newest = 0;
  /** Refresh tokens of a lower generation are dead: a later one has been used. */
  private revokedBelow = 0;
  rotations = 0;

  constructor(private readonly upstream: string, private readonly realRefreshToken: string, private readonly random: () => number) {
    this.generation.set(realRefreshToken, 0);
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  /** What was in flight right now. */
  snapshot(): InFlight[] {
    return [...this.inflight];
  }

  /** Resolves once every request received so far has been answered upstream. */
  settled(): Promise<void> {
    if (this.inflight.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Resolves when a request matching `match` arrives (`request`) or has been answered (`response`). */
  next(event: GatewayEvent, match: (entry: InFlight) => boolean, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const listener = (seen: GatewayEvent, entry: InFlight): void => {
        if (seen !== event || !match(entry)) return;
        finish(true);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      const finish = (happened: boolean): void => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        resolve(happened);
      };
      this.listeners.add(listener);
    });
  }

  private emit(event: GatewayEvent, entry: InFlight): void {
    for (const listener of [...this.listeners]) listener(event, entry);
  }

  /** Whether `refreshToken` would renew: issued here (or the original) and not superseded by a used successor. */
  isLive(refreshToken: string): boolean {
    const generation = this.generation.get(refreshToken);
    return generation !== undefined && generation >= this.revokedBelow;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const entry: InFlight = { route: routeOf((req.url ?? '/').split('?')[0] ?? '/'), method: req.method ?? 'GET' };
    this.inflight.add(entry);
    this.emit('request', entry);
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      let body: Buffer | undefined = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
      let generation: number | undefined;
      if (entry.route === 'token' && body) {
        const form = new URLSearchParams(body.toString('utf8'));
        const presented = form.get('refresh_token');
        if (form.get('grant_type') === 'refresh_token' && presented !== null) {
          generation = this.generation.get(presented);
          if (generation !== undefined && generation < this.revokedBelow) {
            send(res, 400, 'application/json', JSON.stringify({ error: 'invalid_grant', error_description: 'refresh token is invalid or revoked' }));
            return;
          }
          if (generation !== undefined) {
            form.set('refresh_token', this.realRefreshToken);
            body = Buffer.from(form.toString(), 'utf8');
          }
        }
      }
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && !['host', 'connection', 'content-length', 'keep-alive', 'transfer-encoding'].includes(name)) headers[name] = value;
      }
      const answer = await fetch(`${this.upstream}${req.url ?? '/'}`, { method: entry.method, headers, ...(body ? { body } : {}) });
      let text = await answer.text();
      if (generation !== undefined && answer.status === 200) {
        // The presented token was used: every older one dies, and a successor is handed out.
        this.revokedBelow = Math.max(this.revokedBelow, generation);
        this.newest += 1;
        this.rotations += 1;
        const successor = `${this.realRefreshToken.slice(0, 11)}AAAAAAAAAArot${this.newest}x${Math.floor(this.random() * 2 ** 32).toString(36)}`;
        this.generation.set(successor, this.newest);
        text = JSON.stringify({ ...(JSON.parse(text) as Record<string, unknown>), refresh_token: successor });
      }
      send(res, answer.status, answer.headers.get('content-type') ?? 'text/plain', text, answer.headers.get('retry-after'));
      this.emit('response', entry);
    } catch {
      if (!res.headersSent) send(res, 502, 'text/plain', 'bad gateway');
    } finally {
      this.inflight.delete(entry);
      if (this.inflight.size === 0) for (const resolve of this.idle.splice(0)) resolve();
    }
  }
}

function send(res: ServerResponse, status: number, type: string, body: string, retryAfter?: string | null): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': type, ...(retryAfter ? { 'retry-after': retryAfter } : {}) });
  res.end(body);
}

// ---- the daemon process ----

interface DaemonRun {
  /** Resolves with the start line's time, or rejects if the process ends first. */
  started: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
  /** The log lines so far. */
  lines(): { msg: string; action?: string; connectorId?: string; level: number }[];
  output(): string;
}

/** Daemons not yet seen to exit: a failed assertion must not leave one running (afterAll kills them). */
const running = new Set<DaemonRun>();

function runDaemon(home: Home, gateway: Gateway): DaemonRun {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home.dir,
    SYNCAUTH_CONFIG_DIR: home.configDir,
    SYNCAUTH_STORE: 'file',
    SYNCAUTH_STORE_KEY: home.storeKey,
    // Over the profile's stored URLs, as an explicit act: every request goes through the gateway.
    SYNCAUTH_TOKEN_URL: `${gateway.url}/oauth2/token`,
    SYNCAUTH_BASE_URL: gateway.url,
    SYNCAUTH_ENDPOINT_OVERRIDE: '1',
  };
  const child = spawn(process.execPath, [CLI, 'daemon', '--sweep', '* * * * * *', '--renew-margin', String(MARGIN_S), '--log-level', 'debug'], {
    cwd: home.dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onLine: (() => void) | undefined;
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    onLine?.();
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  const started = new Promise<void>((resolve, reject) => {
    onLine = () => {
      if (stdout.includes('daemon started')) resolve();
    };
    void exited.then(() => reject(new Error(`the daemon exited before starting:\n${stdout}\n${stderr}`)));
  });
  started.catch(() => undefined);
  const run: DaemonRun = {
    started,
    exited,
    kill: (signal) => child.kill(signal),
    lines: () =>
      stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; level: number }),
    output: () => `stdout:\n${stdout}\nstderr:\n${stderr}`,
  };
  running.add(run);
  void exited.then(() => running.delete(run));
  return run;
}

// ---- what must hold after every kill ----

function family(ob: Onboarding): StoredSource[] {
  const ws = ob.emulator.state.workspaces.get('default');
  return [...(ws?.sources.values() ?? [])].filter((s) => s.type === 'dropbox' && (s.name === CONNECTOR || new RegExp(`^${CONNECTOR}-\\d{14}$`).test(s.name)));
}

function readState(home: Home): ProfileState {
  const text = readFileSync(path.join(home.configDir, 'profiles', `${PROFILE}.json`), 'utf8');
  return ProfileStateSchema.parse(JSON.parse(text));
}

/**
 * The secrets in the encrypted store. One store object for the whole test: it keeps the key derived from the
 * file's salt (which rewrites keep), so each read costs a decryption, not a key derivation; a torn or foreign
 * file still fails to decrypt.
 */
function secretReader(home: Home): () => Promise<StoredSecrets> {
  const store = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
  return () => store.get(PROFILE);
}

/** Renews with `refreshToken` through the gateway, as a restarted daemon would. */
async function renews(gateway: Gateway, ob: Onboarding, refreshToken: string): Promise<number> {
  const res = await fetch(`${gateway.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: ob.app.appKey, client_secret: ob.app.appSecret }).toString(),
  });
  await res.text();
  return res.status;
}

/** Locks under `dir` (a killed holder leaves them behind): links, and an earlier release's directories. */
function lockDirs(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.name.endsWith('.lock') && (entry.isSymbolicLink() || entry.isDirectory())) out.push(full);
    else if (entry.isDirectory()) out.push(...lockDirs(full));
  }
  return out;
}

interface Target {
  name: string;
  event: GatewayEvent;
  route: EmulatorRoute;
  method: string;
  /** For a kill after the answer: within this many milliseconds of it. */
  afterMs: number;
  /** Delete the connector first, so that the run creates one. */
  deleted: boolean;
}

const TARGETS: Target[] = [
  { name: 'connector POST in flight', event: 'request', route: 'sources', method: 'POST', afterMs: 0, deleted: true },
  { name: 'token request in flight', event: 'request', route: 'token', method: 'POST', afterMs: 0, deleted: false },
  { name: 'storing the rotated refresh token', event: 'response', route: 'token', method: 'POST', afterMs: 150, deleted: false },
  { name: 'connector PUT in flight', event: 'request', route: 'sources', method: 'PUT', afterMs: 0, deleted: false },
  { name: 'recording a created connector', event: 'response', route: 'sources', method: 'POST', afterMs: 30, deleted: true },
];

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('kill -9 of the daemon during renewal and reconcile', () => {
  let ob: Onboarding;
  let gateway: Gateway;
  let home: Home;

  beforeAll(async () => {
    ob = await startOnboarding({ emulator: { tokenLifetimeSeconds: LIFETIME_S } });
    home = newHome();
    const refreshToken = await grantRefreshToken(ob);
    const setup = await runCli(['setup', '--yes', '--json', '--connector-name', CONNECTOR], {
      env: onboardingEnv(ob, home, { SYNCAUTH_PROFILE: PROFILE, SYNCAUTH_REFRESH_TOKEN: refreshToken }),
      cwd: home.dir,
    });
    if (setup.code !== 0) throw new Error(`setup failed (${setup.code}):\n${setup.stdout}\n${setup.stderr}`);
    gateway = new Gateway(ob.emulator.url, refreshToken, seededRandom(SEED));
    await gateway.start();
  });
  afterAll(async () => {
    for (const run of running) run.kill('SIGKILL');
    await Promise.all([...running].map((run) => run.exited));
    await gateway?.stop();
    await ob?.emulator.close();
  });

  it(`never loses the refresh token, never leaves a torn state file or a second connector (${KILLS} kills)`, async () => {
    const random = seededRandom(SEED);
    const storedSecrets = secretReader(home);
    const { refresh_token: _first, ...others } = await storedSecrets();
    expect(Object.keys(others).sort()).toEqual(['api_key', 'app_key', 'app_secret']);
    let orphan: string | undefined;
    const startedAt = Date.now();
    console.log(`crash.test.ts: seed ${SEED} (repeat the choices with SYNCAUTH_CRASH_SEED=${SEED})`);
    const landed: Record<string, number> = {};
    const count = (what: string): void => void (landed[what] = (landed[what] ?? 0) + 1);
    let orphans = 0;
    let deletions = 0;
    let completedCycles = 0;
    let lockedKills = 0;
    const startTimes: number[] = [];
    const checkTimes: number[] = [];
    const mean = (xs: number[]): number => Math.round(xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length));

    for (let i = 0; i < KILLS; i++) {
      // This run's network: sometimes the token request is the slow part, sometimes the connector's PUT/POST.
      const shape = random();
      const tokenLatency = Math.round(shape < 0.35 ? 200 + random() * 100 : 50 + random() * 150);
      const sourcesLatency = Math.round(shape >= 0.65 ? 200 + random() * 100 : 50 + random() * 150);
      ob.emulator.setFaults([
        { route: 'token', latencyMs: tokenLatency },
        { route: 'sources', latencyMs: sourcesLatency },
      ]);
      // Every fifth run is killed at a chosen moment, so that each window is hit whatever the timing; the
      // others at a random one.
      const target = i % 5 === 4 ? TARGETS[Math.floor(i / 5) % TARGETS.length] : undefined;
      // Someone deletes the connector at the service: this run recreates it (POST) and records the new id.
      if (target?.deleted ?? random() < 0.15) {
        for (const source of family(ob)) ob.emulator.state.workspaces.get('default')?.sources.delete(source.id);
        deletions += 1;
      }
      // Mostly after the start line (the first sweep is already renewing then), sometimes during start-up.
      const duringStart = !target && random() < 0.1;
      const delay = Math.round(duringStart ? 50 + random() * 300 : random() * 1_000);
      const moment = target
        ? gateway.next(target.event, (e) => e.route === target.route && e.method === target.method, 8_000)
        : undefined;

      const spawnedAt = Date.now();
      const run = runDaemon(home, gateway);
      if (!duringStart) {
        try {
          await run.started;
        } catch (error) {
          throw new Error(`run ${i}: ${(error as Error).message}`, { cause: error });
        }
        startTimes.push(Date.now() - spawnedAt);
      }
      if (target) {
        expect(await moment, `run ${i}: ${target.name} never happened:\n${run.output()}`).toBe(true);
        // Inside the request's latency, or just after its answer.
        const latency = target.route === 'token' ? tokenLatency : sourcesLatency;
        await sleep(Math.round(target.event === 'request' ? random() * latency * 0.8 : random() * target.afterMs));
      } else {
        await sleep(delay);
      }
      const inflight = gateway.snapshot();
      run.kill('SIGKILL');
      const { signal } = await run.exited;
      expect(signal, run.output()).toBe('SIGKILL');
      const locks = lockDirs(home.configDir);
      if (locks.length > 0) lockedKills += 1;
      const token = inflight.find((r) => r.route === 'token');
      const source = inflight.find((r) => r.route === 'sources');
      if (target) count(`aimed: ${target.name}`);
      else if (token) count('renewal (token request in flight)');
      else if (source) count(`reconcile (${source.method} /sources in flight)`);
      else if (locks.length > 0) count('renewal or reconcile, between requests (lock held)');
      else count(duringStart ? 'start-up' : 'between cycles');

      const checkedAt = Date.now();
      // What the killed process sent still reaches the emulator; wait for it, without delays.
      await gateway.settled();
      ob.emulator.setFaults([]);

      // The state file parses, whole.
      const state = readState(home);
      expect(state.needsReauthorization, `run ${i}: the state asks for re-authorization`).not.toBe(true);
      // The secret store opens, holds every secret, and its refresh token still renews.
      // The last access token is kept beside them; whichever a kill left there, it is no grant.
      const { refresh_token: refreshToken, access_token: _lastAccessToken, ...rest } = await storedSecrets();
      expect(rest, `run ${i}: the other secrets`).toEqual(others);
      expect(refreshToken, `run ${i}: the stored refresh token`).toBeDefined();
      expect(gateway.isLive(refreshToken as string), `run ${i}: the stored refresh token was superseded by one that was used (lost)`).toBe(true);
      expect(await renews(gateway, ob, refreshToken as string), `run ${i}: renewing with the stored refresh token`).toBe(200);
      // Never two connectors; one whose id was not yet recorded is an orphan the next cycle must adopt.
      const connectors = family(ob);
      expect(connectors.length, `run ${i}: connectors of the family`).toBeLessThanOrEqual(1);
      const unrecorded = connectors[0] && connectors[0].id !== state.connectorId ? connectors[0].id : undefined;
      if (unrecorded && unrecorded !== orphan) orphans += 1;
      orphan = unrecorded;
      // A run that completed a reconcile left exactly one connector, the one its state records.
      const reconciled = run.lines().some((l) => l.msg === 'connector reconciled' || l.msg.startsWith(`connector of profile "${PROFILE}"`));
      if (reconciled) {
        completedCycles += 1;
        expect(connectors.map((c) => c.id), `run ${i}: after a completed reconcile`).toEqual([state.connectorId]);
      }

      checkTimes.push(Date.now() - checkedAt);
      // As if the stale time had passed since the kill: the next run takes the locks over at once.
      const past = new Date(Date.now() - LOCK_STALE_MS - 1_000);
      // lutimes: a lock is a symbolic link naming its holder (its own mtime is what is judged), or a directory.
      for (const lock of locks) lutimesSync(lock, past, past);
    }

    // A last run, left to complete a cycle and stopped gracefully: exactly one connector, the recorded one,
    // carrying the stored refresh token.
    const final = runDaemon(home, gateway);
    await final.started;
    const deadline = Date.now() + 10_000;
    let finalState: ProfileState | undefined;
    for (;;) {
      const reconciled = final.lines().some((l) => l.msg === 'connector reconciled' || l.msg.startsWith(`connector of profile "${PROFILE}"`));
      finalState = readState(home);
      if (reconciled && family(ob).length === 1 && family(ob)[0]?.id === finalState.connectorId) break;
      if (Date.now() > deadline) {
        const found = family(ob).map((c) => `${c.name} (${c.id})`).join(', ') || 'none';
        throw new Error(`the last run completed no reconcile within 10 s; connectors: ${found}; the state records ${finalState.connectorId ?? 'none'}\n${final.output()}`);
      }
      await sleep(50);
    }
    final.kill('SIGTERM');
    expect((await final.exited).code, final.output()).toBe(0);
    const connectors = family(ob);
    finalState = readState(home);
    const refreshToken = (await storedSecrets()).refresh_token;
    expect(connectors.map((c) => c.id)).toEqual([finalState.connectorId]);
    expect(connectors[0]?.config.refresh_token).toBe(refreshToken);
    expect(gateway.isLive(refreshToken as string)).toBe(true);
    expect(lockDirs(home.configDir)).toEqual([]);
    expect(final.lines().filter((l) => l.level >= 50)).toEqual([]);

    // Temporary files of atomic writes the kills interrupted: harmless (never read), but they pile up.
    const leftovers = [home.configDir, path.join(home.configDir, 'profiles')]
      .flatMap((dir) => readdirSync(dir, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name))
      .filter((name) => !['secrets.enc', `${PROFILE}.json`].includes(name));
    const seconds = ((Date.now() - startedAt) / 1000).toFixed(1);
    console.log(
      `crash.test.ts: ${KILLS} kills in ${seconds} s (seed ${SEED}); ${lockedKills} with the renewal/reconcile lock held; where they landed: ` +
        `${Object.entries(landed).map(([k, v]) => `${k} ${v}`).join(', ')}; refresh token rotated ${gateway.rotations} times; ` +
        `connector deleted before ${deletions} runs; ${orphans} kills left a connector created but not yet recorded (adopted afterwards); ` +
        `${completedCycles} runs completed a reconcile before their kill; a start took ${mean(startTimes)} ms and the checks ${mean(checkTimes)} ms on average; ` +
        `${leftovers.length} files left behind by interrupted writes${leftovers.length ? ` (${leftovers.join(', ')})` : ''}`,
    );
  }, 300_000);
});
