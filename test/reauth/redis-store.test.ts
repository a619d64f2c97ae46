// The page's links and authorize rounds in a real redis-server, as replicas share them: a link minted through one
// connection is found through another (and a restarted one), spent for all, expires with its time limit; a round
// begun on one replica is taken once on another, and Redis holds neither a link, a state nor a PKCE verifier.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken, LINKS_PER_PROFILE, mintLink } from '../../src/reauth/links.js';
import { RedisReauthStore } from '../../src/reauth/redis-store.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';

const availability = redisAvailability();
const GRANT_KEY = Buffer.alloc(32, 0x42);

describe.skipIf(availability.skip)('the page\'s records in Redis', () => {
  let redis: RedisServer;
  let raw: Redis;
  const opened: RedisReauthStore[] = [];
  const open = async (prefix: string): Promise<RedisReauthStore> => {
    const store = await RedisReauthStore.open({ url: redis.url, keyPrefix: prefix, grantKey: GRANT_KEY });
    opened.push(store);
    return store;
  };
  /** Everything Redis holds under the prefix, keys and values. */
  const dump = async (prefix: string): Promise<string> => {
    const keys = await raw.keys(`${prefix}:*`);
    const values = await Promise.all(keys.map(async (key) => ((await raw.type(key)) === 'zset' ? (await raw.zrange(key, 0, -1)).join(',') : ((await raw.get(key)) ?? ''))));
    return `${keys.join('\n')}\n${values.join('\n')}`;
  };

  beforeAll(async () => {
    redis = await startRedisServer(availability);
    raw = new Redis(redis.url);
  });
  afterAll(async () => {
    for (const store of opened) await store.close();
    raw?.disconnect();
    await redis?.kill();
  });

  it('a link minted by one replica is found by another and by a restarted one, spent for all, and only its digest is kept', async () => {
    const [one, two] = [await open('links'), await open('links')];
    const now = Date.now();
    const { url, expiresAt } = await mintLink(one.links, { profile: 'docs', publicUrl: 'https://syncauth.example.com', ttlMs: 3_600_000, now: () => now });
    const token = url.split('/').pop() as string;
    expect(await two.links.find(hashToken(token), now)).toMatchObject({ profile: 'docs', expiresAt, allowAccountChange: false });
    const restarted = await open('links');
    expect(await restarted.links.find(hashToken(token), now)).toMatchObject({ profile: 'docs' });
    expect(await restarted.links.outstanding('docs', now)).toEqual([{ expiresAt, allowAccountChange: false }]);
    // Past its expiry it is not found, and Redis lets it go by itself.
    expect(await two.links.find(hashToken(token), expiresAt)).toBeUndefined();
    const ttl = await raw.pttl(`links:reauth:link:${hashToken(token)}`);
    expect(ttl).toBeGreaterThan(3_590_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000);
    expect(await dump('links')).not.toContain(token);

    expect(await two.links.spend('docs')).toBe(1);
    expect(await one.links.find(hashToken(token), now)).toBeUndefined();
    expect(await one.links.outstanding('docs', now)).toEqual([]);
  });

  it('a link minted after a spend by a replica whose clock is a minute behind still opens; the spent one does not', async () => {
    const store = await open('skew');
    const behind = Date.now() - 60_000;
    const spent = await mintLink(store.links, { profile: 'docs', publicUrl: 'https://s.example.com', now: () => behind });
    expect(await store.links.spend('docs')).toBe(1);
    const later = await mintLink(store.links, { profile: 'docs', publicUrl: 'https://s.example.com', now: () => behind + 1_000 });
    expect(await store.links.find(hashToken(later.url.split('/').pop() as string), behind + 2_000)).toMatchObject({ profile: 'docs' });
    expect(await store.links.find(hashToken(spent.url.split('/').pop() as string), behind + 2_000)).toBeUndefined();
  });

  it('never drops a live link: past the cap a mint is refused, apart from other profiles', async () => {
    const store = await open('many');
    const now = Date.now();
    const tokens: string[] = [];
    for (let i = 0; i < LINKS_PER_PROFILE; i++) {
      const { url } = await mintLink(store.links, { profile: 'docs', publicUrl: 'https://s.example.com', now: () => now + i });
      tokens.push(url.split('/').pop() as string);
    }
    await expect(mintLink(store.links, { profile: 'docs', publicUrl: 'https://s.example.com', now: () => now + 100 })).rejects.toMatchObject({ code: 'REAUTH_LINKS_FULL' });
    await mintLink(store.links, { profile: 'other', publicUrl: 'https://s.example.com', now: () => now });
    const found = await Promise.all(tokens.map((token) => store.links.find(hashToken(token), now)));
    expect(found.every((link) => link !== undefined)).toBe(true);
    expect(await store.links.outstanding('docs', now)).toHaveLength(LINKS_PER_PROFILE);
    expect(await store.links.outstanding('other', now)).toHaveLength(1);
  });

  it('an authorize round begun on one replica is taken once on another; Redis holds neither its state nor its verifier', async () => {
    const [one, two] = [await open('rounds'), await open('rounds')];
    const now = Date.now();
    const state = randomBytes(16).toString('base64url');
    const codeVerifier = randomBytes(48).toString('base64url');
    const round = { profile: 'docs', linkHash: hashToken('x'.repeat(43)), codeVerifier, redirectUri: 'https://s.example.com/reauthorize/callback', expiresAt: now + 900_000 };
    await one.rounds.remember(state, round, now);
    const stored = await dump('rounds');
    for (const secret of [state, codeVerifier, Buffer.from(codeVerifier).toString('base64')]) expect(stored).not.toContain(secret);
    expect(await two.rounds.take(randomBytes(16).toString('base64url'), now)).toBeUndefined();
    expect(await two.rounds.take(state, now)).toEqual(round);
    expect(await one.rounds.take(state, now)).toBeUndefined();

    // An expired round is not taken, and one whose stored record was changed does not open.
    await one.rounds.remember(state, { ...round, expiresAt: now + 10 }, now);
    expect(await two.rounds.take(state, now + 20)).toBeUndefined();
    await one.rounds.remember(state, round, now);
    const [key] = await raw.keys('rounds:reauth:round:*');
    const record = JSON.parse((await raw.get(key as string)) as string) as { verifier: { data: string } };
    record.verifier.data = Buffer.from('a different verifier').toString('base64');
    await raw.set(key as string, JSON.stringify(record));
    expect(await two.rounds.take(state, now)).toBeUndefined();
  });
});
