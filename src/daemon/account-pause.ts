// A 429 from the token endpoint is Dropbox saying "this account, not so fast": its limits are per linked user, so
// the other profiles of the same Dropbox account would meet the same answer. The pause (Retry-After) is kept per
// account: in this process for every profile of the account, and with a coordinator that keeps pauses (Redis with
// SYNCAUTH_GRANT_KEY) for every replica, in a record authenticated as the others are. A profile whose account is
// paused sends no token request and no token check until the pause ends, never later than its token's expiry less
// the safety window (the rule for a Retry-After), and resumes at a point drawn within the first minute after it,
// so that the paused profiles do not all call at once.
//
// A writer of Redis without the key cannot pause an account (the record would not verify), nor lengthen a pause
// (the MAC covers the record's end), and a pause never outlives a token's expiry less the safety window: no
// record in Redis can let a token die.
import type { Logger } from '../log.js';

/** Pauses as a coordinator keeps them; times are epoch ms on the reader's clock (translated from Redis's). */
export interface PauseBackend {
  /** When the account's pause ends, from a record that verifies; undefined when there is none (or it has ended). */
  readPause(account: string): Promise<number | undefined>;
  /** Records a pause until `until`, unless one that ends later is there. */
  writePause(account: string, until: number): Promise<void>;
}

/** How far past a pause's end the paused profiles' calls are spread. */
export const RESUME_SPREAD_MS = 60_000;

export class AccountPauses {
  readonly #local = new Map<string, number>();
  readonly #backend: PauseBackend | undefined;
  readonly #now: () => number;
  readonly #log: Logger;
  /** Pauses begun in this process (an account not paused before), by where they came from. */
  readonly #begun = { here: 0, fleet: 0 };

  constructor(options: { backend?: PauseBackend | undefined; now: () => number; log: Logger }) {
    this.#backend = options.backend;
    this.#now = options.now;
    this.#log = options.log;
  }

  /** Known in this process alone (no Redis read): for the token checks, which run often. */
  pausedHere(account: string): number | undefined {
    const until = this.#local.get(account);
    if (until === undefined) return undefined;
    if (until > this.#now()) return until;
    this.#local.delete(account);
    return undefined;
  }

  /** When the account's token calls may resume (this process's pause or the fleet's); undefined when not paused. */
  async pausedUntil(account: string): Promise<number | undefined> {
    let shared: number | undefined;
    if (this.#backend) {
      try {
        shared = await this.#backend.readPause(account);
      } catch {
        // Redis away: this process's pauses still hold.
      }
    }
    if (shared !== undefined && shared > (this.#local.get(account) ?? 0)) {
      // Another replica's 429 (this one's own pause is known here before it is written).
      if (shared > this.#now() && this.pausedHere(account) === undefined) this.#begun.fleet += 1;
      this.#local.set(account, shared);
    }
    return this.pausedHere(account);
  }

  /**
   * For the metrics: the accounts paused now as this process knows them (a pause another replica recorded is
   * known once a renewal here has read it), and the pauses begun here, by where they came from: a 429 met in this
   * process (`here`) or a record another replica wrote (`fleet`).
   */
  stats(): { paused: number; begun: { here: number; fleet: number } } {
    const now = this.#now();
    let paused = 0;
    for (const [account, until] of this.#local) {
      if (until > now) paused += 1;
      else this.#local.delete(account);
    }
    return { paused, begun: { ...this.#begun } };
  }

  /** A 429 with Retry-After for a profile of `account`: pauses the account here and, with a backend, everywhere. */
  async pause(account: string, until: number, profile: string): Promise<void> {
    if (until <= this.#now()) return;
    const known = this.#local.get(account) ?? 0;
    if (until > known) {
      if (this.pausedHere(account) === undefined) this.#begun.here += 1;
      this.#local.set(account, until);
      this.#log.warn(
        { profile, event: 'renewal.account_paused', op: 'renew', until: new Date(until).toISOString() },
        `the token endpoint asked profile "${profile}" to wait: token requests and checks of every profile of its Dropbox account pause until ${new Date(until).toISOString()} (never past a token's expiry less the safety window)`,
      );
    }
    try {
      await this.#backend?.writePause(account, until);
    } catch {
      // Redis away: the pause holds in this process.
    }
  }
}
