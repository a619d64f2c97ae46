// The one backoff of the product: after a failure, wait what the server asked for when it said (Retry-After),
// otherwise an exponential delay, capped, with jitter. The daemon (renewals, reconciles, profile loads), the
// service client's retries and `exec`'s watcher all use it; only their policies differ.

export interface BackoffPolicy {
  /** The first delay's ceiling; doubled per failure. */
  readonly baseMs: number;
  readonly maxMs: number;
  /**
   * `equal` (default): half the delay fixed, half random, so profiles and replicas spread out but never retry
   * at once. `full`: anywhere from 0 to the delay, for many clients of one server. `none`: the delay itself.
   */
  readonly jitter?: 'equal' | 'full' | 'none';
  /**
   * What a Retry-After gets: `honour` (default) waits as long as asked (waiting less would only earn another
   * 429; a caller with a deadline bounds it itself), `cap` waits at most `maxMs`.
   */
  readonly retryAfter?: 'honour' | 'cap';
}

/** Delay after `failures` failures in a row (1 for the first): base × 2^(failures − 1), capped, jittered. */
export function backoffDelay(policy: BackoffPolicy, failures: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(failures - 1, 0), 30));
  switch (policy.jitter ?? 'equal') {
    case 'full':
      return Math.floor(random() * ceiling);
    case 'none':
      return ceiling;
    default:
      return Math.round(ceiling / 2 + (random() * ceiling) / 2);
  }
}

/** The delay after a failure: the server's Retry-After when it gave one (never less than half the base), else the backoff. */
export function retryDelay(policy: BackoffPolicy, failures: number, random: () => number, retryAfterMs: number | undefined): number {
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) {
    return policy.retryAfter === 'cap' ? Math.min(retryAfterMs, policy.maxMs) : Math.max(retryAfterMs, policy.baseMs / 2);
  }
  return backoffDelay(policy, failures, random);
}

/**
 * Where a retried thing stands, as a value: failures in a row and the time before which it waits. Each change
 * makes a new value, so a part holding one can hand it out (to status, to metrics) without it moving under them.
 */
export class Backoff {
  static readonly none = new Backoff(0, 0);

  /** `failures` in a row, waiting until `until`: a streak another holder began (a fleet's last owner of a profile). */
  static of(failures: number, until: number): Backoff {
    return failures === 0 && until === 0 ? Backoff.none : new Backoff(failures, until);
  }

  private constructor(
    /** Failures in a row. */
    readonly failures: number,
    /** No attempt before this time (ms on the clock the holder uses). */
    readonly until: number,
  ) {
    Object.freeze(this);
  }

  /** Whether an attempt may be made at `at`. */
  ready(at: number): boolean {
    return at >= this.until;
  }

  /** The delay the next failure would earn. */
  nextDelay(policy: BackoffPolicy, random: () => number, retryAfterMs?: number): number {
    return retryDelay(policy, this.failures + 1, random, retryAfterMs);
  }

  /** One more failure at `at`, waiting `delayMs` (from nextDelay, possibly bounded by the caller). */
  failed(at: number, delayMs: number): Backoff {
    return new Backoff(this.failures + 1, at + delayMs);
  }

  /** Waiting without a failure counted (another holder has the work): same count, a new time. */
  waitUntil(until: number): Backoff {
    return new Backoff(this.failures, until);
  }
}
