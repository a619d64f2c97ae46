// The page's settings and `syncauth reauth-link`: the page needs both --reauth-listen and --public-url, the public
// URL is https (http only on loopback) and a bare origin, each refused with exit 2 naming the field before
// anything starts or is written; the link is printed on stdout alone, only its digest kept (0600), and `status`
// says one is outstanding and until when, never the link.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openProfileStore } from '../../src/profile/index.js';
import { hashToken, LINKS_FILE_NAME } from '../../src/reauth/links.js';
import { RedisReauthStore } from '../../src/reauth/redis-store.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';

async function withProfile(): Promise<{ dir: string; configDir: string }> {
  const dir = tempDir('syncauth-reauth-cli-');
  const configDir = path.join(dir, 'config');
  await openProfileStore(configDir).update('docs', () => ({ remoteUrl: 'dropbox://data', accountId: 'dbid:AAexampleaccount' }));
  return { dir, configDir };
}

describe('the re-authorization settings', () => {
  it.each([
    [['--reauth-listen', '127.0.0.1:0'], '--reauth-listen', 'needs a public URL'],
    [['--public-url', 'https://syncauth.example.com'], '--public-url', "needs the page's listen address"],
    [['--reauth-listen', '127.0.0.1:0', '--public-url', 'http://syncauth.example.com'], '--public-url', 'must be https'],
    [['--reauth-listen', '127.0.0.1:0', '--public-url', 'https://syncauth.example.com/page'], '--public-url', 'an origin alone'],
    [['--reauth-listen', '127.0.0.1:0', '--public-url', 'https://syncauth.example.com', '--reauth-link-ttl', '5s'], '--reauth-link-ttl', 'from 1m to 30d'],
  ])('daemon %j: exit 2 naming %s', async (flags, field, message) => {
    const { dir } = await withProfile();
    const result = await runInProcess(['daemon', '--profile', 'docs', '--token-file', path.join(dir, 'token'), ...flags], { cwd: dir });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(field);
    expect(result.stderr).toContain(message);
    expect(existsSync(path.join(dir, 'token'))).toBe(false);
  });
});

describe('the settings of replicas sharing a new grant', () => {
  const page = ['--reauth-listen', '127.0.0.1:0', '--public-url', 'https://syncauth.example.com'];
  const redis = ['--redis-url', 'redis://127.0.0.1:1'];
  const key = Buffer.alloc(32, 7).toString('base64');
  it.each([
    ['Redis and the page without a grant key', [...page, ...redis], {} as Record<string, string>, 'SYNCAUTH_GRANT_KEY', 'is required with --redis-url and --reauth-listen'],
    ['a grant key that is not 32 bytes', [...page, ...redis], { SYNCAUTH_GRANT_KEY: 'c2hvcnQ=' }, 'SYNCAUTH_GRANT_KEY', 'must be 32 random bytes in base64'],
    ['a grant key without Redis', page, { SYNCAUTH_GRANT_KEY: key }, 'SYNCAUTH_GRANT_KEY', 'is used only with --redis-url'],
    ['--on-reauthorized without the page', ['--on-reauthorized', 'cat > /dev/null'], {}, '--on-reauthorized', 'needs the re-authorization page'],
  ])('%s: exit 2 naming it, the key never echoed', async (_what, flags, env, field, message) => {
    const { dir } = await withProfile();
    const result = await runInProcess(['daemon', '--profile', 'docs', '--token-file', path.join(dir, 'token'), ...flags], { cwd: dir, env });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(field);
    expect(result.stderr).toContain(message);
    if (env.SYNCAUTH_GRANT_KEY) expect(result.stderr).not.toContain(env.SYNCAUTH_GRANT_KEY);
    expect(existsSync(path.join(dir, 'token'))).toBe(false);
  });

  it('a grant key in a .env is not used, and a grant key given as a flag is refused', async () => {
    const { dir } = await withProfile();
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path.join(dir, '.env'), `SYNCAUTH_GRANT_KEY=${key}\n`);
    const fromDotenv = await runInProcess(['daemon', '--profile', 'docs', '--token-file', path.join(dir, 'token'), ...page, ...redis], { cwd: dir });
    expect(fromDotenv.code).toBe(2);
    expect(fromDotenv.stderr).toContain('SYNCAUTH_GRANT_KEY');
    expect(fromDotenv.stderr).toContain('is required');
    const asFlag = await runInProcess(['daemon', '--profile', 'docs', '--grant-key', key], { cwd: dir });
    expect(asFlag.code).toBe(2);
    expect(asFlag.stderr).not.toContain(key);
  });
});

describe('the grant key with Redis: whatever mints, reads or delivers a link there needs it', () => {
  // Nothing listens there: a command that got as far as Redis would fail otherwise than with exit 2.
  const redis = { SYNCAUTH_REDIS_URL: 'redis://127.0.0.1:1' };
  const secret = { SYNCAUTH_NOTIFY_SECRET: `whsec_${Buffer.alloc(24, 3).toString('base64')}` };
  it.each([
    ['daemon with notices and Redis, no page', (dir: string) => ['daemon', '--profile', 'docs', '--token-file', path.join(dir, 'token'), '--notify-url', 'http://127.0.0.1:9/hook'], { ...redis, ...secret }, 'SYNCAUTH_GRANT_KEY', 'is required with --redis-url and --notify-url'],
    ['reauth-link with Redis', () => ['reauth-link', '--profile', 'docs', '--public-url', 'https://syncauth.example.com'], redis, 'SYNCAUTH_GRANT_KEY', 'is required with --redis-url'],
    ['status with Redis', () => ['status', '--profile', 'docs'], redis, 'SYNCAUTH_GRANT_KEY', 'is required with --redis-url'],
    ['daemon with the page and unsigned Slack notices, no Redis', (dir: string) => ['daemon', '--profile', 'docs', '--token-file', path.join(dir, 'token'), '--reauth-listen', '127.0.0.1:0', '--public-url', 'https://syncauth.example.com', '--notify-url', 'http://127.0.0.1:9/hook', '--notify-format', 'slack'], {}, 'SYNCAUTH_NOTIFY_SECRET', 'sealed under a key derived from it'],
  ])('%s: exit 2 naming %s, nothing printed or written', async (_what, args, env, field, message) => {
    const { dir, configDir } = await withProfile();
    const before = readdirSync(configDir, { recursive: true }).sort();
    const result = await runInProcess(args(dir), { cwd: dir, env });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(field);
    expect(result.stderr).toContain(message);
    expect(result.stdout).toBe('');
    expect(readdirSync(configDir, { recursive: true }).sort()).toEqual(before);
    expect(existsSync(path.join(dir, 'token'))).toBe(false);
  });
});

describe('syncauth reauth-link', () => {
  it('without a public URL: exit 2 naming it, and no link is minted', async () => {
    const { dir, configDir } = await withProfile();
    const result = await runInProcess(['reauth-link', '--profile', 'docs'], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--public-url');
    expect(result.stdout).toBe('');
    expect(existsSync(path.join(configDir, LINKS_FILE_NAME))).toBe(false);
  });

  it('for a profile that was never set up: exit 4', async () => {
    const { dir } = await withProfile();
    const result = await runInProcess(['reauth-link', '--profile', 'other', '--public-url', 'https://syncauth.example.com'], { cwd: dir });
    expect(result.code).toBe(4);
    expect(result.stdout).toBe('');
  });

  it('prints the link alone; only its digest is kept (0600); status says it is outstanding and until when, never the link', async () => {
    const { dir, configDir } = await withProfile();
    const started = Date.now();
    const result = await runInProcess(['reauth-link', '--profile', 'docs', '--public-url', 'https://syncauth.example.com', '--reauth-link-ttl', '2h', '--allow-account-change'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^https:\/\/syncauth\.example\.com\/reauthorize\/[A-Za-z0-9_-]{43}\n$/);
    expect(result.stderr).toContain('it may move the profile to another Dropbox account');
    const token = result.stdout.trim().split('/').pop() as string;
    const file = path.join(configDir, LINKS_FILE_NAME);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = readFileSync(file, 'utf8');
    expect(stored).not.toContain(token);
    const links = (JSON.parse(stored) as { version: number; links: { hash: string; profile: string; expiresAt: number; allowAccountChange: boolean }[] });
    expect(links.version).toBe(1);
    expect(links.links).toEqual([expect.objectContaining({ hash: hashToken(token), profile: 'docs', allowAccountChange: true })]);
    const expiresAt = links.links[0]?.expiresAt ?? 0;
    expect(expiresAt - started).toBeGreaterThanOrEqual(2 * 3_600_000 - 1_000);
    expect(expiresAt - started).toBeLessThanOrEqual(2 * 3_600_000 + 60_000);

    const text = await runInProcess(['status', '--profile', 'docs'], { cwd: dir });
    expect(text.stdout).toMatch(/reauthorization link:\s+outstanding, expires \S+ \(in 2\.0h\)/);
    const json = await runInProcess(['status', '--json', '--profile', 'docs'], { cwd: dir });
    expect((JSON.parse(json.stdout) as { profiles: { reauthorizationLink: unknown }[] }).profiles[0]?.reauthorizationLink).toEqual({ expiresAt: new Date(expiresAt).toISOString() });
    expect(`${text.stdout}${text.stderr}${json.stdout}${json.stderr}`).not.toContain(token);
  });
});

const redisCheck = redisAvailability();

describe.skipIf(redisCheck.skip)('reauth-link and status with --redis-url (replicas)', () => {
  let redis: RedisServer | undefined;
  afterAll(async () => {
    await redis?.kill();
  });

  it('the link is kept in Redis, where every replica\'s page looks, not in the config dir; status reads it there', async () => {
    redis = await startRedisServer(redisCheck);
    const { dir, configDir } = await withProfile();
    const grantKey = Buffer.alloc(32, 0x42);
    const env = { SYNCAUTH_REDIS_URL: redis.url, SYNCAUTH_GRANT_KEY: grantKey.toString('base64') };
    const result = await runInProcess(['reauth-link', '--profile', 'docs', '--public-url', 'https://syncauth.example.com'], { cwd: dir, env });
    expect(result.code, result.stderr).toBe(0);
    const token = result.stdout.trim().split('/').pop() as string;
    expect(existsSync(path.join(configDir, LINKS_FILE_NAME))).toBe(false);
    const store = await RedisReauthStore.open({ url: redis.url, grantKey });
    try {
      expect(await store.links.find(hashToken(token), Date.now())).toMatchObject({ profile: 'docs' });
    } finally {
      await store.close();
    }
    const withRedis = await runInProcess(['status', '--profile', 'docs'], { cwd: dir, env });
    expect(withRedis.stdout).toMatch(/reauthorization link:\s+outstanding, expires /);
    expect(`${withRedis.stdout}${withRedis.stderr}`).not.toContain(token);
    const withoutRedis = await runInProcess(['status', '--profile', 'docs'], { cwd: dir });
    expect(withoutRedis.stdout).not.toContain('reauthorization link');
  });
});

