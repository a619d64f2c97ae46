// A world for daemon tests: an emulator and a daemon sharing one hand-moved clock, grants obtained through the
// real OAuth flow, a private config dir, captured log lines, and accessors that read the emulator's truth
// (which token is live, what the connector holds) to check the daemon against.
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import type { DaemonGrant, DaemonOptions, DaemonProfile, RunningDaemon } from '../../src/daemon/index.js';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator } from '../../src/emulator/index.js';
import type { EmulatorApp, EmulatorOptions, IssuedAccessToken, RunningEmulator, StoredSource } from '../../src/emulator/index.js';
import { createLogger, type Logger } from '../../src/log.js';
import { exchangeCode } from '../../src/oauth/index.js';
import { openProfileStore, type ProfileStore } from '../../src/profile/index.js';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { memoryCoordinator, obtainGrant as obtainGrantWith, type MemoryRedis } from '../helpers/replicas.mjs';

export const REDIRECT = DEFAULT_APP.redirectUris[0] as string;
export const START = Date.parse('2030-01-01T00:00:00Z');

export interface Clock {
  now: () => number;
  advance: (ms: number) => void;
  /** Waits on this clock: moves it, then yields once, so a rate gate's wait costs no real time. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** A wall clock and a monotonic reading that move together (a host whose clock is not stepped): `sleep` moves both. */
export interface VirtualClocks extends Clock {
  monotonicNow: () => number;
}

export function virtualClocks(start = START): VirtualClocks {
  const wall = fakeClock(start);
  let mono = 0;
  const advance = (ms: number): void => {
    wall.advance(ms);
    mono += ms;
  };
  return {
    now: wall.now,
    monotonicNow: () => mono,
    advance,
    sleep: async (ms: number) => {
      advance(ms);
      await Promise.resolve();
    },
  };
}

/**
 * What an in-process daemon among several of these tests starts with: sweeps driven by hand, checks off, the
 * renewal margin's default, both clocks virtual (a cap's waits move them, not real time), its lines tagged `id`.
 */
export function handDrivenOptions(id: string, world: { clocks: VirtualClocks; log: CapturedLog }) {
  const { clocks, log } = world;
  return {
    renewMarginMs: 15 * 60_000,
    schedule: false,
    checkIntervalMs: 0,
    logger: log.logger.child({ replica: id }),
    now: clocks.now,
    monotonicNow: clocks.monotonicNow,
    sleep: clocks.sleep,
    random: seededRandom(),
  } satisfies Partial<DaemonOptions>;
}

/** The same, as a fleet replica over the Redis stand-in without timers (its heartbeat rides the sweeps). */
export function fleetReplicaOptions(id: string, world: { clocks: VirtualClocks; log: CapturedLog; redis: MemoryRedis; grantKey: Buffer; leaseMs: number; fallbackMs: number }) {
  const { clocks, redis, grantKey, leaseMs, fallbackMs } = world;
  return {
    ...handDrivenOptions(id, world),
    coordinator: memoryCoordinator(redis, id, CoordinatorUnavailableError, clocks.now),
    grantKey,
    fleet: { timers: false, leaseMs, fallbackMs },
  } satisfies Partial<DaemonOptions>;
}

export function fakeClock(start = START): Clock {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
    sleep: async (ms) => {
      t += ms;
      await Promise.resolve();
    },
  };
}

/** Deterministic numbers in [0, 1) (a linear congruential generator), so a failing run can be repeated. */
export function seededRandom(seed = 42): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

export interface CapturedLog {
  logger: Logger;
  lines: string[];
  records(): Record<string, unknown>[];
}

export function captureLog(level: 'debug' | 'info' | 'trace' = 'debug'): CapturedLog {
  const lines: string[] = [];
  const logger = createLogger({ level, destination: { write: (line: string) => void lines.push(line) } });
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

export function tempDir(prefix = 'syncauth-daemon-'): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

export async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const emu = await startEmulator({ autoApprove: true, ...options });
  cleanups.push(() => emu.close());
  return emu;
}

/** A grant of `app` on the emulator, through the authorize page (auto-approved) and the code exchange. */
export function obtainGrant(emu: RunningEmulator, app: EmulatorApp = DEFAULT_APP): Promise<DaemonGrant> {
  return obtainGrantWith(emu, app, exchangeCode);
}

export interface ProfileSpec {
  name: string;
  grant: DaemonGrant;
  /** Reconcile a connector `conn-<name>` (and wire the workflow when given). */
  reconcile?: boolean | { workflowId?: string };
}

export function profileOf(emu: RunningEmulator, spec: ProfileSpec, apiKey = DEFAULT_EMULATOR_API_KEY): DaemonProfile {
  const wf = typeof spec.reconcile === 'object' ? spec.reconcile.workflowId : undefined;
  return {
    name: spec.name,
    tokenUrl: emu.tokenUrl,
    grant: spec.grant,
    ...(spec.reconcile
      ? {
          reconcile: {
            baseUrl: emu.url,
            apiKey,
            connectorName: `conn-${spec.name}`,
            remoteUrl: 'dropbox://data',
            recursive: false,
            ...(wf ? { workflow: { id: wf } } : {}),
          },
        }
      : {}),
  };
}

export interface World {
  emu: RunningEmulator;
  clock: Clock;
  store: ProfileStore;
  configDir: string;
  log: CapturedLog;
  daemon: RunningDaemon;
  /** The grants the daemon's readGrant() returns; change one to simulate new stored secrets. */
  grants: Map<string, DaemonGrant>;
}

export interface WorldOptions {
  profiles: number | string[];
  lifetimeSeconds?: number;
  reconcile?: boolean;
  /** Wire the seeded workflow to the first profile's connector. */
  workflow?: boolean;
  emulator?: EmulatorOptions;
  daemon?: Partial<DaemonOptions>;
  /** Real time instead of the hand-moved clock. */
  realClock?: boolean;
  /** The service API key the profiles reconcile with. */
  apiKey?: string;
}

export async function startWorld(options: WorldOptions): Promise<World> {
  const clock = options.realClock ? { now: Date.now, advance: () => undefined, sleep: undefined } : fakeClock();
  const emu = await emulator({
    tokenLifetimeSeconds: options.lifetimeSeconds ?? 20,
    ...(options.realClock ? {} : { now: clock.now }),
    ...options.emulator,
  });
  const names = typeof options.profiles === 'number' ? Array.from({ length: options.profiles }, (_, i) => `p${i + 1}`) : options.profiles;
  const grants = new Map<string, DaemonGrant>();
  for (const name of names) grants.set(name, await obtainGrant(emu, options.emulator?.apps?.[0] ?? DEFAULT_APP));
  const configDir = tempDir();
  const store = openProfileStore(configDir);
  const log = captureLog();
  const profiles = (): Promise<DaemonProfile[]> =>
    Promise.resolve(
      names.map((name, i) => ({
        ...profileOf(emu, {
          name,
          grant: grants.get(name) as DaemonGrant,
          ...(options.reconcile ? { reconcile: i === 0 && options.workflow && emu.seeded ? { workflowId: emu.seeded.workflowId } : true } : {}),
        }, options.apiKey),
        readGrant: async () => grants.get(name) as DaemonGrant,
      })),
    );
  const daemon = await startDaemon({
    profiles,
    profileStore: store,
    renewMarginMs: 5_000,
    schedule: false,
    logger: log.logger,
    now: clock.now,
    random: seededRandom(),
    ...(clock.sleep ? { sleep: clock.sleep } : {}),
    backoff: { baseMs: 500 },
    serviceRetry: { retries: 0 },
    ...options.daemon,
  });
  cleanups.push(() => daemon.close());
  return { emu, clock: { ...clock, sleep: clock.sleep ?? (async () => undefined) }, store, configDir, log, daemon, grants };
}

/** Sweeps, then moves the clock by `stepMs`, `steps` times; `check` runs after each sweep. */
export async function drive(world: World, steps: number, stepMs: number, check?: (step: number) => void | Promise<void>): Promise<void> {
  for (let step = 0; step < steps; step++) {
    await world.daemon.sweep();
    await check?.(step);
    world.clock.advance(stepMs);
  }
}

function grantIdOf(emu: RunningEmulator, refreshToken: string): string {
  const grant = [...emu.state.grants.values()].find((g) => g.refreshToken === refreshToken);
  if (!grant) throw new Error('no such grant');
  return grant.id;
}

/** Access tokens issued for the grant, in order; the first came from the code exchange. */
export function tokensOf(emu: RunningEmulator, refreshToken: string): IssuedAccessToken[] {
  const id = grantIdOf(emu, refreshToken);
  return [...emu.state.accessTokens.values()].filter((t) => t.grantId === id);
}

/** Renewals of the grant so far (every token but the exchange's). */
export function renewalsOf(emu: RunningEmulator, refreshToken: string): number {
  return tokensOf(emu, refreshToken).length - 1;
}

export function latestTokenOf(emu: RunningEmulator, refreshToken: string): IssuedAccessToken | undefined {
  return tokensOf(emu, refreshToken).at(-1);
}

export function tokenRequests(emu: RunningEmulator): number {
  return emu.state.requests.filter((r) => r.route === 'token').length;
}

/** The dropbox connectors of the default workspace whose name belongs to `base` (or its replacements). */
export function connectorsNamed(emu: RunningEmulator, base: string): StoredSource[] {
  const ws = emu.state.workspaces.get('default');
  return [...(ws?.sources.values() ?? [])].filter((s) => s.name === base || new RegExp(`^${base}-\\d{14}$`).test(s.name));
}

/**
 * A token endpoint in front of the emulator's that rotates: each answer carries a new refresh token
 * (`rotated-refresh-token-<n>-…`, unique to the run), which it maps back to the emulator's grant on the next
 * request. It records the refresh tokens it was sent and those it issued.
 */
export async function rotatingTokenEndpoint(emu: RunningEmulator): Promise<{ url: string; sent: string[]; issued: string[]; close: () => Promise<void> }> {
  const original = new Map<string, string>();
  const sent: string[] = [];
  const issued: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const given = form.get('refresh_token') ?? '';
      sent.push(given);
      form.set('refresh_token', original.get(given) ?? given);
      void fetch(emu.tokenUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() }).then(async (answer) => {
        const json = (await answer.json()) as Record<string, unknown>;
        if (answer.ok) {
          const rotated = `rotated-refresh-token-${issued.length + 1}-${Math.random().toString(36).slice(2)}${'x'.repeat(30)}`;
          original.set(rotated, form.get('refresh_token') ?? '');
          issued.push(rotated);
          json.refresh_token = rotated;
        }
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`,
    sent,
    issued,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * The emulator's token endpoint behind a door that answers 503 for the refresh tokens in `failing`, and counts
 * every call by refresh token, on the test's clock.
 */
export async function failingDoor(emu: RunningEmulator, now: () => number): Promise<{ url: string; failing: Set<string>; calls: Map<string, number[]>; close: () => Promise<void> }> {
  const failing = new Set<string>();
  const calls = new Map<string, number[]>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const refreshToken = new URLSearchParams(body).get('refresh_token') ?? '';
      calls.set(refreshToken, [...(calls.get(refreshToken) ?? []), now()]);
      if (failing.has(refreshToken)) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('unavailable');
        return;
      }
      void fetch(emu.tokenUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body }).then(async (answer) => {
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`,
    failing,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
