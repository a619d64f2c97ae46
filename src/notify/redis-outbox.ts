// The outbox of replicas, in Redis: a pod's config dir dies with it. Deliveries in one hash, reminders in
// another, each record versioned (`v`); a delivery key once queued is remembered for a week (a key with a time
// limit), so every replica that sees the same transition queues it once. One replica sends each delivery: it
// takes the delivery's lease (SET NX with a time limit, longer than one attempt's deadline) and lets go when
// the attempt is recorded; a replica that dies mid-send leaves a lease that expires, and another sends it.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../log.js';
import { closeRedisClient, newRedisClient } from '../net/redis.js';
import { OUTBOX_VERSION, SEEN_MS, type Claim, type Delivery, type OutboxStore, type Reminder } from './outbox.js';

export interface RedisOutboxOptions {
  url: string;
  /** Prefix of every key, as the coordinator's. Default `syncauth`. */
  keyPrefix?: string;
  /** A sender's hold on one delivery; longer than one attempt's deadline. Default 30 s. */
  leaseMs?: number;
  /** Connect and command deadline. Default 2 s. */
  timeoutMs?: number;
  logger?: Logger;
}

// Queued only if its key was never seen: the check and the write are one step.
const ENQUEUE = `if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[3]) then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  return 1
end
return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;
// ARGV[3] 'start': write unless the same transition is there; 'advance': write only if it is.
const REMINDER = `local current = redis.call('HGET', KEYS[1], ARGV[1])
local same = false
if current then
  local ok, decoded = pcall(cjson.decode, current)
  same = ok and type(decoded) == 'table' and decoded.transition == ARGV[4]
end
if (ARGV[3] == 'start' and same) or (ARGV[3] == 'advance' and not same) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1`;

type Versioned<T> = T & { v: number };

export class RedisOutbox implements OutboxStore {
  readonly where: string;
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #leaseMs: number;
  readonly #log: Logger | undefined;
  /** Records of another version, each logged once. */
  readonly #refused = new Set<string>();

  private constructor(client: Redis, where: string, options: RedisOutboxOptions) {
    this.#client = client;
    this.where = where;
    this.#prefix = `${options.keyPrefix ?? 'syncauth'}:notify`;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#log = options.logger;
  }

  /** Connects (ioredis is loaded only here); an unreachable Redis is retried by the client, not fatal. */
  static async open(options: RedisOutboxOptions, where: string): Promise<RedisOutbox> {
    const client = await newRedisClient(options.url, options.timeoutMs ?? 2_000);
    // The coordinator logs Redis outages; the notifier's own failures say what they could not do.
    client.on('error', () => undefined);
    await client.connect().catch(() => undefined);
    return new RedisOutbox(client, where, options);
  }

  #key(kind: 'outbox' | 'reminders' | 'seen' | 'lease', id?: string): string {
    return id === undefined ? `${this.#prefix}:${kind}` : `${this.#prefix}:${kind}:${id}`;
  }

  #decode<T>(raw: string, what: string): T | undefined {
    try {
      const record = JSON.parse(raw) as Versioned<T>;
      if (record.v === OUTBOX_VERSION) {
        const { v: _v, ...rest } = record;
        return rest as T;
      }
      if (!this.#refused.has(what)) {
        this.#refused.add(what);
        this.#log?.error({ event: 'notify.outbox_refused', op: 'notify', record: what, version: record.v ?? null }, `a notice record in Redis (${what}) has version ${JSON.stringify(record.v ?? null)}, which this release does not know; it is left for the release that wrote it`);
      }
    } catch {
      if (!this.#refused.has(what)) {
        this.#refused.add(what);
        this.#log?.error({ event: 'notify.outbox_refused', op: 'notify', record: what }, `a notice record in Redis (${what}) is damaged; it is left as it is`);
      }
    }
    return undefined;
  }

  async enqueue(deliveries: Delivery[]): Promise<Delivery[]> {
    const added: Delivery[] = [];
    for (const delivery of deliveries) {
      const stored = JSON.stringify({ v: OUTBOX_VERSION, ...delivery });
      const result = await this.#client.eval(ENQUEUE, 2, this.#key('seen', delivery.key), this.#key('outbox'), delivery.key, stored, String(SEEN_MS));
      if (Number(result) === 1) added.push(delivery);
    }
    return added;
  }

  async due(now: number): Promise<Delivery[]> {
    const all = await this.#client.hgetall(this.#key('outbox'));
    return Object.entries(all)
      .flatMap(([key, raw]) => {
        const delivery = this.#decode<Delivery>(raw, `delivery ${key}`);
        return delivery && delivery.nextAt <= now ? [delivery] : [];
      })
      .sort((a, b) => a.nextAt - b.nextAt);
  }

  async claim(key: string): Promise<{ delivery: Delivery; claim: Claim } | undefined> {
    const leaseKey = this.#key('lease', key);
    const token = randomUUID();
    if ((await this.#client.set(leaseKey, token, 'PX', this.#leaseMs, 'NX')) !== 'OK') return undefined;
    const claim: Claim = { release: async () => void (await this.#client.eval(RELEASE, 1, leaseKey, token)) };
    // Read under the lease: another replica may have delivered it between the listing and the lease.
    const raw = await this.#client.hget(this.#key('outbox'), key);
    const delivery = raw === null ? undefined : this.#decode<Delivery>(raw, `delivery ${key}`);
    if (!delivery) {
      await claim.release().catch(() => undefined);
      return undefined;
    }
    return { delivery, claim };
  }

  async remove(key: string): Promise<void> {
    await this.#client.hdel(this.#key('outbox'), key);
  }

  async reschedule(delivery: Delivery): Promise<void> {
    await this.#client.hset(this.#key('outbox'), delivery.key, JSON.stringify({ v: OUTBOX_VERSION, ...delivery }));
  }

  async reminders(): Promise<Reminder[]> {
    const all = await this.#client.hgetall(this.#key('reminders'));
    return Object.entries(all).flatMap(([profile, raw]) => {
      const reminder = this.#decode<Reminder>(raw, `reminder of ${profile}`);
      return reminder ? [reminder] : [];
    });
  }

  async #writeReminder(reminder: Reminder, mode: 'start' | 'advance'): Promise<boolean> {
    const stored = JSON.stringify({ v: OUTBOX_VERSION, ...reminder });
    return Number(await this.#client.eval(REMINDER, 1, this.#key('reminders'), reminder.profile, stored, mode, reminder.transition)) === 1;
  }

  startReminder(reminder: Reminder): Promise<boolean> {
    return this.#writeReminder(reminder, 'start');
  }

  async advanceReminder(reminder: Reminder): Promise<void> {
    await this.#writeReminder(reminder, 'advance');
  }

  async endReminder(profile: string): Promise<void> {
    await this.#client.hdel(this.#key('reminders'), profile);
  }

  async close(): Promise<void> {
    await closeRedisClient(this.#client);
  }
}
