// What a profile's worker, and each of its parts (renewal.ts, reconciler.ts), may use of the daemon.
import type { Logger } from '../log.js';
import type { AccountPauses } from './account-pause.js';
import type { CallBudgets } from './call-budget.js';
import type { ProfileStore } from '../profile/index.js';
import type { TemplateSpec } from '../publish/template.js';
import type { TokenPublisher } from '../publish/publisher.js';
import type { DaemonConfig } from './config.js';
import type { Coordinator } from './coordinator.js';
import type { Exclusion, SingleFlight } from './exclusion.js';
import type { RateGate, Semaphore } from '../limiter.js';
import type { DaemonMetrics } from './metrics.js';
import type { DaemonClock } from './runtime.js';
import type { NoticeSink } from './events.js';
import type { GrantSharing } from './grant-sharing.js';
import type { FamilyListings } from '../sync/family-listing.js';
import type { DaemonOptions } from './types.js';

/** What a worker may use of the daemon: its settings and shared parts, nothing of other profiles. */
export interface WorkerContext {
  readonly config: DaemonConfig;
  readonly clock: DaemonClock;
  readonly log: Logger;
  readonly store: ProfileStore;
  /** Who may work on a profile at once: this process's visits, processes on the host, replicas. */
  readonly locks: { readonly flight: SingleFlight; readonly renewal: Exclusion; readonly replicas: Exclusion | undefined };
  readonly coordinator: Coordinator | undefined;
  readonly files: TokenPublisher;
  readonly metrics: DaemonMetrics;
  /** Renewals at once across profiles. */
  readonly limiter: Semaphore;
  /** Reconciles at once across profiles: bounded apart from renewals, so that no renewal waits behind one. */
  readonly reconcileLimiter: Semaphore;
  /** The duplicate check every profile of a workspace shares: one listing of it, not one per reconcile. */
  readonly families: FamilyListings;
  readonly rateGate: RateGate | undefined;
  /** Aborted when the daemon gives up on work in flight at shutdown. */
  readonly shutdown: AbortSignal;
  readonly random: () => number;
  readonly loadProfile: DaemonOptions['loadProfile'];
  readonly templates: readonly TemplateSpec[];
  readonly serviceClient: DaemonOptions['serviceClient'];
  /** The Dropbox API calls' transport, when the daemon was given one. */
  readonly dropboxApiDispatcher: DaemonOptions['dropboxApiDispatcher'];
  /** Where notices for a person go, when someone listens. */
  readonly notices: NoticeSink | undefined;
  /** The grant record replicas share after a re-authorization, when a coordinator and a key make one. */
  readonly grants: GrantSharing | undefined;
  /** The operator's command for a re-authorization's grant (--on-reauthorized). */
  readonly onReauthorized: DaemonOptions['onReauthorized'];
  /**
   * Fleet mode: just before a renewal, whether this replica still owns the profile (true for a profile it
   * publishes, which every replica renews for its own consumers). Undefined without a fleet.
   */
  readonly fleet: { confirm(profile: string): Promise<boolean>; servesForFallback(profile: string): boolean; shares(profile: string): boolean } | undefined;
  /** Pauses of a Dropbox account's token calls after a 429, here and (with Redis and the key) on every replica. */
  readonly pauses: AccountPauses;
  /** Each profile's budget of token calls a day, here and (for a fleet's shared profiles) in Redis. */
  readonly budgets: CallBudgets;
  /** The coordinator's reachability is the daemon's, told once however many workers notice. */
  readonly coordinatorHealth: { down(error: unknown): void; up(): void };
}

/** This cycle's share of the jitter: renew up to this much before the margin (a draw per profile and cycle). */
export function drawJitter(ctx: Pick<WorkerContext, 'random' | 'config'>): number {
  return ctx.random() * ctx.config.jitterMs;
}
