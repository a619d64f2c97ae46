// No usable link anywhere but in the notice. A profile waits for re-authorization, the page is on, and the
// receiver hangs (a local server that takes the request and never answers): meanwhile a backup of the config dir
// (`notices.json`) and a dump of Redis (every key, read with GET, HGETALL, LRANGE, SMEMBERS, ZRANGE) are searched
// for the link the receiver got, as it is and in base64 and hex, and every URL in them is opened on the page: each
// answers 404, while the link from the notice opens it. Then a receiver that answers 500 and then 200 gets the
// same link, under the same webhook-id, both times.
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileNotice } from '../../src/notify/notice.js';
import { FileOutbox, Notifier, OUTBOX_FILE, RedisOutbox, resolveNotifySettings, type OutboxStore } from '../../src/notify/index.js';
import { linkMinter } from '../../src/reauth/links.js';
import { RedisReauthStore } from '../../src/reauth/redis-store.js';
import { subkey } from '../../src/record-keys.js';
import { captureLog, fakeClock } from '../daemon/helpers.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { pathOf, PROFILE, startPageWorld, type PageWorld } from '../reauth/world.js';
import { startReceiver } from './receiver.js';

const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
const GRANT_KEY = Buffer.alloc(32, 0x2b);
const availability = redisAvailability();

function parked(at: number): ProfileNotice {
  return { type: 'profile.reauthorization_needed', profile: PROFILE, folder: 'dropbox://data', reason: 'the grant was revoked or has expired', errorCode: 'OAUTH_INVALID_GRANT', at, transition: 'v1:OAUTH_INVALID_GRANT:abc' };
}

/** A receiver that takes each request and never answers. */
async function hangingReceiver(): Promise<{ url: string; bodies: string[]; close(): Promise<void> }> {
  const bodies: string[] = [];
  const held: IncomingMessage[] = [];
  const server: Server = createServer((req) => {
    held.push(req);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => bodies.push(Buffer.concat(chunks).toString('utf8')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    bodies,
    close: async () => {
      for (const req of held) req.socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Every form of the link's token someone could use: as it is, its bytes, and either in base64 or hex. */
function tokenForms(link: string): string[] {
  const token = link.split('/').pop() as string;
  const bytes = Buffer.from(token, 'base64url');
  return [token, Buffer.from(token).toString('base64'), Buffer.from(token).toString('hex'), bytes.toString('base64'), bytes.toString('hex'), bytes.toString('base64url')];
}

/** No usable link in `text`: none of the token's forms, and every URL in it is refused by the page. */
async function expectNoUsableLink(world: PageWorld, text: string, link: string): Promise<void> {
  for (const form of tokenForms(link)) expect(text.includes(form), `the token (as ${form.slice(0, 6)}…) is in the copy`).toBe(false);
  const urls = [...text.matchAll(/https?:\/\/[^\s"'\\<>]+/g)].map((match) => match[0]);
  for (const url of urls) {
    const answer = await world.http(pathOf(url));
    expect(answer.status, `${url} opens the page`).toBe(404);
  }
  // The link itself, from the notice, opens the page.
  expect((await world.http(pathOf(link))).status).toBe(200);
}

/** The notice's link in a request body. */
const linkOf = (body: string): string => (JSON.parse(body) as { data: { link: string } }).data.link;

const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close().catch(() => undefined);
});

/**
 * A notifier over the file outbox of `world` (sealed under the notify secret's key when there is one) sends a
 * parked-profile notice to a receiver that never answers; resolves with the body the receiver got, while the
 * delivery still waits in the outbox.
 */
async function firstNoticeAtHangingReceiver(world: PageWorld, notify: { secret?: string; format?: 'slack' }): Promise<string> {
  const receiver = await hangingReceiver();
  closing.push(() => receiver.close());
  const settings = resolveNotifySettings({ urls: [receiver.url], urlField: '--notify-url', ...notify });
  if (notify.secret === undefined) expect(settings.key).toBeUndefined();
  const store = await FileOutbox.open(world.configDir, world.log.logger, settings.key === undefined ? undefined : subkey(settings.key, 'outbox-file'));
  const minter = linkMinter(world.links, { publicUrl: world.publicUrl });
  const notifier = new Notifier({ ...settings, store, log: world.log.logger, pollMs: false, attemptTimeoutMs: 120_000, linkFor: (profile) => minter.linkFor(profile) });
  closing.push(() => notifier.close());
  notifier.notice(parked(Date.now()));
  await notifier.accepted();
  void notifier.tick();
  return until('the notice at the receiver', () => receiver.bodies[0]);
}

describe('the file outbox while a notice waits', () => {
  it('notices.json holds no usable link while the receiver hangs', async () => {
    const world = await startPageWorld();
    const body = await firstNoticeAtHangingReceiver(world, { secret: SECRET });
    const link = linkOf(body);
    // A backup of the config dir now: the outbox file, and everything else beside it.
    const outbox = readFileSync(path.join(world.configDir, OUTBOX_FILE), 'utf8');
    expect(JSON.parse(outbox)).toMatchObject({ version: 2, deliveries: [expect.objectContaining({ id: expect.any(String) })] });
    await expectNoUsableLink(world, outbox, link);
  });
});

describe('without SYNCAUTH_NOTIFY_SECRET, and in the log', () => {
  it('an unsigned Slack notice carries its link, and neither notices.json nor any log line holds it while the receiver hangs', async () => {
    const world = await startPageWorld();
    const body = await firstNoticeAtHangingReceiver(world, { format: 'slack' });
    const link = /https?:\/\/[^\s"'\\<>|]+\/reauthorize\/[A-Za-z0-9_-]{43}/.exec(body)?.[0];
    expect(link, body).toBeDefined();
    const outbox = readFileSync(path.join(world.configDir, OUTBOX_FILE), 'utf8');
    await expectNoUsableLink(world, outbox, link as string);
    await expectNoUsableLink(world, world.log.lines.join('\n'), link as string);
  });
});

describe.skipIf(availability.skip)('the Redis outbox while a notice waits, and the link on every retry', () => {
  let redis: RedisServer;
  let raw: Redis;
  beforeAll(async () => {
    redis = await startRedisServer(availability);
    raw = new Redis(redis.url);
  });
  afterAll(async () => {
    raw?.disconnect();
    await redis?.kill();
  });

  /** Everything Redis holds, every key read as its type is read. */
  async function dump(): Promise<string> {
    const lines: string[] = [];
    for (const key of await raw.keys('*')) {
      const type = await raw.type(key);
      const value =
        type === 'string' ? await raw.get(key)
          : type === 'hash' ? JSON.stringify(await raw.hgetall(key))
            : type === 'list' ? JSON.stringify(await raw.lrange(key, 0, -1))
              : type === 'set' ? JSON.stringify(await raw.smembers(key))
                : type === 'zset' ? JSON.stringify(await raw.zrange(key, 0, -1))
                  : `(${type})`;
      lines.push(`${key} ${value ?? ''}`);
    }
    return lines.join('\n');
  }

  async function redisWorld(): Promise<{ world: PageWorld; links: RedisReauthStore }> {
    const links = await RedisReauthStore.open({ url: redis.url, grantKey: GRANT_KEY });
    closing.push(() => links.close());
    const world = await startPageWorld({ stores: { links: links.links, rounds: links.rounds } });
    return { world, links };
  }

  async function notifierOn(world: PageWorld, links: RedisReauthStore, url: string, extra: { now?: () => number; attemptTimeoutMs?: number } = {}): Promise<Notifier> {
    const settings = resolveNotifySettings({ urls: [url], urlField: '--notify-url', secret: SECRET });
    const store: OutboxStore = await RedisOutbox.open({ url: redis.url, grantKey: GRANT_KEY, logger: world.log.logger }, 'redis');
    const minter = linkMinter(links.links, { publicUrl: world.publicUrl });
    const notifier = new Notifier({ ...settings, store, log: world.log.logger, pollMs: false, random: () => 0.5, linkFor: (profile) => minter.linkFor(profile), ...extra });
    closing.push(() => notifier.close());
    return notifier;
  }

  it('a dump of Redis holds no usable link while the receiver hangs', async () => {
    await raw.flushall();
    const { world, links } = await redisWorld();
    const receiver = await hangingReceiver();
    closing.push(() => receiver.close());
    const notifier = await notifierOn(world, links, receiver.url, { attemptTimeoutMs: 120_000 });
    notifier.notice(parked(Date.now()));
    await notifier.accepted();
    void notifier.tick();
    const link = linkOf(await until('the notice at the receiver', () => receiver.bodies[0]));
    const copy = await dump();
    expect(copy).toContain('syncauth:notify:outbox');
    await expectNoUsableLink(world, copy, link);
  });

  it.each(['file', 'redis'] as const)('the %s outbox sends the same link under the same webhook-id at every retry', async (kind) => {
    await raw.flushall();
    const clock = fakeClock();
    const receiver = await startReceiver();
    receiver.status = 500;
    let notifier: Notifier;
    let world: PageWorld;
    if (kind === 'redis') {
      const made = await redisWorld();
      world = made.world;
      notifier = await notifierOn(world, made.links, receiver.url, { now: clock.now });
    } else {
      world = await startPageWorld();
      const settings = resolveNotifySettings({ urls: [receiver.url], urlField: '--notify-url', secret: SECRET });
      const log = captureLog();
      const store = await FileOutbox.open(world.configDir, log.logger, subkey(settings.key as Buffer, 'outbox-file'));
      const minter = linkMinter(world.links, { publicUrl: world.publicUrl });
      notifier = new Notifier({ ...settings, store, log: log.logger, pollMs: false, random: () => 0.5, now: clock.now, linkFor: (profile) => minter.linkFor(profile) });
      closing.push(() => notifier.close());
    }
    notifier.notice(parked(clock.now()));
    await notifier.accepted();
    await notifier.tick();
    expect(receiver.received).toHaveLength(1);
    receiver.status = 200;
    clock.advance(10 * 60_000);
    await notifier.tick();
    expect(receiver.received).toHaveLength(2);
    const [first, second] = receiver.received.map((request) => ({ id: request.headers['webhook-id'], link: linkOf(request.body) }));
    expect(second).toEqual(first);
    expect(first?.link).toMatch(new RegExp(`^${world.publicUrl}/reauthorize/[A-Za-z0-9_-]{43}$`));
    expect((await world.http(pathOf(first?.link as string))).status).toBe(200);
  });
});
