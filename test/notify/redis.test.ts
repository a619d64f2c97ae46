// The outbox of replicas on a real redis-server: two notifiers that see the same transition deliver it once;
// a sender that took a delivery's lease and died before finishing is taken over once the lease expires;
// Redis away when the notice comes does not lose it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileNotice } from '../../src/notify/notice.js';
import { Notifier, RedisOutbox, resolveNotifySettings } from '../../src/notify/index.js';
import { captureLog } from '../daemon/helpers.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { startReceiver } from './receiver.js';

const availability = redisAvailability();
const GRANT_KEY = Buffer.alloc(32, 0x33);
const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;

function notice(type: ProfileNotice['type'], transition: string, at = Date.now()): ProfileNotice {
  return { type, profile: 'docs', folder: 'dropbox://data', reason: 'the connector answers 503', errorCode: 'SERVICE_UNAVAILABLE', at, transition };
}

describe.skipIf(availability.skip)('notices with replicas, on a real redis-server', () => {
  let redis: RedisServer;
  let prefix = 0;

  beforeAll(async () => {
    redis = await startRedisServer(availability);
  });
  afterAll(async () => {
    await redis?.stop();
  });

  async function replica(url: string, keyPrefix: string, leaseMs = 30_000) {
    const log = captureLog();
    const store = await RedisOutbox.open({ url: redis.url, keyPrefix, leaseMs, grantKey: GRANT_KEY, logger: log.logger }, 'redis');
    const settings = resolveNotifySettings({ urls: [url], urlField: '--notify-url', secret: SECRET });
    const notifier = new Notifier({ ...settings, store, log: log.logger, pollMs: false });
    return { notifier, store, log };
  }

  it('two replicas that see the same transition deliver it once; a reminder too', async () => {
    const receiver = await startReceiver();
    const keyPrefix = `t${++prefix}`;
    const a = await replica(receiver.url, keyPrefix);
    const b = await replica(receiver.url, keyPrefix);
    try {
      const at = Date.now();
      a.notifier.notice(notice('connector.failing', 'since:42', at));
      b.notifier.notice(notice('connector.failing', 'since:42', at));
      a.notifier.notice({ ...notice('profile.reauthorization_needed', 'v1:OAUTH_INVALID_GRANT', at) });
      b.notifier.notice({ ...notice('profile.reauthorization_needed', 'v1:OAUTH_INVALID_GRANT', at) });
      await Promise.all([a.notifier.accepted(), b.notifier.accepted()]);
      await Promise.all([a.notifier.tick(), b.notifier.tick()]);
      await Promise.all([a.notifier.tick(), b.notifier.tick()]);
      expect([...receiver.deliveredIds().values()]).toEqual([1, 1]);
      expect(receiver.received).toHaveLength(2);
      // Delivered and gone: the same transition seen again later by either replica queues nothing.
      b.notifier.notice(notice('connector.failing', 'since:42', at));
      await b.notifier.accepted();
      await Promise.all([a.notifier.tick(), b.notifier.tick()]);
      expect(receiver.received).toHaveLength(2);
    } finally {
      await a.notifier.close();
      await b.notifier.close();
    }
  });

  it('a sender that died holding the lease mid-send is taken over once the lease expires, and the notice is delivered once', async () => {
    const receiver = await startReceiver();
    const keyPrefix = `t${++prefix}`;
    // The one that dies: a short lease, taken and never released or recorded.
    const dying = await replica(receiver.url, keyPrefix, 1_000);
    const survivor = await replica(receiver.url, keyPrefix);
    try {
      dying.notifier.notice(notice('token.unavailable', 'since:7'));
      await dying.notifier.accepted();
      const [due] = await dying.store.due(Date.now());
      if (!due) throw new Error('nothing queued');
      const taken = await dying.store.claim(due.key);
      expect(taken).toBeDefined();
      await survivor.notifier.tick();
      expect(receiver.received).toHaveLength(0);
      await new Promise((resolve) => setTimeout(resolve, 1_300));
      await survivor.notifier.tick();
      expect(receiver.received).toHaveLength(1);
      expect([...receiver.deliveredIds().values()]).toEqual([1]);
      await survivor.notifier.tick();
      expect(receiver.received).toHaveLength(1);
    } finally {
      await dying.store.close();
      await survivor.notifier.close();
    }
  });

  it('keeps a notice given while Redis is away and queues it once Redis is back', async () => {
    const receiver = await startReceiver();
    const keyPrefix = `t${++prefix}`;
    const a = await replica(receiver.url, keyPrefix);
    try {
      await redis.kill();
      a.notifier.notice(notice('connector.failing', 'since:9'));
      await a.notifier.accepted();
      await a.notifier.tick();
      expect(a.log.records().some((r) => r.event === 'notify.queue_failed')).toBe(true);
      await redis.start();
      await expect.poll(async () => {
        await a.notifier.tick();
        return receiver.received.length;
      }, { timeout: 10_000, interval: 250 }).toBe(1);
    } finally {
      await a.notifier.close();
    }
  });
});
