// The outbox of replicas, in Redis: a pod's config dir dies with it. Deliveries in one hash, reminders in
// another, each record versioned (`v`); a delivery key once queued is remembered for a week (a key with a time
// limit), so every replica that sees the same transition queues it once. One replica sends each delivery: it
// takes the delivery's lease (SET NX with a time limit, longer than one attempt's deadline) and lets go when
// the attempt is recorded; a replica that dies mid-send leaves a lease that expires, and another sends it.
//
// Each delivery's payload is sealed and each reminder authenticated under a subkey of SYNCAUTH_GRANT_KEY
// (outbox-seal.ts), bound to the hash and field it is stored under: a dump of Redis holds no usable link, and a
// record written by anyone without the key is refused (logged once), never signed and sent. The previous
// release's records (version 1, in the clear) are not trusted here: they are left for a replica of that release.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../log.js';
import { closeRedisClient, newRedisClient } from '../net/redis.js';
import { RefusedOnce, subkey } from '../record-keys.js';
import { OUTBOX_VERSION, SEEN_MS, type Claim, type Delivery, type OutboxStore, type Reminder } from './outbox.js';
import { OutboxSeal } from './outbox-seal.js';

export interface RedisOutboxOptions {
  url: string;
  /** Prefix of every key, as the coordinator's. Default `syncauth`. */
  keyPrefix?: string;
  /** A sender's hold on one delivery; longer than one attempt's deadline. Default 30 s. */
  leaseMs?: number;
  /** Connect and command deadline. Default 2 s. */
  timeoutMs?: number;
  /** SYNCAUTH_GRANT_KEY: the records are sealed and authenticated under a subkey of it. */
  grantKey: Buffer;
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
  same = ok and type(decoded) == 'table' and decoded.v == tonumber(ARGV[5]) and decoded.transition == ARGV[4]
end
if (ARGV[3] == 'start' and same) or (ARGV[3] == 'advance' and not same) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1`;

export class RedisOutbox implements OutboxStore {
  readonly where: string;
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #leaseMs: number;
  readonly #log: Logger | undefined;
  readonly #seal: OutboxSeal;
  /** Records of another version, each logged once. */
  readonly #refused = new RefusedOnce();

  private constructor(client: Redis, where: string, options: RedisOutboxOptions) {
    this.#client = client;
    this.where = where;
    this.#prefix = `${options.keyPrefix ?? 'syncauth'}:notify`;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#log = options.logger;
    this.#seal = new OutboxSeal(subkey(options.grantKey, 'outbox-redis'), where, options.logger);
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

  /** The name a record is authenticated under: its hash and field. */
  #name(kind: 'outbox' | 'reminders', field: string): string {
    return `${this.#key(kind)}\0${field}`;
  }

  /** A record of the previous release is left for it, said once; anything else goes to the seal, which says why it refuses. */
  #fromPrevious(raw: string, what: string): boolean {
    let v: unknown;
    try {
      v = (JSON.parse(raw) as { v?: unknown } | null)?.v;
    } catch {
      return false;
    }
    if (v === OUTBOX_VERSION || typeof v !== 'number') return false;
    if (this.#refused.first(what, String(v))) {
      this.#log?.warn({ event: 'notify.outbox_refused', op: 'notify', record: what, version: v }, `a notice record in Redis (${what}) has version ${v}, which this release does not send; it is left for the release that wrote it`);
    }
    return true;
  }

  #decodeDelivery(key: string, raw: string): Delivery | undefined {
    if (this.#fromPrevious(raw, `delivery ${key}`)) return undefined;
    let stored: unknown;
    try {
      stored = JSON.parse(raw);
    } catch {
      stored = undefined;
    }
    const delivery = this.#seal.open(this.#name('outbox', key), stored);
    return delivery && delivery.key === key ? delivery : undefined;
  }

  #encodeDelivery(delivery: Delivery): string {
    return JSON.stringify(this.#seal.seal(this.#name('outbox', delivery.key), delivery));
  }

  async enqueue(deliveries: Delivery[]): Promise<Delivery[]> {
    const added: Delivery[] = [];
    for (const delivery of deliveries) {
      const stored = this.#encodeDelivery(delivery);
      const result = await this.#client.eval(ENQUEUE, 2, this.#key('seen', delivery.key), this.#key('outbox'), delivery.key, stored, String(SEEN_MS));
      if (Number(result) === 1) added.push(delivery);
    }
    return added;
  }

  async due(now: number): Promise<Delivery[]> {
    const all = await this.#client.hgetall(this.#key('outbox'));
    return Object.entries(all)
      .flatMap(([key, raw]) => {
        const delivery = this.#decodeDelivery(key, raw);
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
    const delivery = raw === null ? undefined : this.#decodeDelivery(key, raw);
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
    await this.#client.hset(this.#key('outbox'), delivery.key, this.#encodeDelivery(delivery));
  }

  async reminders(): Promise<Reminder[]> {
    const all = await this.#client.hgetall(this.#key('reminders'));
    return Object.entries(all).flatMap(([profile, raw]) => {
      if (this.#fromPrevious(raw, `reminder of ${profile}`)) return [];
      const reminder = this.#seal.openReminder(this.#name('reminders', profile), raw);
      return reminder && reminder.profile === profile ? [reminder] : [];
    });
  }

  async #writeReminder(reminder: Reminder, mode: 'start' | 'advance'): Promise<boolean> {
    const stored = this.#seal.signReminder(this.#name('reminders', reminder.profile), reminder);
    return Number(await this.#client.eval(REMINDER, 1, this.#key('reminders'), reminder.profile, stored, mode, reminder.transition, String(OUTBOX_VERSION))) === 1;
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
