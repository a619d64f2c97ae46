// Parts of a replicated daemon's world that the plain-JavaScript soak (soak/virtual.mjs) and the TypeScript
// tests share: Redis's leases and records in memory on a clock of their own, and a grant obtained through the
// emulator's authorize page. Plain JavaScript so that plain node runs it; typed by replicas.d.mts. What they
// need from the product (the error class, the code exchange) is passed in, so this file imports nothing built.

/** Like the Redis coordinator: records kept on the coordinator's clock, translated to and from the replica's. */
export function memoryCoordinator(redis, replicaId, CoordinatorUnavailableError, replicaNow, leaseMs = 30_000) {
  const check = () => {
    if (redis.down) throw new CoordinatorUnavailableError('the coordinator is restarting');
  };
  const shift = (record, by) => ({ ...record, expiresAt: record.expiresAt + by, reconciledAt: record.reconciledAt + by });
  return {
    replicaId,
    async acquire(profile) {
      check();
      const held = redis.leases.get(profile);
      if (held && held.until > redis.now()) return undefined;
      const controller = new AbortController();
      const lease = { owner: replicaId, until: redis.now() + leaseMs };
      redis.leases.set(profile, lease);
      return {
        signal: controller.signal,
        async release() {
          if (!redis.down && redis.leases.get(profile) === lease) redis.leases.delete(profile);
        },
      };
    },
    async lastReconcile(profile) {
      check();
      const record = redis.records.get(profile);
      return record && shift(record, replicaNow() - redis.now());
    },
    async recordReconcile(profile, record) {
      check();
      const current = redis.records.get(profile);
      const stored = shift(record, redis.now() - replicaNow());
      if (!current || current.expiresAt <= stored.expiresAt) redis.records.set(profile, stored);
    },
    async readGrantRecord(profile) {
      check();
      return (redis.grants ??= new Map()).get(profile);
    },
    async writeGrantRecord(profile, record, issuedAt) {
      check();
      const grants = (redis.grants ??= new Map());
      const current = grants.get(profile);
      if (current && JSON.parse(current).issuedAt >= issuedAt) return false;
      grants.set(profile, record);
      return true;
    },
    fleet: memoryFleet(redis, CoordinatorUnavailableError),
    pauses: {
      async readPause(account) {
        check();
        const until = (redis.pauses ??= new Map()).get(account);
        return until === undefined || until <= redis.now() ? undefined : until + (replicaNow() - redis.now());
      },
      async writePause(account, until) {
        check();
        const pauses = (redis.pauses ??= new Map());
        const end = until + (redis.now() - replicaNow());
        if ((pauses.get(account) ?? 0) < end) pauses.set(account, end);
      },
    },
    budgets: {
      async read(profile) {
        check();
        const stored = (redis.budgets ??= new Map()).get(profile);
        return stored && shiftBudget(stored, replicaNow() - redis.now());
      },
      async update(profile, next) {
        check();
        const budgets = (redis.budgets ??= new Map());
        const stored = budgets.get(profile);
        const written = next(stored && shiftBudget(stored, replicaNow() - redis.now()));
        budgets.set(profile, shiftBudget(written, redis.now() - replicaNow()));
        return written;
      },
    },
    isAvailable: () => !redis.down,
    async close() {},
  };
}

/** A budget of token calls (src/daemon/call-budget.ts) with its times moved by `by`. */
function shiftBudget(state, by) {
  return { ...state, at: state.at + by, ...(state.retryAt !== undefined ? { retryAt: state.retryAt + by } : {}) };
}

/**
 * The fleet's membership as the Redis coordinator keeps it (src/daemon/redis.ts), in `redis.members` on
 * `redis.now()`: each replica's lease end. Records are not signed here; the Redis tests try forged ones.
 */
export function memoryFleet(redis, CoordinatorUnavailableError) {
  const check = () => {
    if (redis.down) throw new CoordinatorUnavailableError('the coordinator is restarting');
  };
  const members = () => (redis.members ??= new Map());
  return {
    async heartbeat(replica, ttlMs) {
      check();
      const now = redis.now();
      members().set(replica, now + ttlMs);
      return now;
    },
    async members() {
      check();
      const now = redis.now();
      const all = [...members()];
      return {
        now,
        live: all.filter(([, until]) => until !== 'left' && until > now).map(([id]) => id),
        left: all.filter(([, until]) => until === 'left').map(([id]) => id),
        ended: all.filter(([, until]) => until !== 'left' && until <= now).map(([id]) => id),
      };
    },
    async leave(replica) {
      if (!redis.down) members().set(replica, 'left');
    },
  };
}

/** A grant through the emulator's authorize page (auto-approved) and the code exchange. */
export async function obtainGrant(emu, app, exchangeCode) {
  const url = new URL(emu.authorizeUrl);
  url.searchParams.set('client_id', app.appKey);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('token_access_type', 'offline');
  url.searchParams.set('redirect_uri', app.redirectUris[0]);
  const res = await fetch(url, { redirect: 'manual' });
  const code = new URL(res.headers.get('location') ?? 'http://x/').searchParams.get('code');
  if (!code) throw new Error(`the emulator gave no code (${res.status})`);
  const tokens = await exchangeCode({ tokenUrl: emu.tokenUrl, app: { appKey: app.appKey, appSecret: app.appSecret }, code, redirectUri: app.redirectUris[0] });
  return { appKey: app.appKey, appSecret: app.appSecret, refreshToken: tokens.refreshToken };
}
