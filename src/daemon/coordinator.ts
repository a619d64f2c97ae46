// How replicas share the work: a lease per profile, so one replica renews at a time, and a shared record of
// the last renewal, so the others know the token is fresh without holding it. The Redis implementation is in
// redis.ts; anything with the same semantics (a database row, etcd) could stand in.
import { SyncauthError } from '../errors.js';

export interface Lease {
  /** Aborts when the lease is lost (not renewable, or taken over after expiry) while work runs. */
  readonly signal: AbortSignal;
  /** Gives the lease up, only if it is still ours. Never throws. */
  release(): Promise<void>;
}

export interface SharedRenewal {
  /** Epoch milliseconds at which the renewed access token expires. */
  expiresAt: number;
  renewedAt: number;
  /** Which replica renewed. */
  replica: string;
}

export interface Coordinator {
  readonly replicaId: string;
  /** The profile's lease, held and kept alive until released; undefined when another replica holds it. */
  acquire(profile: string): Promise<Lease | undefined>;
  lastRenewal(profile: string): Promise<SharedRenewal | undefined>;
  recordRenewal(profile: string, record: SharedRenewal): Promise<void>;
  /** Whether the backend answered recently; false means no renewal happens here. */
  isAvailable(): boolean;
  close(): Promise<void>;
}

/** The coordination backend cannot be reached: renewing anyway could race another replica, so nothing is done. */
export class CoordinatorUnavailableError extends SyncauthError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('COORDINATOR_UNAVAILABLE', message, {
      hint: 'check that Redis is running and reachable at --redis-url; renewals resume by themselves once it is',
      cause: options.cause,
    });
  }
}

export function isCoordinatorUnavailable(error: unknown): error is CoordinatorUnavailableError {
  return error instanceof CoordinatorUnavailableError;
}
