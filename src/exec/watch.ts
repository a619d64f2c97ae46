// `syncauth exec --watch`: keeps the child's token fresh. The wall clock is compared with the renewal time on
// a short period rather than one long timer being trusted: a laptop that slept through the renewal time
// catches up on its first check after waking, where a timer set hours earlier would fire late.
import { ExitCode, SyncauthError } from '../errors.js';
import { syncauthCommand } from '../profile/name.js';
import { afterFailure, renewAt } from '../sync/renewal-policy.js';
import { rfc3339, type ChildToken } from './env.js';

/** Between checks of the clock at most: min(30 s, margin / 4), and at least 1 s. */
const MAX_CHECK_MS = 30_000;
const MIN_CHECK_MS = 1_000;
/** First retry after a failed renewal; doubled each time up to the check period's cap (margin / 4). */
const FIRST_RETRY_MS = 1_000;
/** A grant that needs re-authorization is tried this rarely: only `setup` (or new secrets) can cure it. */
const REAUTHORIZE_RETRY_MS = 5 * 60_000;

export interface WatchOptions {
  initial: ChildToken;
  marginMs: number;
  /** A token as `syncauth token` would give it now (reused while it has more than the margin left). */
  renew: () => Promise<ChildToken>;
  /** A token other than the one held: render the templates, then restart or signal the child. */
  onToken: (token: ChildToken) => Promise<void>;
  /** False once the child is ending: no more renewals. */
  active: () => boolean;
  say: (level: 'info' | 'warn' | 'error', line: string) => void;
  now?: () => number;
}

export interface TokenWatch {
  /** Stops checking; resolves once a renewal under way has settled (its secret-store writes included). */
  stop(): Promise<void>;
}

/**
 * When to renew a token obtained at `at`: once it is inside the margin; a token that is already inside it when
 * obtained (its whole life is shorter than the margin) at half its remaining life, so that a short-lived
 * token is not renewed on every check.
 */
export function renewalTime(token: ChildToken, marginMs: number, at: number): number {
  return renewAt({ expiresAt: token.expiresAt }, { marginMs, halfLifeWhenShort: true }, at);
}

/** The check period for a margin: min(30 s, margin / 4), at least 1 s. */
export function checkPeriod(marginMs: number): number {
  return Math.max(MIN_CHECK_MS, Math.min(MAX_CHECK_MS, marginMs / 4));
}

export function watchToken(options: WatchOptions): TokenWatch {
  const now = options.now ?? Date.now;
  const periodMs = checkPeriod(options.marginMs);
  const retryCapMs = Math.max(FIRST_RETRY_MS, options.marginMs / 4);
  let current = options.initial;
  let nextAttempt = renewalTime(current, options.marginMs, now());
  let failures = 0;
  let reauthorizeNoted = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> | undefined;

  const attempt = async (): Promise<void> => {
    let token: ChildToken;
    try {
      token = await options.renew();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // Only a re-authorization cures this, and exec has no one to park for: tried again every few minutes.
      const reauthorize = error instanceof SyncauthError && error.exitCode === ExitCode.authRequired;
      if (!reauthorize) failures += 1;
      const { retryInMs } = afterFailure({ kind: reauthorize ? 'terminal' : 'transient' }, failures, {
        backoff: { baseMs: FIRST_RETRY_MS, maxMs: retryCapMs, jitter: 'none' },
        random: Math.random,
        retryParkedEveryMs: REAUTHORIZE_RETRY_MS,
      });
      if (reauthorize) {
        if (!reauthorizeNoted) {
          options.say(
            'error',
            `the grant needs re-authorization: ${message}${error.hint ? ` (${error.hintFor(syncauthCommand)})` : ''}. The child keeps its current token ` +
              `until it expires at ${rfc3339(current.expiresAt)}; trying again every ${REAUTHORIZE_RETRY_MS / 60_000} minutes`,
          );
        } else {
          options.say('error', `the grant still needs re-authorization: ${message}`);
        }
        reauthorizeNoted = true;
        nextAttempt = now() + retryInMs;
        return;
      }
      options.say('warn', `token renewal failed: ${message}; the child keeps its current token; retrying in ${Math.round(retryInMs / 100) / 10} s`);
      nextAttempt = now() + retryInMs;
      return;
    }
    if (failures > 0 || reauthorizeNoted) options.say('info', 'token renewal works again');
    failures = 0;
    reauthorizeNoted = false;
    if (token.accessToken !== current.accessToken) {
      current = token;
      if (!stopped && options.active()) {
        await options.onToken(token).catch((error: unknown) => {
          options.say('error', `could not hand the new token to the child: ${error instanceof Error ? error.message : String(error)}`);
        });
      }
    }
    nextAttempt = renewalTime(current, options.marginMs, now());
  };

  const check = async (): Promise<void> => {
    timer = undefined;
    if (stopped || !options.active()) return;
    if (now() >= nextAttempt) {
      inFlight = attempt();
      await inFlight;
      inFlight = undefined;
    }
    schedule();
  };

  const schedule = (): void => {
    if (stopped) return;
    // Wakes for the renewal time itself when it is near, and never sleeps longer than a period.
    const delay = Math.min(periodMs, Math.max(nextAttempt - now(), 50));
    timer = setTimeout(() => void check(), delay);
  };

  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}
