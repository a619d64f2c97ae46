// When to try again after a failure: what the server asked for when it said (Retry-After), otherwise an
// exponential delay with jitter, capped so that a token inside its renewal margin gets several more tries
// before it expires.

export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

/**
 * Delay before attempt `attempt + 1` (0-based count of failures so far): base × 2^attempt, capped, then
 * "equal jitter" (half fixed, half random), so replicas and profiles spread out but never retry at once.
 */
export function backoffDelay(policy: BackoffPolicy, attempt: number, random: () => number): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** A Retry-After is honoured as given (waiting less would only earn another 429), never less than the base. */
export function retryDelay(policy: BackoffPolicy, attempt: number, random: () => number, retryAfterMs: number | undefined): number {
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) return Math.max(retryAfterMs, policy.baseMs / 2);
  return backoffDelay(policy, attempt, random);
}
