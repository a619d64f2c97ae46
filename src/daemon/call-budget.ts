// At most 100 calls to the token endpoint per profile per day, whatever the failure: a profile whose grant or
// endpoint keeps failing would otherwise back off to one call a minute, some 1,400 a day, for as long as it fails.
//
// The budget is a bucket: a burst of BUDGET_BURST calls, given back one every BUDGET_REFILL_MS (24 minutes), so
// that any 24 hours hold at most BURST + 24 h / REFILL = 40 + 60 = 100 calls, successes and failures alike. A
// plain count of 100 a day would let a profile spend them in its first hour and a half of failing and then send
// nothing for the rest of the day, so a consumer would wait hours after the endpoint came back; the bucket
// instead lets a profile that spent its burst call once every 24 minutes. The last BUDGET_RESERVE calls of the
// burst wait for news that the endpoint answers (another profile's success since the profile's last call), and
// while the endpoint is out one of its held profiles probes it once a minute for all, so that after an outage of
// any length every profile has its token within a sweep or two of the first success, not at its refill. A
// healthy profile (six renewals a day with four-hour tokens) never comes near it: the burst is given back faster
// than it renews.
//
// Where it is kept: in this process for every profile it renews; and, for a profile one replica of a fleet
// renews at a time (shared: fleet.ts), in a record in Redis authenticated under SYNCAUTH_GRANT_KEY, read when a
// replica starts the profile's worker (a takeover, a restart, a fallback) and written after each call, so that
// the next owner continues the count and the failure streak (the backoff's step and its wait) rather than
// starting from zero. A profile every replica renews for its own consumers has a budget per replica: one
// replica's failures (its network cut) must not spend the calls another needs to keep its consumers' token.
//
// What a writer of Redis without the key can do (docs/security.md): a record it forged or changed does not
// verify and counts for nothing (a fresh bucket); a real record replayed is one of an earlier moment, whose
// count, given back at the refill since, is never above the count now, so no replay spends a call that was not
// made; deleting the record gives the replica that next starts the profile a fresh bucket, at most 40 calls,
// while the replica that holds the profile keeps counting in memory.
import type { Logger } from '../log.js';

/** Calls per profile in any 24 hours, at most: the number, this project's choice (Dropbox publishes none). */
export const TOKEN_CALLS_PER_DAY = 100;
/** The calls a profile may make at once (in a spell of failures, before the refill paces it). */
export const BUDGET_BURST = 40;
const DAY_MS = 24 * 3_600_000;
/** One call given back every this long: 24 minutes, so that the burst and a day's refill make 100. */
export const BUDGET_REFILL_MS = DAY_MS / (TOKEN_CALLS_PER_DAY - BUDGET_BURST);
/**
 * The last calls of the burst, kept for when the endpoint is known to answer again: spent only once a call of
 * another profile to the same endpoint has succeeded since the profile's own last call, or as the endpoint's
 * probe (below).
 */
export const BUDGET_RESERVE = 10;
/**
 * While every profile of an endpoint is down to its reserve (the endpoint is out), one of them calls it this
 * often, for all: the first success releases the others, so an outage costs at most this and a sweep once over.
 */
export const ENDPOINT_PROBE_MS = 60_000;

/** A profile's budget as recorded after a call; times are epoch ms on the holder's clock. */
export interface BudgetState {
  /** Calls of the burst spent as of `at` (0 to BUDGET_BURST): each call adds one, the refill takes one off per BUDGET_REFILL_MS. */
  spent: number;
  /** When the last call was made. */
  at: number;
  /** Failed calls in a row, the backoff's step; 0 after a success. */
  failures: number;
  /** After a failure: no call before this (the backoff's wait, or a Retry-After). */
  retryAt?: number;
}

/** What a coordinator keeps of the profiles' budgets (Redis with SYNCAUTH_GRANT_KEY); times on the reader's clock. */
export interface BudgetBackend {
  /** The profile's record, from one that verifies; undefined when there is none. */
  read(profile: string): Promise<BudgetState | undefined>;
  /**
   * Stores `next(current)`, `current` being the record there (undefined when none, or one that does not verify),
   * unless another writer changed the record meanwhile: then it reads and tries again. Returns what it stored.
   */
  update(profile: string, next: (current: BudgetState | undefined) => BudgetState): Promise<BudgetState>;
}

/**
 * How many times the day's budget a profile gets: 1 for any token that lives longer than 43 minutes beyond the
 * margin (Dropbox's live four hours), else three times the renewals its lifetime needs a day over the 100, so
 * that a healthy profile never meets the cap, whatever the lifetime (an emulator's tokens of a few seconds).
 */
export function budgetScale(lifetimeMs: number | undefined, marginMs: number): number {
  if (lifetimeMs === undefined || !(lifetimeMs > 0)) return 1;
  const needed = DAY_MS / Math.max(1_000, lifetimeMs - marginMs);
  return Math.max(1, (3 * needed) / TOKEN_CALLS_PER_DAY);
}

/** The calls of the burst spent at `now`, after the refill since the last call (`scale`: budgetScale). */
export function spentAt(state: BudgetState | undefined, now: number, scale = 1): number {
  if (!state) return 0;
  return Math.max(0, Math.min(BUDGET_BURST * scale, state.spent) - (Math.max(0, now - state.at) * scale) / BUDGET_REFILL_MS);
}

/** When the next call may be made: `now` when one is left, else when the refill gives one back. */
export function nextCallAt(state: BudgetState | undefined, now: number, scale = 1): number {
  const over = spentAt(state, now, scale) - (BUDGET_BURST * scale - 1);
  return over <= 0 ? now : now + Math.ceil((over * BUDGET_REFILL_MS) / scale);
}

/**
 * Two records of the same profile (this process's and the shared one) as one: the more calls spent, each given
 * back to the later of the two moments, and the failure streak of the later record. A record that is older than
 * the other (replayed) can only count fewer calls than the newer, never more.
 */
export function mergeBudgets(a: BudgetState | undefined, b: BudgetState | undefined, scale = 1): BudgetState | undefined {
  if (!a || !b) return a ?? b;
  const at = Math.max(a.at, b.at);
  const later = a.at > b.at || (a.at === b.at && a.failures >= b.failures) ? a : b;
  return { spent: Math.max(spentAt(a, at, scale), spentAt(b, at, scale)), at, failures: later.failures, ...(later.retryAt !== undefined ? { retryAt: later.retryAt } : {}) };
}

/** One call made at `call.at`, counted on `state`. */
export function withCall(state: BudgetState | undefined, call: { at: number; failures: number; retryAt?: number | undefined }, scale = 1): BudgetState {
  return {
    spent: Math.min(BUDGET_BURST * scale, spentAt(state, call.at, scale) + 1),
    at: Math.max(call.at, state?.at ?? call.at),
    failures: call.failures,
    ...(call.retryAt !== undefined ? { retryAt: call.retryAt } : {}),
  };
}

/** The budgets of the profiles this process renews, and, for the shared ones, the fleet's record of them. */
export class CallBudgets {
  readonly #local = new Map<string, BudgetState>();
  /** Profiles whose refusal was logged at warn since their last success: the next ones are at debug. */
  readonly #told = new Set<string>();
  /**
   * Each token endpoint's budgetScale, from the lifetime of the last token it gave (1 until one is): a lifetime is
   * the endpoint's, not a profile's, so it is kept per endpoint (a few), through every profile's failing spell.
   */
  readonly #scales = new Map<string, number>();
  /** Each token endpoint's last call and last success from this process. */
  readonly #endpoints = new Map<string, { calledAt: number; okAt: number }>();
  readonly #backend: BudgetBackend | undefined;
  readonly #now: () => number;
  readonly #marginMs: number;
  readonly #log: Logger;

  constructor(options: { backend?: BudgetBackend | undefined; now: () => number; marginMs: number; log: Logger }) {
    this.#backend = options.backend;
    this.#now = options.now;
    this.#marginMs = options.marginMs;
    this.#log = options.log;
  }

  #scale(endpoint: string): number {
    return this.#scales.get(endpoint) ?? 1;
  }

  /**
   * At the start of the profile's worker: what is known of its budget, the fleet's record (for a `shared`
   * profile, when Redis answers) merged into this process's. The caller continues its backoff from it.
   */
  async adopt(profile: string, endpoint: string, shared: boolean): Promise<BudgetState | undefined> {
    let recorded: BudgetState | undefined;
    if (shared && this.#backend) {
      try {
        recorded = await this.#backend.read(profile);
      } catch {
        // Redis away: this process's count holds.
      }
    }
    const state = mergeBudgets(this.#local.get(profile), recorded, this.#scale(endpoint));
    if (state) this.#local.set(profile, state);
    return state;
  }

  /**
   * When the profile may call `endpoint` again, if it may not now; undefined when it may. Past its burst, a
   * profile spends its reserve only when the endpoint has been seen to answer since its own last call, or as the
   * endpoint's probe when no profile has called it for ENDPOINT_PROBE_MS (keeping one call for its release);
   * with nothing left, when the refill gives one back.
   */
  spentUntil(profile: string, endpoint: string): number | undefined {
    const now = this.#now();
    const state = this.#local.get(profile);
    const scale = this.#scale(endpoint);
    // A budget whole again, with no streak, is what no record says: nothing kept for it.
    if (state && state.failures === 0 && spentAt(state, now, scale) === 0) {
      this.#local.delete(profile);
      return undefined;
    }
    const left = BUDGET_BURST * scale - spentAt(state, now, scale);
    const reserve = BUDGET_RESERVE * scale;
    if (left - 1 >= reserve) return undefined;
    if (left < 1) return nextCallAt(state, now, scale);
    const seen = this.#endpoints.get(endpoint);
    if (seen && state && seen.okAt > state.at) return undefined;
    if (left >= 2 && (!seen || now - seen.calledAt >= ENDPOINT_PROBE_MS)) return undefined;
    // Out of the reserve by the refill, or a look again at the next probe's turn (and for news of the endpoint).
    const outOfReserve = now + Math.ceil(((reserve + 1 - left) * BUDGET_REFILL_MS) / scale);
    return Math.min(outOfReserve, seen ? Math.max(now + 1, seen.calledAt + ENDPOINT_PROBE_MS) : now + ENDPOINT_PROBE_MS);
  }

  /** Whether this refusal is the first of the spell (logged at warn; the next ones at debug, until a success). */
  firstRefusal(profile: string): boolean {
    if (this.#told.has(profile)) return false;
    this.#told.add(profile);
    return true;
  }

  /**
   * A call made: counted here and, for a `shared` profile, in the fleet's record, merged with what another
   * replica may have counted there. A failure to write it leaves the count in this process. `lifetimeMs`: the
   * lifetime of the token a successful call brought.
   */
  async called(
    profile: string,
    call: { at: number; failures: number; retryAt?: number | undefined; lifetimeMs?: number | undefined; endpoint: string },
    shared: boolean,
  ): Promise<void> {
    if (call.lifetimeMs !== undefined) this.#scales.set(call.endpoint, budgetScale(call.lifetimeMs, this.#marginMs));
    const seen = this.#endpoints.get(call.endpoint) ?? { calledAt: call.at, okAt: -Infinity };
    this.#endpoints.set(call.endpoint, { calledAt: Math.max(seen.calledAt, call.at), okAt: call.failures === 0 ? Math.max(seen.okAt, call.at) : seen.okAt });
    const scale = this.#scale(call.endpoint);
    const local = this.#local.get(profile);
    this.#local.set(profile, withCall(local, call, scale));
    if (call.failures === 0) this.#told.delete(profile);
    if (!shared || !this.#backend) return;
    const { endpoint: _endpoint, lifetimeMs: _lifetime, ...counted } = call;
    try {
      const stored = await this.#backend.update(profile, (current) => withCall(mergeBudgets(local, current, scale), counted, scale));
      this.#local.set(profile, stored);
    } catch (error) {
      this.#log.debug({ profile, event: 'budget.unshared', op: 'renew', error: (error as Error).message }, `could not record the token call of profile "${profile}" in Redis; it is counted on this replica`);
    }
  }
}
