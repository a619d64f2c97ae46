// The daemon's settings, resolved once: every option checked and every default applied in one place, into a
// frozen object that the parts read and never change. A setting that has no sense alone (the retry cap
// follows the margin, the safety window too) is derived here, so no part derives it differently.
import { ValidationError, type FieldIssue } from '../errors.js';
import type { BackoffPolicy } from '../backoff.js';
import { checkSchedule } from './cron.js';
import { checkNumber, DEFAULT_CONCURRENCY, DEFAULT_SHUTDOWN_TIMEOUT_SECONDS, RENEWALS_PER_SECOND } from './spec.js';
import type { DaemonOptions } from './types.js';

export const DEFAULT_SCHEDULE = '* * * * *';
export { DEFAULT_CONCURRENCY };
export const DEFAULT_CONNECTOR_FAILING_AFTER_MS = 15 * 60_000;
/** How often each profile's published token is checked with Dropbox (`users/get_current_account`). */
export const DEFAULT_CHECK_INTERVAL_MS = 15 * 60_000;
/** Checks per second at most, per daemon and per Dropbox account. */
export const DEFAULT_MAX_CHECKS_PER_SECOND = 1;
/** The deadline of one check, whole. */
const CHECK_TIMEOUT_MS = 10_000;

const DEFAULT_SERVICE_RETRY = { retries: 2, baseDelayMs: 250, maxDelayMs: 2_000 };
/** One service exchange, whole; a reconcile makes a few, and has a deadline of its own. */
const DEFAULT_SERVICE_CALL_MS = 20_000;
const DEFAULT_RECONCILE_TIMEOUT_MS = 45_000;
/**
 * A Retry-After never makes the daemon wait past the token's expiry less this window (60 s, or half the margin
 * when that is shorter); a token file left by an earlier run is kept only while its token has more than it.
 */
const SAFETY_WINDOW_MS = 60_000;

export interface DaemonConfig {
  readonly marginMs: number;
  /** The largest share of jitter a cycle draws: renewals start up to this much before the margin. */
  readonly jitterMs: number;
  /** See DaemonOptions.spreadRenewals. */
  readonly spreadRenewals: boolean;
  readonly safetyMs: number;
  readonly concurrency: number;
  readonly maxRenewalsPerSecond: number | undefined;
  /** A cron expression, or false when the caller sweeps. */
  readonly schedule: string | false;
  readonly sweepOnStart: boolean;
  readonly backoff: Readonly<BackoffPolicy>;
  readonly tokenTimeoutMs: number;
  readonly lockWaitMs: number;
  readonly reconcileTimeoutMs: number;
  readonly shutdownTimeoutMs: number;
  readonly serviceCallMs: number;
  readonly serviceRetry: NonNullable<DaemonOptions['serviceRetry']>;
  /**
   * A process that hands the token to consumers must hold one itself; so must every replica: each renews its
   * own (access tokens of one grant coexist), and one of them gives the connector its token per lifetime.
   */
  readonly needsOwnToken: boolean;
  /** Whether a token is written to files (the token file or templates): readiness waits for the write. */
  readonly publishes: boolean;
  /** How long a connector's reconciles fail before the notice says so. */
  readonly connectorFailingAfterMs: number;
  /** Token checks: how often each profile's is checked (0: never), at most how many a second, each call's deadline. */
  readonly checks: Readonly<{ intervalMs: number; perSecond: number; timeoutMs: number }>;
}

/**
 * How long a revoked grant may go unnoticed with these settings: the interval, or the time the cap needs to go
 * through every profile once, whichever is longer; undefined when checks are off.
 */
export function noticeWithinMs(checks: { intervalMs: number; perSecond: number }, profiles: number): number | undefined {
  if (checks.intervalMs <= 0) return undefined;
  return Math.max(checks.intervalMs, Math.ceil((profiles / checks.perSecond) * 1000));
}

export function resolveDaemonConfig(options: DaemonOptions): DaemonConfig {
  const marginMs = options.renewMarginMs;
  if (!(Number.isFinite(marginMs) && marginMs > 0)) throw new ValidationError([{ field: 'renewMarginMs', message: 'must be a positive number' }]);
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new ValidationError([{ field: 'concurrency', message: 'must be a whole number of at least 1' }]);
  const failingAfter = options.connectorFailingAfterMs;
  if (failingAfter !== undefined && !(Number.isFinite(failingAfter) && failingAfter > 0)) {
    throw new ValidationError([{ field: 'connectorFailingAfterMs', message: 'must be a positive number' }]);
  }
  const rate = options.maxRenewalsPerSecond;
  // The flag's and the file's rule (spec.ts), named by the library's name for it.
  if (rate !== undefined) checkNumber(RENEWALS_PER_SECOND, rate, 'maxRenewalsPerSecond');
  const checkInterval = options.checkIntervalMs ?? DEFAULT_CHECK_INTERVAL_MS;
  if (!(Number.isFinite(checkInterval) && checkInterval >= 0)) throw new ValidationError([{ field: 'checkIntervalMs', message: 'must be 0 (off) or a positive number' }]);
  const checkRate = options.maxChecksPerSecond ?? DEFAULT_MAX_CHECKS_PER_SECOND;
  if (!(Number.isFinite(checkRate) && checkRate > 0)) throw new ValidationError([{ field: 'maxChecksPerSecond', message: 'must be a positive number' }]);
  checkFleet(options);
  const schedule = options.schedule === undefined ? DEFAULT_SCHEDULE : options.schedule;
  if (schedule !== false) checkSchedule(schedule);
  const templates = options.templates !== undefined && options.templates.length > 0;
  const publishes = options.tokenFile !== undefined || templates || (options.profileSinks?.size ?? 0) > 0;
  return Object.freeze({
    marginMs,
    jitterMs: options.jitterMs ?? marginMs * 0.2,
    spreadRenewals: options.spreadRenewals ?? Boolean(options.fleet),
    safetyMs: Math.min(SAFETY_WINDOW_MS, marginMs / 2),
    concurrency,
    maxRenewalsPerSecond: rate,
    schedule,
    sweepOnStart: options.sweepOnStart ?? schedule !== false,
    backoff: Object.freeze({
      baseMs: options.backoff?.baseMs ?? 1_000,
      maxMs: options.backoff?.maxMs ?? Math.min(60_000, marginMs / 4),
    }),
    tokenTimeoutMs: options.tokenTimeoutMs ?? 15_000,
    lockWaitMs: options.lockWaitMs ?? 15_000,
    reconcileTimeoutMs: options.reconcileTimeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS,
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_SECONDS * 1000,
    serviceCallMs: DEFAULT_SERVICE_CALL_MS,
    serviceRetry: Object.freeze({ ...(options.serviceRetry ?? DEFAULT_SERVICE_RETRY) }),
    needsOwnToken: publishes || options.socket !== undefined || options.coordinator !== undefined,
    publishes,
    connectorFailingAfterMs: options.connectorFailingAfterMs ?? DEFAULT_CONNECTOR_FAILING_AFTER_MS,
    checks: Object.freeze({ intervalMs: checkInterval, perSecond: checkRate, timeoutMs: options.checkTimeoutMs ?? CHECK_TIMEOUT_MS }),
  });
}

/**
 * Fleet mode needs its membership (a coordinator that keeps it: Redis with SYNCAUTH_GRANT_KEY) and the grant key,
 * through which the next owner of a profile gets a rotated refresh token; its times must be usable.
 */
function checkFleet(options: DaemonOptions): void {
  const fleet = options.fleet;
  if (!fleet) return;
  if (fleet !== true && (typeof fleet !== 'object' || fleet === null)) throw new ValidationError([{ field: 'fleet', message: 'must be true, false or an object with leaseMs and fallbackMs' }]);
  const issues: FieldIssue[] = [];
  if (!options.coordinator) issues.push({ field: 'fleet', message: 'needs Redis to share the profiles among replicas: give --redis-url (daemon.redis_url)' });
  else if (!options.coordinator.fleet || !options.grantKey) issues.push({ field: 'fleet', message: 'needs SYNCAUTH_GRANT_KEY: the replicas authenticate their fleet records in Redis with it, and hand a rotated refresh token to the next owner sealed under it' });
  if (fleet !== true) {
    for (const key of ['leaseMs', 'fallbackMs'] as const) {
      const value = fleet[key];
      if (value !== undefined && !(Number.isFinite(value) && value >= 100)) issues.push({ field: `fleet.${key}`, message: 'must be a number of milliseconds of at least 100' });
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
}
