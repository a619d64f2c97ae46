// The sealed grant record replicas share after a re-authorization: only a replica with the grant key opens it,
// only for the profile it was sealed for, with the time it was sealed with; Redis holds a blob it cannot read,
// and never lets an older grant replace a newer one.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCoordinator, type RedisCoordinator } from '../../src/daemon/index.js';
import { isRefusal, openGrant, parseGrantKey, recordIssuedAt, sealGrant, type SealedGrant } from '../../src/daemon/grant-record.js';
import { ValidationError } from '../../src/errors.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';

const CANARY = {
  appKey: 'canaryappkey-9f2c4e',
  appSecret: 'canaryappsecret-77d1b0',
  refreshToken: 'canaryrefresh-Qx81-zz-4410',
};

const grant = (issuedAt: number, refreshToken = CANARY.refreshToken): SealedGrant => ({ ...CANARY, refreshToken, accountId: 'dbid:AAH4f99', issuedAt });

/** Every encoding a secret could leak in. */
function encodings(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  return [secret, bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex'), encodeURIComponent(secret)];
}

describe('sealing and opening a grant record', () => {
  const key = randomBytes(32);

  it('opens what it sealed, for the same profile, with every field', () => {
    const opened = openGrant(key, 'docs', sealGrant(key, 'docs', grant(1_700_000_000_000)));
    expect(opened).toEqual(grant(1_700_000_000_000));
  });

  it('holds no secret in any encoding, and gives its issue time in the clear', () => {
    const sealed = sealGrant(key, 'docs', grant(1_700_000_000_123));
    for (const secret of Object.values(CANARY)) for (const form of encodings(secret)) expect(sealed).not.toContain(form);
    expect(recordIssuedAt(sealed)).toBe(1_700_000_000_123);
  });

  it('refuses another key, another profile, a changed time and a changed body', () => {
    const sealed = sealGrant(key, 'docs', grant(1_700_000_000_000));
    expect(openGrant(randomBytes(32), 'docs', sealed)).toEqual({ refused: 'sealed_elsewhere' });
    expect(openGrant(key, 'other', sealed)).toEqual({ refused: 'sealed_elsewhere' });
    const record = JSON.parse(sealed) as Record<string, unknown>;
    // Replayed as newer, so that it would win over a grant issued since: the time is authenticated.
    expect(openGrant(key, 'docs', JSON.stringify({ ...record, issuedAt: 1_800_000_000_000 }))).toEqual({ refused: 'sealed_elsewhere' });
    const data = Buffer.from(record.data as string, 'base64');
    data[0] = (data[0] as number) ^ 1;
    expect(openGrant(key, 'docs', JSON.stringify({ ...record, data: data.toString('base64') }))).toEqual({ refused: 'sealed_elsewhere' });
  });

  it('refuses a record of another version or a damaged one without trying it', () => {
    const record = JSON.parse(sealGrant(key, 'docs', grant(1_700_000_000_000))) as Record<string, unknown>;
    expect(openGrant(key, 'docs', JSON.stringify({ ...record, v: 2 }))).toEqual({ refused: 'version' });
    expect(openGrant(key, 'docs', '{not json')).toEqual({ refused: 'malformed' });
    expect(openGrant(key, 'docs', 'null')).toEqual({ refused: 'malformed' });
    expect(openGrant(key, 'docs', JSON.stringify({ ...record, iv: 'AAAA' }))).toEqual({ refused: 'malformed' });
    expect(isRefusal(openGrant(key, 'docs', JSON.stringify({ ...record, issuedAt: 'soon' })))).toBe(true);
  });

  it('takes a grant key of 32 base64 bytes only, naming the variable and never echoing it', () => {
    const good = randomBytes(32).toString('base64');
    expect(parseGrantKey(good)).toHaveLength(32);
    expect(parseGrantKey(`${good}\n`)).toHaveLength(32);
    for (const bad of ['', 'short', randomBytes(16).toString('base64'), randomBytes(48).toString('base64'), 'correct horse battery staple and more words']) {
      let error: unknown;
      try {
        parseGrantKey(bad);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ValidationError);
      const text = `${(error as Error).message} ${JSON.stringify((error as ValidationError).issues)}`;
      expect(text).toContain('SYNCAUTH_GRANT_KEY');
      if (bad.length > 4) expect(text).not.toContain(bad);
    }
  });
});

const availability = redisAvailability();

describe.skipIf(availability.skip)('grant records in a real redis-server', () => {
  let redis: RedisServer;
  let one: RedisCoordinator;
  let two: RedisCoordinator;
  const key = randomBytes(32);

  beforeAll(async () => {
    redis = await startRedisServer(availability);
    one = await createRedisCoordinator({ url: redis.url, keyPrefix: 'grant-test' });
    two = await createRedisCoordinator({ url: redis.url, keyPrefix: 'grant-test' });
    await Promise.all([one.ready(), two.ready()]);
  });

  afterAll(async () => {
    await one?.close();
    await two?.close();
    await redis?.kill();
  });

  it('hands one replica what another sealed; an older grant written late never replaces a newer one', async () => {
    expect(await two.readGrantRecord?.('docs')).toBeUndefined();
    const newer = sealGrant(key, 'docs', grant(2_000, 'refresh-newer'));
    const older = sealGrant(key, 'docs', grant(1_000, 'refresh-older'));
    expect(await one.writeGrantRecord?.('docs', newer, 2_000)).toBe(true);
    expect(await two.writeGrantRecord?.('docs', older, 1_000)).toBe(false);
    // The same time again is not newer either: the first writer's grant stays.
    expect(await two.writeGrantRecord?.('docs', sealGrant(key, 'docs', grant(2_000, 'refresh-same')), 2_000)).toBe(false);
    const read = await two.readGrantRecord?.('docs');
    expect(read).toBe(newer);
    const opened = openGrant(key, 'docs', read as string);
    expect(isRefusal(opened) ? opened : opened.refreshToken).toBe('refresh-newer');
    const newest = sealGrant(key, 'docs', grant(3_000, 'refresh-newest'));
    expect(await two.writeGrantRecord?.('docs', newest, 3_000)).toBe(true);
    expect(await one.readGrantRecord?.('docs')).toBe(newest);
    expect(await one.readGrantRecord?.('other')).toBeUndefined();
  });
});
