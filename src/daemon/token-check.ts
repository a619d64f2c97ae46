// When the published tokens are checked with Dropbox: a revoked grant kills every access token at once, while
// the daemon would otherwise learn of it only at the next renewal, up to 3¾ hours later with 4-hour tokens.
// Each profile is checked once per interval, at an offset within it drawn from its name (so ten thousand
// profiles are not checked in the same second, and every replica agrees on the offset), and never faster than
// the caps: so many a second per daemon, and as many per Dropbox account (profiles of one account share
// Dropbox's limits). A check that is due but over a cap stays due and goes first at the next tick. Checks wait
// while a sweep runs: renewals come first. With replicas, a short key per profile and interval (the
// coordinator's, authenticated under SYNCAUTH_GRANT_KEY; without the key there is none and each replica checks for
// itself) lets one replica check and tells the others what it found. What a check does with its answer is the
// worker's (worker.ts).
import type { Logger } from '../log.js';
import { classifyFailure } from './classify.js';
import type { Coordinator } from './coordinator.js';
import type { CheckOutcome } from './types.js';

/** A profile as the checks see it. */
export interface Checkable {
  readonly name: string;
  /**
   * What the profile's checks count against (its Dropbox account, or the profile alone while its account is not
   * known), or undefined when there is nothing to check now (parked, no token held, checks off, no API URL).
   */
  checkKey(at: number): string | undefined;
  /** The index of the interval last checked (or claimed by another replica). */
  checkedCycle: number;
  /** When it was last checked here or elsewhere (wall clock), if ever. */
  readonly lastCheckAt: number | undefined;
  /** Checks the published token once and acts on the answer; resolves when the renewal it started has ended. */
  check(): Promise<CheckOutcome>;
  /** Another replica checked the profile this interval and found `outcome`. */
  checkedElsewhere(outcome: CheckOutcome): Promise<void>;
}

/** Where a profile's checks fall within the interval: a hash of its name, the same in every replica. */
export function checkOffset(name: string, intervalMs: number): number {
  // FNV-1a, 32 bits: cheap, and spreads names that differ in one character.
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i += 1) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return (hash / 2 ** 32) * intervalMs;
}

/** The index of the interval `at` falls in, for a profile whose checks fall `offset` into each. */
export function checkCycle(at: number, offset: number, intervalMs: number): number {
  return Math.floor((at - offset) / intervalMs);
}

/** A token bucket: `perSecond` on average, at most a second's worth (and at least one) at once. */
export class RateBucket {
  readonly #perSecond: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  /** When the bucket was last filled; none until it is first used (the clock is not read while the daemon is built). */
  #at: number | undefined;

  constructor(perSecond: number, now: () => number) {
    this.#perSecond = perSecond;
    this.#burst = Math.max(1, perSecond);
    this.#now = now;
    this.#tokens = this.#burst;
  }

  #refill(): void {
    const at = this.#now();
    // A clock stepped back gives nothing, and takes nothing away.
    if (this.#at !== undefined && at > this.#at) this.#tokens = Math.min(this.#burst, this.#tokens + ((at - this.#at) / 1000) * this.#perSecond);
    this.#at = at;
  }

  available(): boolean {
    this.#refill();
    return this.#tokens >= 1;
  }

  take(): void {
    this.#tokens -= 1;
  }

  /** Full again: nothing to remember. */
  idle(): boolean {
    this.#refill();
    return this.#tokens >= this.#burst;
  }
}

export interface TokenCheckOptions {
  intervalMs: number;
  perSecond: number;
  /** The daemon's wall clock. */
  now: () => number;
  coordinator: Coordinator | undefined;
  log: Logger;
  profiles: () => Iterable<Checkable>;
  /** True while a sweep runs: checks wait for the renewals. */
  busy: () => boolean;
}

export class TokenChecks {
  readonly #options: TokenCheckOptions;
  readonly #daemon: RateBucket;
  readonly #accounts = new Map<string, RateBucket>();
  /** Profiles another replica claimed this interval, whose finding is not known yet: looked at again each tick. */
  readonly #awaiting = new Map<string, { cycle: number; profile: Checkable }>();
  #selecting = false;
  /** Each profile's offset, by name: the hash is not worked out again every second. */
  readonly #offsets = new Map<string, number>();

  constructor(options: TokenCheckOptions) {
    this.#options = options;
    this.#daemon = new RateBucket(options.perSecond, options.now);
  }

  get on(): boolean {
    return this.#options.intervalMs > 0;
  }

  /** Starts the checks that are due and within the caps; resolves when they (and what they started) end. */
  async tick(): Promise<void> {
    const { intervalMs, now, busy, profiles } = this.#options;
    if (!this.on || this.#selecting || busy()) return;
    this.#selecting = true;
    const started: Promise<unknown>[] = [];
    try {
      const at = now();
      const due: { profile: Checkable; key: string; cycle: number; since: number }[] = [];
      let seen = 0;
      for (const profile of profiles()) {
        seen += 1;
        let offset = this.#offsets.get(profile.name);
        if (offset === undefined) this.#offsets.set(profile.name, (offset = checkOffset(profile.name, intervalMs)));
        const cycle = checkCycle(at, offset, intervalMs);
        // First seen (a start, a profile added): its first check is at its offset in the next interval, not at once.
        if (profile.checkedCycle === -Infinity) profile.checkedCycle = cycle;
        if (profile.checkedCycle >= cycle) continue;
        const key = profile.checkKey(at);
        if (key === undefined) continue;
        // The longest unchecked go first (its last check, or the slot of its first interval): over the cap, the
        // profiles are checked in turn, each once per profiles ÷ cap seconds, and none waits behind newer ones.
        due.push({ profile, key, cycle, since: profile.lastCheckAt ?? (profile.checkedCycle + 1) * intervalMs + offset });
      }
      due.sort((a, b) => a.since - b.since);
      for (const { profile, key, cycle } of due) {
        if (!this.#daemon.available()) break;
        let account = this.#accounts.get(key);
        if (!account) this.#accounts.set(key, (account = new RateBucket(this.#options.perSecond, now)));
        if (!account.available()) continue;
        profile.checkedCycle = cycle;
        const claim = await this.#claim(profile.name, cycle);
        if (claim.claimed) {
          this.#daemon.take();
          account.take();
          started.push(this.#run(profile, cycle));
        } else if (claim.outcome !== undefined) {
          started.push(profile.checkedElsewhere(claim.outcome));
        } else {
          this.#awaiting.set(profile.name, { cycle, profile });
        }
      }
      started.push(...this.#lookAgain());
      for (const [key, bucket] of this.#accounts) if (bucket.idle()) this.#accounts.delete(key);
      if (this.#offsets.size > 2 * seen + 100) this.#offsets.clear();
    } finally {
      this.#selecting = false;
    }
    await Promise.all(started);
  }

  async #run(profile: Checkable, cycle: number): Promise<void> {
    const outcome = await profile.check().catch((error: unknown): CheckOutcome => {
      this.#options.log.error({ profile: profile.name, event: 'check.failed', op: 'check', err: error }, 'unexpected failure in a token check');
      return 'failed';
    });
    await this.#share(profile.name, cycle, outcome);
  }

  /** With replicas: whether this one checks the profile this interval, or what the one that did found. */
  async #claim(name: string, cycle: number): Promise<{ claimed: boolean; outcome?: CheckOutcome }> {
    const coordinator = this.#options.coordinator;
    if (!coordinator?.claimCheck) return { claimed: true };
    try {
      return await coordinator.claimCheck(name, cycle, this.#options.intervalMs);
    } catch (error) {
      // Redis away: each replica checks on its own, as without it.
      this.#options.log.debug({ profile: name, event: 'check.claim_failed', op: 'check', error: classifyFailure(error).message }, 'could not claim the token check; checking anyway');
      return { claimed: true };
    }
  }

  async #share(name: string, cycle: number, outcome: CheckOutcome): Promise<void> {
    const coordinator = this.#options.coordinator;
    if (!coordinator?.recordCheck) return;
    await coordinator.recordCheck(name, cycle, outcome, this.#options.intervalMs).catch(() => undefined);
  }

  /** What the replica that claimed a check found, once it is known; dropped when the interval is over. */
  #lookAgain(): Promise<void>[] {
    const coordinator = this.#options.coordinator;
    const found: Promise<void>[] = [];
    for (const [name, { cycle, profile }] of this.#awaiting) {
      const current = checkCycle(this.#options.now(), checkOffset(name, this.#options.intervalMs), this.#options.intervalMs);
      if (!coordinator?.claimCheck || current !== cycle) {
        this.#awaiting.delete(name);
        continue;
      }
      found.push(
        (async () => {
          const claim = await coordinator.peekCheck?.(name, cycle).catch(() => undefined);
          // Still checking, or the claim is gone (its replica died): looked at again at the next tick.
          if (claim === undefined || claim === 'pending') return;
          this.#awaiting.delete(name);
          await profile.checkedElsewhere(claim);
        })(),
      );
    }
    return found;
  }
}

/**
 * A check interval as the flag and the file take it: `0` or `off` (no checks), whole seconds, or with a unit
 * (`30s`, `15m`, `1h`); from 1 s to 24 h. Milliseconds.
 */
export function parseCheckInterval(raw: string): number {
  const text = raw.trim().toLowerCase();
  if (text === 'off' || text === '0') return 0;
  const match = /^(\d+)\s*(s|m|h)?$/.exec(text);
  const unit = { s: 1, m: 60, h: 3_600 }[(match?.[2] ?? 's') as 's' | 'm' | 'h'];
  const seconds = match ? Number(match[1]) * unit : NaN;
  if (!(seconds >= 1 && seconds <= 86_400)) throw new Error('must be a duration from 1s to 24h, like 15m, 90s or 1h, or 0 (off)');
  return seconds * 1000;
}

/** A cap of checks per second as the flag and the file take it: a number above 0, at most 100. */
export function parseChecksPerSecond(raw: string): number {
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(value) || value <= 0 || value > 100) throw new Error('must be a number above 0 and at most 100, like 1 or 0.5');
  return value;
}
