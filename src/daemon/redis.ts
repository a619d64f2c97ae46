// Coordination of replicas through Redis (ioredis). A profile's lease is a key set with NX and a time limit,
// holding a random token: only the holder extends or deletes it (compare-and-pexpire, compare-and-delete in
// Lua), so a replica that stalled past its lease can never release a lease another replica has taken since.
// The record of the last reconcile tells every replica which token the connector holds (its expiry), so only
// one reconciles per lifetime. Commands fail fast while Redis is away (no offline queue): the daemon then
// holds its reconciles and goes on renewing. The record is versioned (`v`); the previous release's
// `<prefix>:renewal:<profile>` records are not read and expire on their own.
//
// The token checks' records (`<prefix>:check:<profile>:<cycle>`: `pending` while one replica checks, then what it
// found) make the other replicas renew on an `invalid` or `expired` finding, so they carry an HMAC-SHA256 under a
// subkey of SYNCAUTH_GRANT_KEY over their fields and their key name: whoever can write Redis but lacks the key
// cannot make every replica renew. A record that does not verify is ignored (logged once at warn): at a claim the
// replica checks for itself, while waiting it learns nothing from it. Without the key the coordinator shares no
// checks at all, and each replica checks its profiles itself. Fleet members, account pauses and each shared
// profile's budget of token calls (`<prefix>:budget:<profile>`, call-budget.ts) are authenticated the same way,
// each kind under a subkey of its own.
import { randomUUID } from 'node:crypto';
import { ValidationError } from '../errors.js';
import { parseUrl } from '../net/http.js';
import { closeRedisClient, newRedisClient } from '../net/redis.js';
import type { Logger } from '../log.js';
import { openRecord, RefusedOnce, signRecord, subkey, type RecordRefusal } from '../record-keys.js';
import { CoordinatorUnavailableError, type Coordinator, type Lease, type SharedReconcile } from './coordinator.js';
import type { PauseBackend } from './account-pause.js';
import type { BudgetBackend, BudgetState } from './call-budget.js';
import type { FleetBackend } from './fleet.js';
import type { CheckOutcome } from './types.js';

const CHECK_OUTCOMES: ReadonlySet<string> = new Set<CheckOutcome>(['valid', 'invalid', 'expired', 'missing_scope', 'account_mismatch', 'failed', 'shared']);

function isCheckOutcome(value: string): value is CheckOutcome {
  return CHECK_OUTCOMES.has(value);
}

export interface RedisCoordinatorOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…`. */
  url: string;
  /** Prefix of every key, so several deployments can share one Redis. Default `syncauth`. */
  keyPrefix?: string;
  /** Lifetime of a lease unless extended; it is extended every third of it while work runs. Default 30 s. */
  leaseMs?: number;
  /** Names this replica in the shared record and in logs. Default a random id. */
  replicaId?: string;
  /** Connect and command deadline. Default 2 s. */
  timeoutMs?: number;
  /** The daemon's wall clock, which the record's times are translated to and from. Default Date.now. */
  now?: () => number;
  logger?: Logger;
  /**
   * SYNCAUTH_GRANT_KEY: the token checks' records are authenticated under a subkey of it. Without it the
   * coordinator shares no token checks (each replica checks for itself).
   */
  grantKey?: Buffer;
}

export interface RedisCoordinator extends Coordinator {
  /** Resolves once connected, or rejects after the connect deadline; the client keeps retrying either way. */
  ready(): Promise<void>;
}

const EXTEND = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;
// Never replaces a record of a later expiry: a replica that reconciled, stalled, and writes late must not make
// the others believe the connector holds an older token than it does.
const RECORD = `local current = redis.call('GET', KEYS[1])
if current then
  local ok, decoded = pcall(cjson.decode, current)
  if ok and type(decoded) == 'table' and tonumber(decoded.expiresAt) and tonumber(decoded.expiresAt) > tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1`;
// The same rule for sealed grant records: an older grant never replaces a newer one, whoever writes last.
const GRANT = `local current = redis.call('GET', KEYS[1])
if current then
  local ok, decoded = pcall(cjson.decode, current)
  if ok and type(decoded) == 'table' and tonumber(decoded.issuedAt) and tonumber(decoded.issuedAt) >= tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1`;
// The fleet's members, one round trip: Redis's time, and the hash unless a writer has bloated it past the bound
// (then the caller treats Redis as unusable, and falls back, rather than reading without end).
const MEMBERS = `local t = redis.call('TIME')
local n = redis.call('HLEN', KEYS[1])
if n > tonumber(ARGV[1]) then return {t[1], t[2], n} end
return {t[1], t[2], n, redis.call('HGETALL', KEYS[1])}`;
const HSET_IF = `if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) else return 0 end`;
const HDEL_IF = `if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) else return 0 end`;
/** More members than any fleet has: past it the hash is someone's flood. */
const MAX_MEMBERS = 256;
/** Version of an account's pause: `{ v, until, mac }`, until on Redis's clock (ms). */
const PAUSE_VERSION = 1;
/** Version of a profile's budget of token calls: `{ v, spent, at, failures, retryAt?, mac }`, times on Redis's clock (ms). */
const BUDGET_VERSION = 1;
/** A budget is whole again within a day of its last call (call-budget.ts); its record goes a day after. */
const BUDGET_TTL_MS = 24 * 3600 * 1000;
// Stores ARGV[2] only if the key still holds ARGV[1] ('' for none): a count read, changed and written back
// never loses another replica's call made in between.
const SET_IF = `if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`;
/** Version of a member's record: `{ v, until, mac }`, until on Redis's clock (ms). */
const MEMBER_VERSION = 1;
// Long enough to outlive any token it describes; short enough that records of removed profiles go away.
const RECORD_TTL_MS = 7 * 24 * 3600 * 1000;

const RECORD_VERSION = 1;
/** Version of a token check's record: `{ v, state, mac }`, state `pending` or a CheckOutcome. */
const CHECK_VERSION = 1;
const CHECK_REASONS: Record<RecordRefusal, string> = {
  malformed: 'it is damaged or of the previous release, which wrote it without a MAC',
  version: 'it was written in a format this release does not read',
  mac: 'its MAC does not verify under SYNCAUTH_GRANT_KEY: it was written by someone without the key, under another key name, or changed since',
};

/**
 * Opens records of one kind, authenticated under `macKey` (record-keys.ts): what `accept` takes of the fields
 * of one that verifies, or undefined. A record that does not verify, or whose fields `accept` refuses, is told to
 * the caller's `refused` once per record (by its name and content), never at every read.
 */
function recordOpener<T>(macKey: Buffer, version: number, accept: (fields: Record<string, unknown>) => T | undefined) {
  const once = new RefusedOnce();
  return (name: string, raw: string, refused: (reason: RecordRefusal) => void): T | undefined => {
    const opened = openRecord(macKey, name, raw, version);
    const value = 'fields' in opened ? accept(opened.fields) : undefined;
    if (value === undefined && once.first(name, raw)) refused('fields' in opened ? 'malformed' : opened.refused);
    return value;
  };
}

/** A stored record, or undefined for one this release cannot read (another version, or damaged). */
export function decodeReconcile(raw: string): SharedReconcile | undefined {
  try {
    const record = JSON.parse(raw) as Partial<SharedReconcile> & { v?: unknown };
    if (record.v !== RECORD_VERSION || typeof record.expiresAt !== 'number' || typeof record.reconciledAt !== 'number') return undefined;
    return {
      expiresAt: record.expiresAt,
      reconciledAt: record.reconciledAt,
      replica: String(record.replica ?? ''),
      ...(typeof record.connectorId === 'string' && record.connectorId ? { connectorId: record.connectorId } : {}),
    };
  } catch {
    return undefined;
  }
}

/** The Redis URL as it may appear in a log line: no user name, no password. */
export function redisTarget(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

export function checkRedisUrl(url: string, field = 'redisUrl'): void {
  // A password in a Redis URL is how Redis takes one: allowed, and never printed (see redisTarget).
  const parsed = parseUrl(url, ['redis:', 'rediss:'], { credentials: 'allow' });
  if (parsed === 'not_a_url') throw new ValidationError([{ field, message: 'must be a URL like redis://127.0.0.1:6379' }]);
  if (typeof parsed === 'string') throw new ValidationError([{ field, message: 'must start with redis:// or rediss://' }]);
}

/** Async because ioredis is loaded only when a Redis URL is given (src/net/redis.ts). */
export async function createRedisCoordinator(options: RedisCoordinatorOptions): Promise<RedisCoordinator> {
  checkRedisUrl(options.url);
  const prefix = options.keyPrefix ?? 'syncauth';
  const leaseMs = options.leaseMs ?? 30_000;
  const timeoutMs = options.timeoutMs ?? 2_000;
  const replicaId = options.replicaId ?? randomUUID();
  const log = options.logger?.child({ component: 'redis', redis: redisTarget(options.url) });
  const leases = new Set<() => void>();
  const availableListeners = new Set<() => void>();
  let down = false;
  let closed = false;

  const client = await newRedisClient(options.url, timeoutMs);
  // Without a listener ioredis would report every failed reconnect as an unhandled error; one line per
  // outage is what a reader needs.
  const markDown = (reason: string): void => {
    if (closed || down) return;
    down = true;
    log?.warn(
      { event: 'coordinator.down', op: 'coordinate', errorCode: 'COORDINATOR_UNAVAILABLE', error: reason },
      'Redis is unreachable: this replica keeps renewing its own tokens and holds connector reconciles until it is back',
    );
  };
  client.on('error', (error: Error) => markDown(error.message));
  client.on('close', () => markDown('the connection closed'));
  client.on('ready', () => {
    const wasDown = down;
    down = false;
    if (!wasDown) return;
    log?.info({ event: 'coordinator.up', op: 'coordinate' }, 'Redis is reachable again');
    for (const listener of availableListeners) listener();
  });
  const connecting = client.connect().catch(() => undefined);

  const key = (kind: 'lease' | 'reconciled' | 'grant', profile: string): string => `${prefix}:${kind}:${profile}`;
  /** The token check of one profile and interval: `pending` while the replica that claimed it checks, then what it found. */
  const checkKey = (profile: string, cycle: number): string => `${prefix}:check:${profile}:${cycle}`;
  const now = options.now ?? Date.now;

  const checks = options.grantKey ? checkSharing(options.grantKey) : {};
  const fleet = options.grantKey ? fleetMembers(options.grantKey) : undefined;
  const pauses = options.grantKey ? accountPauses(options.grantKey) : undefined;
  const budgets = options.grantKey ? callBudgets(options.grantKey) : undefined;

  /**
   * Each shared profile's budget of token calls (call-budget.ts): `<prefix>:budget:<profile>`, its times on
   * Redis's clock, authenticated under a subkey of `grantKey` with the key's name. A record that does not verify
   * counts nothing (logged once) and is replaced by the next call's; a write goes through only if the record is
   * still the one read (SET_IF), else it is read and merged again.
   */
  function callBudgets(grantKey: Buffer): BudgetBackend {
    const macKey = subkey(grantKey, 'budget-records');
    const finite = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
    const open = recordOpener(macKey, BUDGET_VERSION, (fields): BudgetState | undefined => {
      const { spent, at, failures, retryAt } = fields;
      if (!finite(spent) || spent < 0 || !finite(at) || !finite(failures) || failures < 0 || (retryAt !== undefined && !finite(retryAt))) return undefined;
      return { spent, at, failures: Math.floor(failures), ...(retryAt !== undefined ? { retryAt } : {}) };
    });
    const at = (profile: string): string => `${prefix}:budget:${profile}`;
    const shifted = (state: BudgetState, by: number): BudgetState => ({ ...state, at: state.at + by, ...(state.retryAt !== undefined ? { retryAt: state.retryAt + by } : {}) });
    const read = async (profile: string): Promise<{ raw: string | null; state: BudgetState | undefined; skew: number }> => {
      const { raw, skew } = await readOnRedisClock(at(profile), 'read a budget of token calls');
      if (raw === null) return { raw, state: undefined, skew };
      const state = open(at(profile), raw, (reason) =>
        log?.warn({ profile, event: 'budget.record_refused', op: 'renew', reason }, `a budget of token calls of profile "${profile}" in Redis was refused (${CHECK_REASONS[reason]}); it counts nothing`),
      );
      return { raw, state: state && shifted(state, -skew), skew };
    };
    return {
      async read(profile) {
        return (await read(profile)).state;
      },
      async update(profile, next) {
        for (let tries = 0; tries < 5; tries += 1) {
          const { raw, state, skew } = await read(profile);
          const written = next(state);
          const stored = shifted(written, skew);
          const record = signRecord(macKey, at(profile), {
            v: BUDGET_VERSION,
            spent: stored.spent,
            at: Math.round(stored.at),
            failures: stored.failures,
            ...(stored.retryAt !== undefined ? { retryAt: Math.round(stored.retryAt) } : {}),
          });
          const done = await command('record a token call', () => client.eval(SET_IF, 1, at(profile), raw ?? '', record, String(BUDGET_TTL_MS)));
          if (Number(done) === 1) return written;
        }
        throw unavailable(`record a token call of profile "${profile}": its record kept changing`);
      },
    };
  }

  /**
   * Pauses of an account's token calls (account-pause.ts): `<prefix>:pause:<account>`, holding the pause's end on
   * Redis's clock, authenticated under a subkey of `grantKey` with the key's name, and expiring with the pause. A
   * record that does not verify pauses nothing (logged once).
   */
  function accountPauses(grantKey: Buffer): PauseBackend {
    const macKey = subkey(grantKey, 'pause-records');
    const open = recordOpener(macKey, PAUSE_VERSION, (fields) => (typeof fields.until === 'number' ? fields.until : undefined));
    const at = (account: string): string => `${prefix}:pause:${account}`;
    const read = async (account: string): Promise<{ until: number | undefined; skew: number }> => {
      const { raw, skew } = await readOnRedisClock(at(account), 'read a pause');
      if (raw === null) return { until: undefined, skew };
      const until = open(at(account), raw, (reason) =>
        log?.warn({ event: 'pause.record_refused', op: 'renew', reason }, `a pause of a Dropbox account's token requests in Redis was refused (${CHECK_REASONS[reason]}); it pauses nothing`),
      );
      return { until, skew };
    };
    return {
      async readPause(account) {
        const { until, skew } = await read(account);
        return until === undefined ? undefined : until - skew;
      },
      async writePause(account, until) {
        const { until: current, skew } = await read(account);
        const end = Math.ceil(until + skew);
        if (current !== undefined && current >= end) return;
        const ttl = end - (now() + skew);
        if (ttl <= 0) return;
        await command('record a pause', () => client.set(at(account), signRecord(macKey, at(account), { v: PAUSE_VERSION, until: end }), 'PX', String(ttl)));
      },
    };
  }

  /**
   * The fleet's members (fleet.ts): a hash `<prefix>:fleet:members`, a field per replica holding its lease's end
   * on Redis's clock, authenticated under a subkey of `grantKey` together with the field's name. A record that
   * does not verify is no member (logged once); one whose lease has ended long ago is removed.
   */
  function fleetMembers(grantKey: Buffer): FleetBackend {
    const macKey = subkey(grantKey, 'fleet-records');
    const hash = `${prefix}:fleet:members`;
    const open = recordOpener(macKey, MEMBER_VERSION, (fields) => (typeof fields.until === 'number' ? { until: fields.until, left: fields.left === true } : undefined));
    const written = new Map<string, string>();
    const at = (replica: string): string => `${hash}#${replica}`;
    const millis = (seconds: unknown, micros: unknown): number => Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    return {
      async heartbeat(replica, ttlMs) {
        const [seconds, micros] = await command('renew this replica\'s fleet lease', () => client.time());
        const now = millis(seconds, micros);
        const record = signRecord(macKey, at(replica), { v: MEMBER_VERSION, until: now + Math.ceil(ttlMs) });
        await command('renew this replica\'s fleet lease', () => client.hset(hash, replica, record));
        written.set(replica, record);
        return now;
      },

      async members() {
        const reply = (await command('read the fleet\'s members', () => client.eval(MEMBERS, 1, hash, String(MAX_MEMBERS)))) as [unknown, unknown, unknown, string[]?];
        const now = millis(reply[0], reply[1]);
        const fields = reply[3];
        if (!fields) throw unavailable(`read the fleet's members: ${String(reply[2])} records are there, more than a fleet has`);
        const live: string[] = [];
        const left: string[] = [];
        const ended: string[] = [];
        const stale: [string, string][] = [];
        for (let i = 0; i + 1 < fields.length; i += 2) {
          const replica = fields[i] as string;
          const raw = fields[i + 1] as string;
          const record = open(at(replica), raw, (reason) =>
            log?.warn({ event: 'fleet.record_refused', op: 'coordinate', reason }, `a fleet member's record in Redis was refused (${CHECK_REASONS[reason]}); it is not counted as a replica`),
          );
          if (!record) continue;
          const { until } = record;
          if (record.left) left.push(replica);
          else if (until > now) live.push(replica);
          else ended.push(replica);
          if (until < now - 10 * Math.max(leaseMs, 30_000)) stale.push([replica, raw]);
        }
        for (const [replica, raw] of stale) void client.eval(HDEL_IF, 1, hash, replica, raw).catch(() => undefined);
        return { now, live, left, ended };
      },

      // A record that says so, signed as the others are: the others drop this replica at their next look, rather
      // than a lease later (a record merely gone could be Redis restarted).
      async leave(replica) {
        const record = written.get(replica);
        if (!record || closed || client.status !== 'ready') return;
        const [seconds, micros] = await client.time().catch(() => [0, 0] as const);
        const now = millis(seconds, micros);
        if (now <= 0) return;
        const gone = signRecord(macKey, at(replica), { v: MEMBER_VERSION, until: now, left: true });
        await client.eval(HSET_IF, 1, hash, replica, record, gone).catch(() => undefined);
      },
    };
  }

  /** The token checks' claims and findings, authenticated under a subkey of `grantKey`. */
  function checkSharing(grantKey: Buffer): Pick<Coordinator, 'claimCheck' | 'recordCheck' | 'peekCheck'> {
    const macKey = subkey(grantKey, 'check-records');
    const stored = (at: string, state: CheckOutcome | 'pending'): string => signRecord(macKey, at, { v: CHECK_VERSION, state });
    const opener = recordOpener(macKey, CHECK_VERSION, ({ state }): CheckOutcome | 'pending' | undefined =>
      state === 'pending' || (typeof state === 'string' && isCheckOutcome(state)) ? state : undefined,
    );
    /** What the record under `at` says, or `refused` (logged once per record) when it does not verify. */
    const open = (profile: string, at: string, raw: string): CheckOutcome | 'pending' | 'refused' =>
      opener(at, raw, (reason) =>
        log?.warn(
          { profile, event: 'check.record_refused', op: 'check', reason },
          `a token check of profile "${profile}" in Redis was refused (${CHECK_REASONS[reason]}); it is not acted on`,
        ),
      ) ?? 'refused';
    return {
      async claimCheck(profile, cycle, ttlMs) {
        const at = checkKey(profile, cycle);
        const ttl = String(Math.max(1_000, Math.ceil(ttlMs)));
        const taken = await command('claim a token check', () => client.set(at, stored(at, 'pending'), 'PX', ttl, 'NX'));
        if (taken === 'OK') return { claimed: true };
        const found = await command('read a token check', () => client.get(at));
        if (found === null) return { claimed: false };
        const state = open(profile, at, found);
        // A record nobody with the key wrote claims nothing: this replica checks for itself.
        if (state === 'refused') return { claimed: true };
        return state === 'pending' ? { claimed: false } : { claimed: false, outcome: state };
      },

      async recordCheck(profile, cycle, outcome, ttlMs) {
        const at = checkKey(profile, cycle);
        const ttl = String(Math.max(1_000, Math.ceil(ttlMs)));
        await command('record a token check', () => client.set(at, stored(at, outcome), 'PX', ttl, 'XX'));
      },

      async peekCheck(profile, cycle) {
        const at = checkKey(profile, cycle);
        const found = await command('read a token check', () => client.get(at));
        if (found === null) return undefined;
        const state = open(profile, at, found);
        return state === 'refused' ? undefined : state;
      },
    };
  }

  /** How far Redis's clock is ahead of this process's: records are kept on Redis's clock. */
  async function skewMs(action: string): Promise<number> {
    const [seconds, micros] = await command(action, () => client.time());
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - now();
  }

  /** A record kept on Redis's clock, and the skew to read its times by: both sent at once, one round trip, not two. */
  async function readOnRedisClock(key: string, action: string): Promise<{ raw: string | null; skew: number }> {
    const [raw, skew] = await Promise.all([command(action, () => client.get(key)), skewMs(action)]);
    return { raw, skew };
  }

  function unavailable(action: string, cause?: unknown): CoordinatorUnavailableError {
    return new CoordinatorUnavailableError(`Redis at ${redisTarget(options.url)} is unreachable, so this replica cannot ${action}`, { cause });
  }

  async function command<T>(action: string, run: () => Promise<T>): Promise<T> {
    if (closed) throw unavailable(action);
    if (client.status !== 'ready') throw unavailable(action);
    try {
      return await run();
    } catch (error) {
      throw unavailable(action, error);
    }
  }

  return {
    replicaId,

    async ready() {
      await connecting;
      if (client.status === 'ready') return;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          client.off('ready', onReady);
          reject(unavailable('start coordinating'));
        }, timeoutMs);
        const onReady = (): void => {
          clearTimeout(timer);
          resolve();
        };
        client.once('ready', onReady);
      });
    },

    async acquire(profile) {
      const leaseKey = key('lease', profile);
      const token = randomUUID();
      const taken = await command('take a lease', () => client.set(leaseKey, token, 'PX', leaseMs, 'NX'));
      if (taken !== 'OK') return undefined;
      const controller = new AbortController();
      // Redis counts the lease in real time, so the holder does too, whatever clock the daemon runs on.
      let extendedAt = Date.now();
      const timer = setInterval(() => {
        client
          .eval(EXTEND, 1, leaseKey, token, String(leaseMs))
          .then((result) => {
            if (Number(result) === 1) extendedAt = Date.now();
            else controller.abort(new CoordinatorUnavailableError(`the lease of profile "${profile}" was lost`));
          })
          .catch(() => {
            if (Date.now() - extendedAt >= leaseMs) controller.abort(unavailable(`keep the lease of profile "${profile}"`));
          });
      }, Math.max(50, Math.floor(leaseMs / 3)));
      timer.unref();
      const stop = (): void => clearInterval(timer);
      leases.add(stop);
      let released = false;
      const lease: Lease = {
        signal: controller.signal,
        async release() {
          if (released) return;
          released = true;
          stop();
          leases.delete(stop);
          if (closed || client.status !== 'ready') return;
          // A lease that cannot be deleted now expires on its own within leaseMs.
          await client.eval(RELEASE, 1, leaseKey, token).catch(() => undefined);
        },
      };
      return lease;
    },

    async lastReconcile(profile) {
      const { raw, skew } = await readOnRedisClock(key('reconciled', profile), 'read the last reconcile');
      const record = raw === null ? undefined : decodeReconcile(raw);
      if (!record) return undefined;
      return { ...record, expiresAt: record.expiresAt - skew, reconciledAt: record.reconciledAt - skew };
    },

    async recordReconcile(profile, record) {
      const skew = await skewMs('record the reconcile');
      const expiresAt = record.expiresAt + skew;
      const stored = JSON.stringify({ v: RECORD_VERSION, ...record, expiresAt, reconciledAt: record.reconciledAt + skew });
      await command('record the reconcile', () => client.eval(RECORD, 1, key('reconciled', profile), stored, String(expiresAt), String(RECORD_TTL_MS)));
    },

    async readGrantRecord(profile) {
      const raw = await command('read the shared grant', () => client.get(key('grant', profile)));
      return raw ?? undefined;
    },

    async writeGrantRecord(profile, record, issuedAt) {
      const written = await command('share the new grant', () => client.eval(GRANT, 1, key('grant', profile), record, String(issuedAt)));
      return Number(written) === 1;
    },

    ...checks,
    ...(fleet ? { fleet } : {}),
    ...(pauses ? { pauses } : {}),
    ...(budgets ? { budgets } : {}),

    isAvailable() {
      return !closed && client.status === 'ready';
    },

    onAvailable(listener) {
      availableListeners.add(listener);
      return () => availableListeners.delete(listener);
    },

    async close() {
      if (closed) return;
      for (const stop of leases) stop();
      leases.clear();
      closed = true;
      await closeRedisClient(client);
    },
  };
}
