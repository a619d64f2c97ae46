// Whoever can write Redis (its password, not SYNCAUTH_GRANT_KEY) against the real page and daemon code, with a
// plain Redis client writing keys directly: a link record for a token of their own (allowing another account), an
// authorize round of their own bound to an outstanding link, a link record copied from another deployment's keys,
// a spent link put back (with a forged spent mark), a delivery and a reminder of their own in the outbox. Each is
// refused: the page answers as it does for any wrong link (the same 404), the grant and the recorded account do
// not change, nothing is sent, and the refusal is logged without the record.
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileNotice } from '../../src/notify/notice.js';
import { Notifier, RedisOutbox, resolveNotifySettings } from '../../src/notify/index.js';
import { targetKey } from '../../src/notify/signing.js';
import { createAuthorizationRequest } from '../../src/oauth/index.js';
import { hashToken } from '../../src/reauth/links.js';
import { RedisReauthStore } from '../../src/reauth/redis-store.js';
import { captureLog, fakeClock } from '../daemon/helpers.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { startReceiver } from '../notify/receiver.js';
import { approveAt, hrefOf, pathOf, PROFILE, startPageWorld, type PageWorld } from './world.js';

const availability = redisAvailability();
const GRANT_KEY = Buffer.alloc(32, 0x61);
const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('base64url');

describe.skipIf(availability.skip)('whoever can write Redis', () => {
  let redis: RedisServer;
  let raw: Redis;
  const closing: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    redis = await startRedisServer(availability);
    raw = new Redis(redis.url);
  });
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => undefined);
    await raw.flushall();
  });
  afterAll(async () => {
    raw?.disconnect();
    await redis?.kill();
  });

  /** The page beside a daemon, its links and rounds in Redis as a replica keeps them. */
  async function replica(keyPrefix = 'syncauth'): Promise<{ world: PageWorld; store: RedisReauthStore; log: ReturnType<typeof captureLog> }> {
    const log = captureLog();
    const store = await RedisReauthStore.open({ url: redis.url, keyPrefix, grantKey: GRANT_KEY, logger: log.logger });
    closing.push(() => store.close());
    const world = await startPageWorld({ stores: { links: store.links, rounds: store.rounds } });
    return { world, store, log };
  }

  /** What the page answers for a link nobody minted. */
  const wrongLink = async (world: PageWorld) => world.http(`/reauthorize/${randomBytes(32).toString('base64url')}`);

  /** Refusals logged, and nothing of `secrets` in any log line. */
  function refusals(log: ReturnType<typeof captureLog>, secrets: string[]): unknown[] {
    for (const secret of secrets) expect(log.lines.join('\n')).not.toContain(secret);
    return log.records().filter((r) => r.event === 'reauth.record_refused').map((r) => `${String(r.record)}:${String(r.reason)}`);
  }

  it('a link record for a token of their own, allowing another account, is refused: the same 404 as a wrong link', async () => {
    const { world, log } = await replica();
    const token = randomBytes(32).toString('base64url');
    const hash = hashToken(token);
    const now = Date.now();
    const record = { hash, profile: PROFILE, expiresAt: now + 3_600_000, createdAt: now, allowAccountChange: true };
    // As the previous release wrote them, and as this one does but with a MAC made up.
    for (const forged of [{ v: 1, ...record }, { v: 2, ...record, mac: randomBytes(32).toString('base64url') }]) {
      await raw.set(`syncauth:reauth:link:${hash}`, JSON.stringify(forged), 'PX', 3_600_000);
      await raw.zadd(`syncauth:reauth:links:${PROFILE}`, now, hash);
      const page = await world.http(`/reauthorize/${token}`);
      const wrong = await wrongLink(world);
      expect(page.status).toBe(404);
      expect(page.body).toBe(wrong.body);
      expect(page.headers['content-type']).toBe(wrong.headers['content-type']);
    }
    expect(refusals(log, [token, hash])).toEqual(['link:version', 'link:mac']);
  });

  it('an authorize round of their own, bound to an outstanding link, does not store their grant', async () => {
    const { world, log } = await replica();
    // The operator mints a link that may move the profile (to hand it to the account's new owner).
    await world.mint({ allowAccountChange: true });
    const before = world.stored().refreshToken;
    const account = world.emu.state.account.accountId;
    const other = world.emu.state.accounts[1];
    if (!other) throw new Error('the emulator has no second account');
    // The writer reads the link's digest from the key names, and begins a round of its own at Dropbox.
    const [linkKey] = await raw.keys('syncauth:reauth:link:*');
    const linkHash = (linkKey as string).split(':').pop() as string;
    const redirectUri = `${world.publicUrl}/reauthorize/callback`;
    for (const version of [1, 2]) {
      const request = createAuthorizationRequest({ authorizeUrl: world.emu.authorizeUrl, appKey: world.app.appKey, redirectUri });
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', createHash('sha256').update(`syncauth-reauth-round\0${request.state}`, 'utf8').digest(), iv);
      const data = Buffer.concat([cipher.update(request.codeVerifier, 'utf8'), cipher.final()]);
      const round = {
        v: version,
        profile: PROFILE,
        linkHash,
        redirectUri,
        expiresAt: Date.now() + 900_000,
        verifier: { iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') },
        ...(version === 2 ? { mac: randomBytes(32).toString('base64url') } : {}),
      };
      await raw.set(`syncauth:reauth:round:${sha256(request.state)}`, JSON.stringify(round), 'PX', 900_000);
      const back = await approveAt(request.url, other.accountId);
      const answer = await world.http(pathOf(back.location as string));
      expect(answer.status).toBe(404);
      expect(answer.body).toBe((await wrongLink(world)).body);
    }
    expect(world.stored().refreshToken).toBe(before);
    expect((await world.store.read(PROFILE))?.accountId).toBe(account);
    expect(refusals(log, [linkHash])).toEqual(['round:version', 'round:mac']);
  });

  it('a link record copied from another deployment\'s keys (another prefix, the same key) is refused', async () => {
    const { world, log } = await replica();
    const staging = await RedisReauthStore.open({ url: redis.url, keyPrefix: 'staging', grantKey: GRANT_KEY });
    closing.push(() => staging.close());
    const { mintLink } = await import('../../src/reauth/links.js');
    const { url } = await mintLink(staging.links, { profile: PROFILE, publicUrl: world.publicUrl, allowAccountChange: true });
    const hash = hashToken(url.split('/').pop() as string);
    const copied = (await raw.get(`staging:reauth:link:${hash}`)) as string;
    expect(copied).toBeTruthy();
    await raw.set(`syncauth:reauth:link:${hash}`, copied, 'PX', 3_600_000);
    const page = await world.http(pathOf(url));
    expect(page.status).toBe(404);
    expect(page.body).toBe((await wrongLink(world)).body);
    expect(refusals(log, [hash])).toEqual(['link:mac']);
  });

  it('a real link record moved to another key (their own token\'s, a round of their own) or put back after it expired is refused', async () => {
    const { world, log } = await replica();
    const link = await world.mint({ allowAccountChange: true, ttlMs: 1_000 });
    const hash = hashToken(link.split('/').pop() as string);
    const real = (await raw.get(`syncauth:reauth:link:${hash}`)) as string;
    expect(real).toBeTruthy();
    // Under the key their own token names: the record's profile and expiry are the real link's.
    const token = randomBytes(32).toString('base64url');
    await raw.set(`syncauth:reauth:link:${hashToken(token)}`, real);
    expect((await world.http(`/reauthorize/${token}`)).status).toBe(404);
    // As the round of a state of their own, whose callback they then call.
    const state = randomBytes(16).toString('base64url');
    await raw.set(`syncauth:reauth:round:${sha256(state)}`, real);
    expect((await world.http(`/reauthorize/callback?state=${state}&code=x`)).status).toBe(404);
    // Put back, without a time limit, once it expired (Redis's time limit is not what the page trusts).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await raw.exists(`syncauth:reauth:link:${hash}`)).toBe(0);
    await raw.set(`syncauth:reauth:link:${hash}`, real);
    expect((await world.http(pathOf(link))).status).toBe(404);
    expect(refusals(log, [hash, token, state])).toEqual(['link:mac', 'round:mac']);
  });

  it('a spent link put back, with or without a forged spent mark, stays spent', async () => {
    const { world, log } = await replica();
    const link = await world.mint();
    const hash = hashToken(link.split('/').pop() as string);
    const saved = (await raw.get(`syncauth:reauth:link:${hash}`)) as string;
    // The profile's own account completes the loop: its links are spent.
    const page = await world.http(pathOf(link));
    const back = await approveAt(hrefOf(page.body, 'authorize'));
    const done = await world.http(pathOf(back.location as string));
    expect(done.body).toContain('syncauth is authorized again');
    expect((await world.http(pathOf(link))).status).toBe(404);
    // The record saved before is put back as it was.
    await raw.set(`syncauth:reauth:link:${hash}`, saved, 'PX', 3_600_000);
    await raw.zadd(`syncauth:reauth:links:${PROFILE}`, Date.now(), hash);
    expect((await world.http(pathOf(link))).status).toBe(404);
    // And with a spent mark of the writer's own, saying the profile's links were never spent.
    await raw.set(`syncauth:reauth:spent:${PROFILE}`, JSON.stringify({ v: 2, profile: PROFILE, at: 0, mac: randomBytes(32).toString('base64url') }));
    expect((await world.http(pathOf(link))).status).toBe(404);
    expect(refusals(log, [hash])).toEqual(['spent mark:mac']);
  });

  it('a claim of their own on the profile does not hold its completion off: it is refused and replaced', async () => {
    const { world, log } = await replica();
    const link = await world.mint();
    const page = await world.http(pathOf(link));
    const back = await approveAt(hrefOf(page.body, 'authorize'));
    // Planted while the person is at Dropbox: a claim with no MAC, and one with a MAC made up.
    await raw.set(`syncauth:reauth:claim:${PROFILE}`, JSON.stringify({ v: 2, profile: PROFILE, holder: 'writer', mac: randomBytes(32).toString('base64url') }), 'PX', 300_000);
    const done = await world.http(pathOf(back.location as string));
    expect(done.body).toContain('syncauth is authorized again');
    expect(await raw.exists(`syncauth:reauth:claim:${PROFILE}`)).toBe(0);
    expect(refusals(log, [])).toEqual(['claim:mac']);
  });

  it('a real claim of an earlier completion, read with MONITOR and put back without a time limit, does not hold a later one off', async () => {
    const log = captureLog();
    // The replica's clock, which the test moves on as the hours between two re-authorizations would.
    let ahead = 0;
    const store = await RedisReauthStore.open({ url: redis.url, grantKey: GRANT_KEY, logger: log.logger, now: () => Date.now() + ahead });
    closing.push(() => store.close());
    const world = await startPageWorld({ stores: { links: store.links, rounds: store.rounds } });
    // The writer watches Redis while the profile is re-authorized once, and keeps the claim it saw.
    const watcher = await raw.monitor();
    closing.push(async () => void watcher.disconnect());
    const claims: string[] = [];
    watcher.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === 'set' && args[1] === `syncauth:reauth:claim:${PROFILE}`) claims.push(args[2] as string);
    });
    const first = await world.http(pathOf(await world.mint()));
    const firstBack = await approveAt(hrefOf(first.body, 'authorize'));
    expect((await world.http(pathOf(firstBack.location as string))).body).toContain('syncauth is authorized again');
    expect(claims.length).toBeGreaterThan(0);
    // Hours later the profile needs its owner again; the writer puts the old claim back, with no time limit.
    ahead = 6 * 3_600_000;
    const page = await world.http(pathOf(await world.mint()));
    const back = await approveAt(hrefOf(page.body, 'authorize'));
    await raw.set(`syncauth:reauth:claim:${PROFILE}`, claims[0] as string);
    const done = await world.http(pathOf(back.location as string));
    expect(done.body).toContain('syncauth is authorized again');
    expect(refusals(log, [])).toEqual(['claim:lapsed']);
  });

  it('a real delivery put back after it was sent goes out again only under its own webhook-id, and never past its 24 hours', async () => {
    const receiver = await startReceiver();
    const log = captureLog();
    const clock = fakeClock();
    const settings = resolveNotifySettings({ urls: [receiver.url], urlField: '--notify-url', secret: SECRET });
    const store = await RedisOutbox.open({ url: redis.url, grantKey: GRANT_KEY, logger: log.logger }, 'redis');
    const notifier = new Notifier({ ...settings, store, log: log.logger, pollMs: false, now: clock.now });
    closing.push(() => notifier.close());
    notifier.notice({ type: 'profile.reauthorized', profile: PROFILE, reason: 'authorized again at the page', at: clock.now(), transition: 'real' });
    await notifier.accepted();
    // The writer keeps the record while it waits, and puts it back once it was delivered.
    const saved = await raw.hgetall('syncauth:notify:outbox');
    expect(Object.keys(saved)).toHaveLength(1);
    await notifier.tick();
    expect(receiver.received).toHaveLength(1);
    expect(await raw.hlen('syncauth:notify:outbox')).toBe(0);
    await raw.hset('syncauth:notify:outbox', saved);
    await notifier.tick();
    // The same notice, the same id: a receiver that deduplicates by webhook-id takes it once.
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[1]?.headers['webhook-id']).toBe(receiver.received[0]?.headers['webhook-id']);
    expect(receiver.received[1]?.body).toBe(receiver.received[0]?.body);
    // A day later it is given up on, unsent: when it was queued is sealed with it.
    clock.advance(25 * 3_600_000);
    await raw.hset('syncauth:notify:outbox', saved);
    await notifier.tick();
    expect(receiver.received).toHaveLength(2);
    expect(await raw.hlen('syncauth:notify:outbox')).toBe(0);
  });

  it('a delivery and a reminder of their own in the outbox are never signed and sent', async () => {
    const receiver = await startReceiver();
    const log = captureLog();
    const settings = resolveNotifySettings({ urls: [receiver.url], urlField: '--notify-url', secret: SECRET });
    const store = await RedisOutbox.open({ url: redis.url, grantKey: GRANT_KEY, logger: log.logger }, 'redis');
    const notifier = new Notifier({ ...settings, store, log: log.logger, pollMs: false });
    closing.push(() => notifier.close());
    const now = Date.now();
    const phishing = 'https://syncauth-login.example.net/reauthorize/forged';
    const notice: ProfileNotice = { type: 'profile.reauthorization_needed', profile: PROFILE, reason: 'sign in again at the link below', at: now, transition: 'forged' };
    for (const version of [1, 2]) {
      const mac = version === 2 ? { mac: randomBytes(32).toString('base64url') } : {};
      const id = `msg_forged${version}`;
      const delivery = {
        v: version, key: `${id}.${targetKey(receiver.url)}`, id, target: targetKey(receiver.url), firstAt: now, attempts: 0, nextAt: 0,
        payload: { type: 'profile.reauthorization_needed', timestamp: new Date(now).toISOString(), data: { profile: PROFILE, reason: notice.reason, link: phishing, ask: 1 } },
        ...mac,
      };
      await raw.hset('syncauth:notify:outbox', delivery.key, JSON.stringify(delivery));
      await raw.hset('syncauth:notify:reminders', `${PROFILE}${version}`, JSON.stringify({ v: version, profile: `${PROFILE}${version}`, transition: 'forged', notice, since: 0, asks: 0, ...mac }));
    }
    await notifier.tick();
    await notifier.tick();
    expect(receiver.received).toEqual([]);
    // Told, without what the records said.
    const events = log.records().map((r) => `${String(r.event)}:${String(r.reason ?? r.version)}`).filter((e) => e.startsWith('notify.'));
    expect(events).toEqual(expect.arrayContaining(['notify.outbox_refused:1', 'notify.record_refused:mac']));
    expect(log.lines.join('\n')).not.toContain(phishing);
  });
});
