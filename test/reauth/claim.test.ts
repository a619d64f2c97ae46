// One link, two replicas, two callbacks at once: the link completes once. Two pages share the links (two
// replicas on one real redis-server; separately, two processes on one config dir), the link's page is opened on
// each, Dropbox (the emulator) is approved twice, and each replica gets its own callback at the same moment.
// Exactly one stores a grant and exchanges its code; the other answers "already under way" and leaves its code
// unused. A completion that stores nothing lets the claim go, and the same link then completes elsewhere; one
// whose claim lapsed before it stored stores nothing and revokes the grant it was given.
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { ReauthorizationResult, ReauthorizedGrant } from '../../src/reauth/grant.js';
import { DEFAULT_APP, startEmulator, type EmulatorApp, type RunningEmulator } from '../../src/emulator/index.js';
import { fileLinkStore, mintLink, type LinkStore } from '../../src/reauth/links.js';
import { RedisReauthStore } from '../../src/reauth/redis-store.js';
import { startReauthServer, type ReauthProfile } from '../../src/reauth/server.js';
import { ROOT, tempDir } from '../helpers/cli.js';
import { freePort } from '../helpers/onboarding.js';
import { redisAvailability, startRedisServer } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { captureLog } from '../daemon/helpers.js';
import { approveAt, hrefOf, pathOf } from './world.js';

const PROFILE = 'docs';
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
});

interface Answer {
  status: number;
  body: string;
}

/** A GET to a replica's listener, with the public URL's Host as the load balancer passes it. */
function get(port: number, host: string, target: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: target, headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function emulatorFor(publicUrl: string): Promise<{ emu: RunningEmulator; app: EmulatorApp; profile: ReauthProfile }> {
  const app: EmulatorApp = { ...DEFAULT_APP, redirectUris: [...DEFAULT_APP.redirectUris, `${publicUrl}/reauthorize/callback`] };
  const emu = await startEmulator({ apps: [app], autoApprove: false, tokenLifetimeSeconds: 600 });
  cleanups.push(() => emu.close());
  const profile: ReauthProfile = {
    name: PROFILE,
    appKey: app.appKey,
    appSecret: app.appSecret,
    authorizeUrl: emu.authorizeUrl,
    tokenUrl: emu.tokenUrl,
    apiUrl: emu.apiUrl,
    folder: 'dropbox://data',
    accountId: emu.state.account.accountId,
    access: 'read',
    writable: true,
  };
  return { emu, app, profile };
}

/** Opens the link's page on a replica and approves at Dropbox: the callback path Dropbox sends the browser to. */
async function callbackVia(port: number, host: string, link: string): Promise<string> {
  const page = await get(port, host, pathOf(link));
  expect(page.status, page.body).toBe(200);
  const back = await approveAt(hrefOf(page.body, 'authorize'));
  return pathOf(back.location as string);
}

/** Codes the emulator issued for these callbacks, and how many of them were exchanged. */
function exchanged(emu: RunningEmulator, callbacks: string[]): number {
  return callbacks.filter((cb) => emu.state.codes.get(new URL(cb, 'http://x').searchParams.get('code') as string)?.used === true).length;
}

/**
 * Both callbacks at once; the replica that stores waits (in `reauthorized`) until the other has answered, or
 * until the other stores too: the two completions overlap whatever the scheduling.
 */
async function race(sendA: () => Promise<Answer>, sendB: () => Promise<Answer>, open: () => void): Promise<Answer[]> {
  const answers = [sendA(), sendB()];
  void Promise.race(answers).then(open, open);
  return Promise.all(answers);
}

const redis = redisAvailability();

describe.skipIf(redis.skip)('two replicas on one Redis', () => {
  async function replicas(): Promise<{ emu: RunningEmulator; ports: number[]; host: string; publicUrl: string; stores: RedisReauthStore[]; raw: Redis; stored: ReauthorizedGrant[]; open: () => void; result: { next: ReauthorizationResult[] } }> {
    const server = await startRedisServer(redis);
    cleanups.push(() => server.kill());
    const ports = [await freePort(), await freePort()];
    const publicUrl = `http://127.0.0.1:${ports[0]}`;
    const host = new URL(publicUrl).host;
    const { emu, profile } = await emulatorFor(publicUrl);
    const stored: ReauthorizedGrant[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const result = { next: [] as ReauthorizationResult[] };
    const open = (): void => release();
    const reauthorized = async (_name: string, grant: ReauthorizedGrant): Promise<ReauthorizationResult> => {
      const outcome = result.next.shift() ?? { stored: true };
      if (outcome.stored) stored.push(grant);
      if (stored.length >= 2) release();
      await gate;
      return outcome;
    };
    const stores: RedisReauthStore[] = [];
    for (const port of ports) {
      const store = await RedisReauthStore.open({ url: server.url, keyPrefix: 'race', grantKey: Buffer.alloc(32, 0x43) });
      cleanups.push(() => store.close());
      stores.push(store);
      const page = await startReauthServer({
        listen: { host: '127.0.0.1', port },
        publicUrl,
        links: store.links,
        rounds: store.rounds,
        profile: async (name) => (name === PROFILE ? profile : undefined),
        reauthorized,
        log: captureLog('info').logger,
      });
      cleanups.push(() => page.close());
    }
    const raw = new Redis(server.url);
    cleanups.push(() => raw.disconnect());
    return { emu, ports, host, publicUrl, stores, raw, stored, open, result };
  }

  it('two callbacks of one link on two replicas at once: one grant stored, one code exchanged, the other told it is under way', async () => {
    const world = await replicas();
    const [a, b] = world.ports as [number, number];
    const { url: link } = await mintLink((world.stores[0] as RedisReauthStore).links, { profile: PROFILE, publicUrl: world.publicUrl });
    const callbacks = [await callbackVia(a, world.host, link), await callbackVia(b, world.host, link)];
    const answers = await race(() => get(a, world.host, callbacks[0] as string), () => get(b, world.host, callbacks[1] as string), world.open);

    expect(world.stored).toHaveLength(1);
    expect(exchanged(world.emu, callbacks)).toBe(1);
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toEqual([200, 409]);
    expect(answers.find((answer) => answer.status === 200)?.body).toContain('syncauth is authorized again');
    expect(answers.find((answer) => answer.status === 409)?.body).toContain('Already under way');
    // The link is spent, and no claim is left behind.
    expect((await get(b, world.host, pathOf(link))).status).toBe(404);
    expect(await world.raw.keys('race:reauth:claim:*')).toEqual([]);
  });

  it('a completion that stores nothing lets the claim go: the same link then completes on the other replica', async () => {
    const world = await replicas();
    world.open();
    const [a, b] = world.ports as [number, number];
    const { url: link } = await mintLink((world.stores[0] as RedisReauthStore).links, { profile: PROFILE, publicUrl: world.publicUrl });
    world.result.next.push({ stored: false, error: 'the store did not answer' });
    const failed = await get(a, world.host, await callbackVia(a, world.host, link));
    expect(failed.body).toContain('the link still works');
    expect(await world.raw.keys('race:reauth:claim:*')).toEqual([]);
    const done = await get(b, world.host, await callbackVia(b, world.host, link));
    expect(done.body).toContain('syncauth is authorized again');
    expect(world.stored).toHaveLength(1);
  });
});

/** A page in a process of its own over `configDir`'s links, its new grants counted in `calls`, held until `go` exists. */
const CHILD = `
import { appendFileSync, existsSync } from 'node:fs';
const [{ startReauthServer }, { fileLinkStore }] = await Promise.all([import(process.env.DIST + '/reauth/server.js'), import(process.env.DIST + '/reauth/links.js')]);
let input = '';
for await (const chunk of process.stdin) input += chunk;
const cfg = JSON.parse(input);
const quiet = () => undefined;
const log = { trace: quiet, debug: quiet, info: quiet, warn: quiet, error: (fields) => process.stderr.write(JSON.stringify(fields) + '\\n'), fatal: quiet };
log.child = () => log;
const server = await startReauthServer({
  listen: { host: '127.0.0.1', port: cfg.port },
  publicUrl: cfg.publicUrl,
  links: fileLinkStore(cfg.configDir),
  profile: async (name) => (name === cfg.profile.name ? cfg.profile : undefined),
  reauthorized: async () => {
    appendFileSync(cfg.calls, process.pid + '\\n');
    while (!existsSync(cfg.go)) await new Promise((resolve) => setTimeout(resolve, 20));
    return { stored: true };
  },
  log,
});
process.stdout.write('ready ' + server.url + '\\n');
`;

describe('two processes on one config dir', () => {
  it('two callbacks of one link, one to each process, at once: one grant stored, one code exchanged', async () => {
    const dir = tempDir('syncauth-claim-');
    const configDir = path.join(dir, 'config');
    const calls = path.join(dir, 'calls');
    const go = path.join(dir, 'go');
    writeFileSync(calls, '');
    const ports = [await freePort(), await freePort()] as [number, number];
    const publicUrl = `http://127.0.0.1:${ports[0]}`;
    const host = new URL(publicUrl).host;
    const { emu, profile } = await emulatorFor(publicUrl);
    const links: LinkStore = fileLinkStore(configDir);
    const { url: link } = await mintLink(links, { profile: PROFILE, publicUrl });

    // This process is one replica.
    const log = captureLog('info');
    const page = await startReauthServer({
      listen: { host: '127.0.0.1', port: ports[0] },
      publicUrl,
      links,
      profile: async (name) => (name === PROFILE ? profile : undefined),
      reauthorized: async () => {
        appendFileSync(calls, `${process.pid}\n`);
        await waitFor('the go-ahead', () => (existsSync(go) ? true : undefined), 60_000);
        return { stored: true };
      },
      log: log.logger,
    });
    cleanups.push(() => page.close());
    // A second process is the other.
    const scriptFile = path.join(dir, 'page.mjs');
    writeFileSync(scriptFile, CHILD);
    const child = spawn(process.execPath, [scriptFile], { env: { PATH: process.env.PATH ?? '', DIST: path.join(ROOT, 'dist') }, stdio: ['pipe', 'pipe', 'pipe'] });
    cleanups.push(() => {
      child.kill('SIGKILL');
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.stdin.end(JSON.stringify({ port: ports[1], publicUrl, configDir, calls, go, profile: profile satisfies ReauthProfile }));
    await waitFor(`the second process's page (${err})`, () => (out.includes('ready') ? true : undefined), 20_000);

    const callbacks = [await callbackVia(ports[0], host, link), await callbackVia(ports[1], host, link)];
    const lines = (): number => readFileSync(calls, 'utf8').split('\n').filter(Boolean).length;
    const open = (): void => writeFileSync(go, '');
    const answers = [get(ports[0], host, callbacks[0] as string), get(ports[1], host, callbacks[1] as string)];
    await Promise.race([Promise.race(answers), waitFor('both stores', () => (lines() >= 2 ? true : undefined), 60_000)]);
    open();
    const settled = await Promise.all(answers);

    expect(lines()).toBe(1);
    expect(exchanged(emu, callbacks)).toBe(1);
    expect(settled.map((answer) => answer.status).sort()).toEqual([200, 409]);
    expect(settled.find((answer) => answer.status === 409)?.body).toContain('Already under way');
    expect(await links.outstanding(PROFILE, Date.now())).toEqual([]);
    expect(err).toBe('');
  });
});

describe('a claim that lapsed', () => {
  it('a completion whose claim lapsed before it stored: nothing stored, the grant it was given revoked, the link still good', async () => {
    const dir = tempDir('syncauth-claim-');
    const port = await freePort();
    const publicUrl = `http://127.0.0.1:${port}`;
    const host = new URL(publicUrl).host;
    const { emu, profile } = await emulatorFor(publicUrl);
    const files = fileLinkStore(path.join(dir, 'config'));
    let lapse = true;
    // The claim is taken, but by the time the grant would be stored it is no longer this completion's.
    const links: LinkStore = { ...files, claim: (name, leaseMs, complete) => files.claim(name, leaseMs, (claim) => complete({ renew: async () => !lapse && (await claim.renew()) })) };
    const stored: ReauthorizedGrant[] = [];
    const page = await startReauthServer({
      listen: { host: '127.0.0.1', port },
      publicUrl,
      links,
      profile: async (name) => (name === PROFILE ? profile : undefined),
      reauthorized: async (_name, grant) => {
        stored.push(grant);
        return { stored: true };
      },
      log: captureLog('info').logger,
    });
    cleanups.push(() => page.close());
    const { url: link } = await mintLink(links, { profile: PROFILE, publicUrl });
    const answer = await get(port, host, await callbackVia(port, host, link));
    expect(answer.body).toContain('This took too long');
    expect(answer.body).toContain('the link still works');
    expect(stored).toEqual([]);
    const grants = [...emu.state.grants.values()].filter((grant) => grant.refreshToken);
    expect(grants).toHaveLength(1);
    expect(grants.every((grant) => grant.revokedAt !== null)).toBe(true);
    lapse = false;
    expect((await get(port, host, await callbackVia(port, host, link))).body).toContain('syncauth is authorized again');
    expect(stored).toHaveLength(1);
  });
});
