// The page's records in Redis, for replicas: a link minted by one replica (the one that sent the notice) opens on
// any other behind the load balancer, and the authorize round begun on one replica's page may come back to
// another's callback; a restart loses neither. As in the file store, only digests are kept: a link's SHA-256
// names its record, an authorize round's state is kept as its SHA-256, and the round's PKCE verifier is sealed
// (AES-256-GCM) under a key derived from the state, which only the person's browser holds: Redis cannot
// complete a round, and neither can anyone who reads it. Every record has a time limit (the link's expiry, the
// round's 15 minutes). Lookups are by digest, so the time one takes says nothing about any token.
//
// Whoever can write Redis cannot mint a link or begin a round either: every record that decides who may complete
// a round (a link, a round, a profile's spent mark) carries an HMAC-SHA256 under a subkey of SYNCAUTH_GRANT_KEY
// over its fields and the key it is stored under, checked before anything in it is believed. A record that does
// not verify is refused (the page answers as for a wrong link) and logged once as `reauth.record_refused`; a spent
// mark that does not verify refuses every link of its profile. What a Redis writer still can do is delete.
//
// Keys (after the prefix, `syncauth` by default): `reauth:link:<digest>` (the record, JSON, versioned),
// `reauth:links:<profile>` (a sorted set of the profile's link digests by creation, to spend them all and count
// the live ones against LINKS_PER_PROFILE), `reauth:round:<digest of the state>` (an authorize round, read once),
// `reauth:spent:<profile>` (when its links were last spent: a link made before is refused, should its record be
// put back), `reauth:claim:<profile>` (the completion under way for the profile: a random id, set only when
// absent, with a lease as long as a completion may take, removed by its holder alone).
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { SyncauthError } from '../errors.js';
import type { Logger } from '../log.js';
import { closeRedisClient, newRedisClient } from '../net/redis.js';
import { openRecord, RefusedOnce, signRecord, subkey, type RecordRefusal } from '../record-keys.js';
import { LINKS_PER_PROFILE, linksFullError, type LinkRecord, type LinkStore } from './links.js';

/** An authorize round begun on the page: bound to its link, its verifier needed to exchange the code. */
export interface PendingRound {
  profile: string;
  linkHash: string;
  codeVerifier: string;
  /** Absent for the paste form (Dropbox's code display). */
  redirectUri?: string;
  expiresAt: number;
}

/** Where the page keeps its authorize rounds between the page and the callback. */
export interface RoundStore {
  /** Keeps a round under its state (of which only a digest is kept). */
  remember(state: string, round: PendingRound, now: number): Promise<void>;
  /** The round the state names, removed (one-time), when it is unexpired. */
  take(state: string, now: number): Promise<PendingRound | undefined>;
}

/**
 * Version 2: every record carries a MAC (HMAC-SHA256 under a subkey of SYNCAUTH_GRANT_KEY) over its fields and the
 * key it is stored under. Version 1 records (the previous release's, unauthenticated) are refused: anyone who could
 * write Redis could have written them.
 */
const VERSION = 2;
/** A spent mark outlives every link it could speak for: the longest link lifetime is 30 days. */
const SPENT_TTL_MS = 31 * 24 * 3_600_000;

// Forgets the profile's links that expired, then keeps the new one unless `limit` are live (0: refused). A live
// link is never dropped.
const ADD = `local live = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if redis.call('EXISTS', ARGV[6] .. member) == 1 then live = live + 1 else redis.call('ZREM', KEYS[2], member) end
end
if live >= tonumber(ARGV[5]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 1`;
// Marks the profile's links spent (a link made before the mark is refused, should its record come back), then
// deletes every one of them; returns how many were live.
const SPEND = `redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
local spent = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  spent = spent + redis.call('DEL', ARGV[1] .. member)
end
redis.call('DEL', KEYS[1])
return spent`;

// The claim's holder, and only it, extends or removes it.
const CLAIM_RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;
// Replaces a claim that did not verify, only if it is still the one read.
const CLAIM_REPLACE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end
return 0`;
const CLAIM_RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('base64url');
}

/** The key sealing a round's verifier: derived from the state, apart from the digest that names the round. */
function roundKey(state: string): Buffer {
  return createHash('sha256').update(`syncauth-reauth-round\0${state}`, 'utf8').digest();
}

type RecordKind = 'link' | 'round' | 'spent mark' | 'claim';

export interface RedisReauthStoreOptions {
  url: string;
  keyPrefix?: string;
  timeoutMs?: number;
  /** SYNCAUTH_GRANT_KEY: the records are authenticated under a subkey of it; without it nothing is read or written. */
  grantKey: Buffer;
  /** Where refused records are told (warn); never with their content. */
  logger?: Logger;
  /** The wall clock a claim's lease is judged by. Default Date.now. */
  now?: () => number;
}

export class RedisReauthStore {
  readonly links: LinkStore;
  readonly rounds: RoundStore;
  readonly #client: Redis;

  private constructor(client: Redis, prefix: string, grantKey: Buffer, log: Logger | undefined, clock: () => number) {
    this.#client = client;
    const macKey = subkey(grantKey, 'reauth-records');
    const key = (...parts: string[]): string => [prefix, 'reauth', ...parts].join(':');
    const command = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
      try {
        return await run();
      } catch (error) {
        throw new SyncauthError('REAUTH_STORE_UNAVAILABLE', `Redis did not answer, so the re-authorization page could not ${what}`, { kind: 'coordinator', cause: error });
      }
    };
    const refused = new RefusedOnce();
    /** The fields of the record stored under `name`, or undefined (logged once) when it does not verify. */
    const open = (kind: RecordKind, name: string, raw: string | null): Record<string, unknown> | undefined => {
      if (raw === null) return undefined;
      const opened = openRecord(macKey, name, raw, VERSION);
      if ('fields' in opened) return opened.fields;
      if (refused.first(name, raw)) {
        log?.warn(
          { event: 'reauth.record_refused', op: 'reauth', record: kind, reason: opened.refused },
          `a re-authorization ${kind} in Redis was refused (${REASONS[opened.refused]}); it is not acted on`,
        );
      }
      return undefined;
    };
    const parseLink = (name: string, raw: string | null): LinkRecord | undefined => {
      const fields = open('link', name, raw);
      if (!fields) return undefined;
      const { hash, profile, expiresAt, createdAt, allowAccountChange } = fields;
      if (typeof hash !== 'string' || typeof profile !== 'string' || typeof expiresAt !== 'number' || typeof createdAt !== 'number' || typeof allowAccountChange !== 'boolean') return undefined;
      return { hash, profile, expiresAt, createdAt, allowAccountChange };
    };
    /** When the profile's links were last spent; `refused` when its mark does not verify (every link is then refused). */
    const spentAt = async (profile: string): Promise<number | 'refused' | undefined> => {
      const name = key('spent', profile);
      const raw = await command('look a link up', () => client.get(name));
      if (raw === null) return undefined;
      const fields = open('spent mark', name, raw);
      if (!fields || fields.profile !== profile || typeof fields.at !== 'number') return 'refused';
      return fields.at;
    };
    const unspent = (link: LinkRecord, spent: number | 'refused' | undefined): boolean => spent === undefined || (spent !== 'refused' && link.createdAt > spent);

    this.links = {
      claim: async (profile, leaseMs, complete) => {
        const claimKey = key('claim', profile);
        // The claim carries a MAC like every record here: one a Redis writer planted (to hold a profile's
        // completion off) is refused and replaced, only if it is still the one read. It says until when it holds
        // (the Redis time limit is the writer's to drop): a real claim of an earlier completion, put back without
        // a time limit, lapses too. A lease renewed once ends at most a lease past `until`, so that long is allowed.
        const holder = signRecord(macKey, claimKey, { v: VERSION, profile, holder: randomBytes(16).toString('base64url'), until: clock() + leaseMs });
        const lease = String(Math.max(1, Math.ceil(leaseMs)));
        let taken = (await command('claim the link', () => client.set(claimKey, holder, 'PX', lease, 'NX'))) === 'OK';
        if (!taken) {
          const current = await command('claim the link', () => client.get(claimKey));
          const fields = current === null ? undefined : open('claim', claimKey, current);
          const lapsed = fields !== undefined && !(typeof fields.until === 'number' && fields.until + leaseMs > clock());
          if (lapsed) {
            log?.warn(
              { event: 'reauth.record_refused', op: 'reauth', record: 'claim', reason: 'lapsed' },
              'a re-authorization claim in Redis was refused (its lease ended, though Redis still holds it); it is replaced',
            );
          }
          if (current !== null && (!fields || fields.profile !== profile || lapsed)) {
            taken = Number(await command('claim the link', () => client.eval(CLAIM_REPLACE, 1, claimKey, current, holder, lease))) === 1;
          }
        }
        if (!taken) return { claimed: false };
        try {
          const value = await complete({
            renew: async () => Number(await command('hold the claim on the link', () => client.eval(CLAIM_RENEW, 1, claimKey, holder, lease))) === 1,
          });
          return { claimed: true, value };
        } finally {
          // Should Redis not answer, the lease ends it.
          await client.eval(CLAIM_RELEASE, 1, claimKey, holder).catch(() => undefined);
        }
      },
      add: async (record) => {
        const ttl = Math.max(1, record.expiresAt - record.createdAt);
        const name = key('link', record.hash);
        const stored = signRecord(macKey, name, { v: VERSION, hash: record.hash, profile: record.profile, expiresAt: record.expiresAt, createdAt: record.createdAt, allowAccountChange: record.allowAccountChange });
        const added = await command('keep a link', () =>
          client.eval(ADD, 2, name, key('links', record.profile), stored, String(ttl), String(record.createdAt), record.hash, String(LINKS_PER_PROFILE), `${key('link')}:`),
        );
        if (Number(added) !== 1) {
          const live = await this.links.outstanding(record.profile, record.createdAt);
          throw linksFullError(record.profile, live.map((link) => link.expiresAt));
        }
      },
      find: async (hash, now) => {
        if (!/^[A-Za-z0-9_-]{43}$/.test(hash)) return undefined;
        const name = key('link', hash);
        const link = parseLink(name, await command('look a link up', () => client.get(name)));
        if (!link || link.hash !== hash || !(link.expiresAt > now)) return undefined;
        return unspent(link, await spentAt(link.profile)) ? link : undefined;
      },
      spend: async (profile) => {
        // The mark covers every link being spent by its own (authenticated) creation time, not this replica's
        // clock: a link minted later by a replica whose clock is behind stays good.
        const members = await command('spend the links', () => client.zrange(key('links', profile), 0, -1));
        const raws = members.length > 0 ? await command('spend the links', () => client.mget(...members.map((member) => key('link', member)))) : [];
        const created = raws.flatMap((raw, i) => {
          const link = parseLink(key('link', members[i] as string), raw);
          return link && link.profile === profile ? [link.createdAt] : [];
        });
        const before = await spentAt(profile);
        if (typeof before === 'number') created.push(before);
        const name = key('spent', profile);
        const mark = signRecord(macKey, name, { v: VERSION, profile, at: created.length > 0 ? Math.max(...created) : Date.now() });
        return Number(await command('spend the links', () => client.eval(SPEND, 2, key('links', profile), name, `${key('link')}:`, mark, String(SPENT_TTL_MS))));
      },
      outstanding: async (profile, now) => {
        const members = await command('list the links', () => client.zrange(key('links', profile), 0, -1));
        if (members.length === 0) return [];
        const raws = await command('list the links', () => client.mget(...members.map((member) => key('link', member))));
        const spent = await spentAt(profile);
        return raws
          .map((raw, i) => parseLink(key('link', members[i] as string), raw))
          .filter((link): link is LinkRecord => link !== undefined && link.profile === profile && link.expiresAt > now && unspent(link, spent))
          .map((link) => ({ expiresAt: link.expiresAt, allowAccountChange: link.allowAccountChange }));
      },
    };

    this.rounds = {
      remember: async (state, round, now) => {
        const iv = randomBytes(12);
        const cipher = createCipheriv('aes-256-gcm', roundKey(state), iv);
        const sealed = Buffer.concat([cipher.update(round.codeVerifier, 'utf8'), cipher.final()]);
        const name = key('round', sha256(state));
        const stored = signRecord(macKey, name, {
          v: VERSION,
          profile: round.profile,
          linkHash: round.linkHash,
          ...(round.redirectUri !== undefined ? { redirectUri: round.redirectUri } : {}),
          expiresAt: round.expiresAt,
          verifier: { iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: sealed.toString('base64') },
        });
        await command('begin the authorization', () => client.set(name, stored, 'PX', Math.max(1, round.expiresAt - now)));
      },
      take: async (state, now) => {
        // Read and removed at once: a state is good for one callback, on whichever replica it lands.
        const name = key('round', sha256(state));
        const fields = open('round', name, await command('finish the authorization', () => client.getdel(name)));
        if (!fields) return undefined;
        try {
          const stored = fields as { profile: string; linkHash: string; redirectUri?: string; expiresAt: number; verifier: { iv: string; tag: string; data: string } };
          if (typeof stored.profile !== 'string' || typeof stored.linkHash !== 'string' || !(stored.expiresAt > now)) return undefined;
          const decipher = createDecipheriv('aes-256-gcm', roundKey(state), Buffer.from(stored.verifier.iv, 'base64'));
          decipher.setAuthTag(Buffer.from(stored.verifier.tag, 'base64'));
          const codeVerifier = Buffer.concat([decipher.update(Buffer.from(stored.verifier.data, 'base64')), decipher.final()]).toString('utf8');
          return {
            profile: stored.profile,
            linkHash: stored.linkHash,
            codeVerifier,
            ...(typeof stored.redirectUri === 'string' ? { redirectUri: stored.redirectUri } : {}),
            expiresAt: stored.expiresAt,
          };
        } catch {
          return undefined;
        }
      },
    };
  }

  /** Connects (ioredis is loaded only here); an unreachable Redis is retried by the client, and each call says so. */
  static async open(options: RedisReauthStoreOptions): Promise<RedisReauthStore> {
    const client = await newRedisClient(options.url, options.timeoutMs ?? 2_000);
    // The coordinator logs Redis outages; the page's own failures say what they could not do.
    client.on('error', () => undefined);
    await client.connect().catch(() => undefined);
    return new RedisReauthStore(client, options.keyPrefix ?? 'syncauth', options.grantKey, options.logger, options.now ?? Date.now);
  }

  async close(): Promise<void> {
    await closeRedisClient(this.#client);
  }
}

const REASONS: Record<RecordRefusal, string> = {
  malformed: 'it is damaged',
  version: 'it is of a format this release does not trust: the previous release\'s records carry no MAC',
  mac: 'its MAC does not verify under SYNCAUTH_GRANT_KEY: it was written by someone without the key, under another key name, or changed since',
};
