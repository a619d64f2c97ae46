// How replicas share the connector. Each replica renews its own access token (tokens of one grant coexist),
// so every replica's consumers stay fresh on their own; only the reconcile is shared: a lease per profile, so
// one replica reconciles at a time, and a shared record of the token the connector was last given, so the
// others know it is done for this lifetime. The Redis implementation is in redis.ts; anything with the same
// semantics (a database row, etcd) could stand in.
import { SyncauthError } from '../errors.js';
import type { PauseBackend } from './account-pause.js';
import type { BudgetBackend } from './call-budget.js';
import type { FleetBackend } from './fleet.js';
import type { CheckOutcome } from './types.js';

export interface Lease {
  /** Aborts when the lease is lost (not renewable, or taken over after expiry) while work runs. */
  readonly signal: AbortSignal;
  /** Gives the lease up, only if it is still ours. Never throws. */
  release(): Promise<void>;
}

/**
 * The last reconcile any replica made: which token the connector holds now, as far as its expiry goes.
 * Its times are epoch milliseconds on the clock of the process that reads or writes them: the coordinator
 * keeps them on a clock of its own (Redis's) and translates, so a replica whose wall clock is wrong neither
 * writes an expiry the others misread nor misreads theirs.
 */
export interface SharedReconcile {
  /** Epoch milliseconds at which the access token the connector was given expires. */
  expiresAt: number;
  reconciledAt: number;
  /** Which replica reconciled. */
  replica: string;
  /** The connector it reconciled, so a replica with no record of its own updates it instead of looking it up. */
  connectorId?: string;
}

export interface Coordinator {
  readonly replicaId: string;
  /** The profile's reconcile lease, held and kept alive until released; undefined when another replica holds it. */
  acquire(profile: string): Promise<Lease | undefined>;
  lastReconcile(profile: string): Promise<SharedReconcile | undefined>;
  /** Records a reconcile; never replaces a record of a token that expires later. */
  recordReconcile(profile: string, record: SharedReconcile): Promise<void>;
  /**
   * The sealed grant record of the profile (see grant-record.ts), as stored; undefined when there is none.
   * Optional: a coordinator without it shares no grant, and a re-authorization reaches only its own replica.
   */
  readGrantRecord?(profile: string): Promise<string | undefined>;
  /**
   * Stores a sealed grant record issued at `issuedAt`; never replaces one issued later (false then). A record
   * is kept until replaced: it is what a replica restarted after the re-authorization adopts.
   */
  writeGrantRecord?(profile: string, record: string, issuedAt: number): Promise<boolean>;
  /**
   * The token check of the profile for interval `cycle`: claimed by this replica (a key that lives `ttlMs`),
   * or what the replica that claimed it found (`outcome` absent while it is still checking). Optional: without
   * it every replica checks on its own.
   */
  claimCheck?(profile: string, cycle: number, ttlMs: number): Promise<{ claimed: boolean; outcome?: CheckOutcome }>;
  /** What this replica's check of interval `cycle` found, for the others. */
  recordCheck?(profile: string, cycle: number, outcome: CheckOutcome, ttlMs: number): Promise<void>;
  /** What the check of interval `cycle` found: `pending` while it runs, undefined when nobody claimed it. */
  peekCheck?(profile: string, cycle: number): Promise<CheckOutcome | 'pending' | undefined>;
  /**
   * The fleet's membership (fleet.ts): present when the backend can authenticate member records (Redis with
   * SYNCAUTH_GRANT_KEY). Without it a replica cannot run in fleet mode.
   */
  readonly fleet?: FleetBackend;
  /**
   * Pauses of a Dropbox account's token calls after a 429 (account-pause.ts), shared by every replica: present
   * when the backend can authenticate them (Redis with SYNCAUTH_GRANT_KEY).
   */
  readonly pauses?: PauseBackend;
  /**
   * Each shared profile's budget of token calls (call-budget.ts), continued by the replica that takes it: present
   * when the backend can authenticate it (Redis with SYNCAUTH_GRANT_KEY).
   */
  readonly budgets?: BudgetBackend;
  /** Whether the backend answered recently; false means reconciles wait (renewals go on). */
  isAvailable(): boolean;
  /**
   * Calls `listener` each time the backend is reachable again after an outage, so that reconciles held meanwhile
   * go ahead at once rather than at the next sweep. Returns a function that stops the calls. Optional.
   */
  onAvailable?(listener: () => void): () => void;
  close(): Promise<void>;
}

/** The coordination backend cannot be reached: reconciling anyway could race another replica, so the reconcile waits. */
export class CoordinatorUnavailableError extends SyncauthError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('COORDINATOR_UNAVAILABLE', message, {
      kind: 'coordinator',
      hint: 'check that Redis is running and reachable at --redis-url; reconciles resume by themselves once it is (renewals never stopped)',
      cause: options.cause,
    });
  }
}

export function isCoordinatorUnavailable(error: unknown): error is CoordinatorUnavailableError {
  return error instanceof CoordinatorUnavailableError;
}
