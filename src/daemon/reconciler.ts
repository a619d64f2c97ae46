// One profile's reconciles, a part of its worker (worker.ts): the connector is given the profile's token on a
// chain of its own, one reconcile at a time and the next queued behind with the newest token, outside the
// renewal lock and within a deadline, so a slow or hung service never holds up a renewal. With replicas, one
// replica reconciles per token lifetime (the coordinator's lease and shared record); the others watch.
import { SyncauthError } from '../errors.js';
import type { ProfileState } from '../profile/index.js';
import { ServiceClient } from '../service/index.js';
import { syncConnector } from '../sync/reconcile.js';
import { due as renewalDue } from '../sync/renewal-policy.js';
import { workspaceKey } from '../sync/family-listing.js';
import { Backoff } from '../backoff.js';
import { classifyFailure } from './classify.js';
import { isCoordinatorUnavailable, type Coordinator, type SharedReconcile } from './coordinator.js';
import { HELD_ELSEWHERE, type Exclusion } from './exclusion.js';
import type { ProfileRuntime } from './runtime.js';
import type { DaemonProfile, ReconcileOutcome } from './types.js';
import type { WorkerContext } from './worker-context.js';

/** `renewed`: after this process's own renewal; `retry`: a pending reconcile, or a token taken from another process. */
export type ReconcileKind = 'renewed' | 'retry';

export class ProfileReconciler {
  readonly #rt: ProfileRuntime;
  readonly #ctx: WorkerContext;
  /** The profile's reconcile running now, and the one queued to run after it (with the newest token). */
  #reconcileRunning: Promise<ReconcileOutcome> | undefined;
  #reconcileQueued: { kind: ReconcileKind; promise: Promise<ReconcileOutcome> } | undefined;
  /** Connection checks running on the profile's client. */
  #checks = 0;

  constructor(rt: ProfileRuntime, ctx: WorkerContext) {
    this.#rt = rt;
    this.#ctx = ctx;
  }

  #now(): number {
    return this.#ctx.clock.wall();
  }

  #readState(): Promise<ProfileState | undefined> {
    return this.#ctx.store.read(this.#rt.name);
  }

  /** Gives up on the profile's service calls in flight; the next reconcile opens a new client. */
  abandon(): void {
    const held = this.#rt.client;
    if (!held) return;
    this.#rt.client = undefined;
    held.client.cancel();
    void held.client.close().catch(() => undefined);
  }

  /**
   * A reconcile on the profile's own chain: at once when none runs, otherwise once the running one has ended
   * (callers meanwhile share that one). It reads the token when it starts, so it gives the connector the
   * newest; a renewal never waits for it, and it never overlaps another of the same profile.
   */
  reconcile(kind: ReconcileKind): Promise<ReconcileOutcome> {
    const queued = this.#reconcileQueued;
    if (queued) {
      if (kind === 'renewed') queued.kind = 'renewed';
      return queued.promise;
    }
    const running = this.#reconcileRunning;
    if (!running) return this.#startReconcile(kind);
    const next: { kind: ReconcileKind; promise: Promise<ReconcileOutcome> } = { kind, promise: Promise.resolve('skipped') };
    next.promise = running.then(() => {
      this.#reconcileQueued = undefined;
      return this.#startReconcile(next.kind);
    });
    this.#reconcileQueued = next;
    return next.promise;
  }

  /** The reconcile running or queued, if any. */
  get reconciling(): Promise<ReconcileOutcome> | undefined {
    return this.#reconcileQueued?.promise ?? this.#reconcileRunning;
  }

  #startReconcile(kind: ReconcileKind): Promise<ReconcileOutcome> {
    const rt = this.#rt;
    const run = this.#ctx.reconcileLimiter
      .run(() => this.#reconcileOnce(kind))
      .catch((error: unknown): ReconcileOutcome => {
        this.#ctx.log.error({ profile: rt.name, event: 'reconcile.failed', op: 'reconcile', err: error }, 'unexpected failure in the reconcile');
        return 'failed';
      });
    this.#reconcileRunning = run;
    void run.then(() => {
      if (this.#reconcileRunning === run) this.#reconcileRunning = undefined;
      this.#release();
    });
    return run;
  }

  /**
   * Lets go of the profile's client once nothing uses it: the next reconcile is a token lifetime away, far past
   * any keep-alive, and ten thousand profiles each holding a connection pool between reconciles cost the
   * daemon its memory for nothing. The next reconcile opens a new one.
   */
  #release(): void {
    if (this.#reconcileRunning || this.#reconcileQueued || this.#checks > 0) return;
    const held = this.#rt.client;
    if (!held) return;
    this.#rt.client = undefined;
    void held.client.close().catch(() => undefined);
  }

  /**
   * `renewed`: this process's own fresh token, given as after every renewal (through the replicas' lease with
   * a coordinator); `retry`: a pending reconcile tried again, or a token taken from another process.
   */
  async #reconcileOnce(kind: ReconcileKind): Promise<ReconcileOutcome> {
    const rt = this.#rt;
    const profile = rt.config;
    if (!profile?.reconcile || rt.removed || this.#ctx.shutdown.aborted) return rt.reconcile.lastOutcome ?? 'skipped';
    // A retry queued behind a reconcile that has since given the connector the token needs doing no more.
    if (kind === 'retry' && !rt.reconcileDue()) return rt.reconcile.lastOutcome ?? 'skipped';
    const owed = rt.reconcileOwed;
    const coordinator = this.#ctx.coordinator;
    let outcome: ReconcileOutcome;
    if (kind === 'retry') outcome = await this.#retryReconcile(profile);
    else outcome = coordinator ? await this.#reconcileShared(profile, coordinator) : await this.#reconcileNow(profile);
    // A renewal while it ran owes the connector the newer token: its reconcile, queued behind, goes at once.
    if (rt.reconcileOwed !== owed) {
      rt.reconcile.pending = true;
      rt.reconcile.backoff = Backoff.none;
    }
    return outcome;
  }


  /**
   * The service's connection check of the profile's connector, within `timeoutMs` (after a re-authorization:
   * proof the connector can read the folder with the new grant). Undefined when there is no connector.
   */
  async checkConnection(timeoutMs: number): Promise<{ ok: boolean; message?: string } | undefined> {
    const rt = this.#rt;
    const profile = rt.config;
    const id = rt.connectorId;
    if (!profile?.reconcile || !id) return undefined;
    const client = this.#clientFor(profile) as ServiceClient;
    this.#checks++;
    try {
      const check = await client.runSourceConnectionCheck(id, { timeoutMs });
      if (check.status === 'SUCCESS') return { ok: true };
      return { ok: false, message: check.reason?.trim() || `the check ended ${check.status}` };
    } catch (error) {
      return { ok: false, message: classifyFailure(error).message };
    } finally {
      this.#checks--;
      this.#release();
    }
  }

  // ---- the connector ----

  #clientFor(profile: DaemonProfile): ServiceClient | undefined {
    const rt = this.#rt;
    const target = profile.reconcile;
    if (!target) return undefined;
    const key = JSON.stringify(target);
    if (rt.client?.key === key) return rt.client.client;
    const { config, serviceClient } = this.#ctx;
    const client = new ServiceClient({
      baseUrl: target.baseUrl,
      apiKey: target.apiKey,
      ...(target.apiKeyHeader ? { apiKeyHeader: target.apiKeyHeader } : {}),
      retry: config.serviceRetry,
      ...serviceClient,
      timeouts: { totalMs: config.serviceCallMs, ...serviceClient?.timeouts },
    });
    rt.client = { key, client };
    return client;
  }

  /** Outside the renewal lock, like the reconcile after a renewal: a hung service never blocks renewals. */
  async #retryReconcile(profile: DaemonProfile): Promise<ReconcileOutcome> {
    const rt = this.#rt;
    const coordinator = this.#ctx.coordinator;
    if (coordinator) return this.#reconcileShared(profile, coordinator);
    try {
      const ours = rt.token?.expiresAt ?? 0;
      const state = await this.#readState();
      const newest = state?.accessTokenExpiresAt ? Date.parse(state.accessTokenExpiresAt) : 0;
      if (newest > ours) {
        // Someone renewed after this process did, and reconciled with that newer token: leave it be.
        rt.reconcile.pending = false;
        return 'skipped';
      }
      return await this.#reconcileNow(profile);
    } catch (error) {
      const failure = classifyFailure(error);
      const wait = rt.reconcile.backoff.nextDelay(this.#ctx.config.backoff, this.#ctx.random, failure.retryAfterMs);
      rt.reconcile.backoff = rt.reconcile.backoff.failed(this.#ctx.clock.mono(), wait);
      this.#ctx.log.warn({ profile: rt.name, event: 'reconcile.failed', op: 'reconcile', errorCode: failure.code }, `could not reconcile the connector of profile "${rt.name}": ${failure.message}`);
      return 'failed';
    }
  }

  /**
   * One reconcile, outside the renewal lock (a slow service must not keep other processes from renewing) and
   * within its own deadline; a failure schedules a retry and never touches the renewal.
   */
  async #reconcileNow(profile: DaemonProfile, sharedConnectorId?: string): Promise<ReconcileOutcome> {
    const rt = this.#rt;
    const { config, log, metrics, store } = this.#ctx;
    const target = profile.reconcile;
    const token = rt.token;
    const grant = rt.grant;
    if (!target || !grant || !token || !rt.holdsToken(this.#now())) {
      // Never hand the service an expired token; the next renewal reconciles with a fresh one.
      rt.reconcile.pending = false;
      return 'skipped';
    }
    const client = this.#clientFor(profile) as ServiceClient;
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      this.abandon();
    }, config.reconcileTimeoutMs);
    try {
      const state = await this.#readState();
      const result = await syncConnector({
        client,
        connector: {
          name: target.connectorName,
          remoteUrl: target.remoteUrl,
          recursive: target.recursive,
          appKey: grant.appKey,
          appSecret: grant.appSecret,
          refreshToken: grant.refreshToken,
          accessToken: token.value,
        },
        ...(state?.connectorId || sharedConnectorId ? { connectorId: (state?.connectorId ?? sharedConnectorId) as string } : {}),
        ...(target.workflow ? { workflow: target.workflow } : {}),
        now: () => new Date(this.#now()),
        familyCheck: (connector, recordedId) => this.#ctx.families.othersBesides(workspaceKey(target), client, connector, recordedId),
        profiles: store,
        profile: rt.name,
      });
      rt.connectorId = result.connector.id;
      rt.reconcile = { pending: false, backoff: Backoff.none, lastOutcome: result.action };
      rt.notices?.reconcileSucceeded();
      metrics.reconcile(rt.name, result.action, this.#now());
      const detail = { profile: rt.name, event: `reconcile.${result.action}`, op: 'reconcile', connectorId: result.connector.id, action: result.action, removed: result.removed, removedConnectors: result.removedConnectors, keptShared: result.keptShared, workflow: result.workflowAction };
      // A routine in-place update is debug; removing duplicates or leaving shared ones is worth an operator's eye.
      const routine = result.action === 'updated' && result.workflowAction !== 'updated' && result.removed.length === 0 && result.keptShared.length === 0;
      if (routine) log.debug(detail, 'connector reconciled');
      else log.info(detail, `connector of profile "${rt.name}" ${result.action}`);
      return result.action;
    } catch (caught) {
      const error = timedOut
        ? new SyncauthError('RECONCILE_TIMEOUT', `the service did not finish the reconcile within ${Math.round(config.reconcileTimeoutMs / 1000)} s`, { cause: caught })
        : caught;
      const failure = classifyFailure(error);
      metrics.reconcile(rt.name, 'failed', this.#now());
      rt.reconcile.lastOutcome = 'failed';
      rt.notices?.reconcileFailed(this.#now(), { code: failure.code, message: failure.message });
      if (failure.kind === 'configuration' || failure.kind === 'terminal') {
        // Retrying a request the service refuses is noise; the next renewal tries again with fresh values.
        rt.reconcile.pending = false;
        log.error(
          { profile: rt.name, event: 'reconcile.failed', op: 'reconcile', errorCode: failure.code, retry: 'next_renewal' },
          `could not reconcile the connector of profile "${rt.name}": ${failure.message}${failure.hint ? ` (${failure.hint})` : ''}; trying again after the next renewal`,
        );
      } else {
        const wait = rt.reconcile.backoff.nextDelay(config.backoff, this.#ctx.random, failure.retryAfterMs);
        rt.reconcile.backoff = rt.reconcile.backoff.failed(this.#ctx.clock.mono(), wait);
        rt.reconcile.pending = true;
        log.warn(
          { profile: rt.name, event: 'reconcile.failed', op: 'reconcile', errorCode: failure.code, retryInMs: wait },
          `could not reconcile the connector of profile "${rt.name}": ${failure.message}; trying again in ${Math.ceil(wait / 1000)} s`,
        );
      }
      return 'failed';
    } finally {
      clearTimeout(deadline);
    }
  }

  /**
   * With replicas, one reconciles per lifetime: the replica that takes the profile's lease while the token the
   * connector holds (the shared record) is inside the renewal window; the others find the record fresh and
   * skip. A replica that finds the lease taken, or cannot reach the coordinator, keeps its reconcile pending
   * and looks again, so a replica that died holding the lease is covered by the next one.
   */
  async #reconcileShared(profile: DaemonProfile, shared: Coordinator): Promise<ReconcileOutcome> {
    const rt = this.#rt;
    const { config, random, coordinatorHealth, log, locks } = this.#ctx;
    const token = rt.token;
    rt.watchSharedAt = undefined;
    if (!token || !rt.holdsToken(this.#now())) {
      rt.reconcile.pending = false;
      return 'skipped';
    }
    // The connector's token is due when it would be renewed now: inside the margin plus the largest jitter.
    // The record's times are on this process's wall clock as the coordinator translates them (see Coordinator).
    const rule = { marginMs: config.marginMs, jitterMs: config.jitterMs };
    // A shared profile of a fleet has one owner, whose renewals may come early (spread over the window): each is
    // given to the connector, rather than left until the connector's token is inside the margin, where a Redis
    // outage then could let it expire. The older token is still never given (below).
    const owned = this.#ctx.fleet?.shares(rt.name) === true;
    const due = (record: SharedReconcile | undefined): boolean => owned || !record || renewalDue({ expiresAt: record.expiresAt }, rule, this.#now());
    try {
      const seen = await shared.lastReconcile(rt.name);
      if (!due(seen)) return this.#reconciledElsewhere(seen as SharedReconcile);
      const outcome = await (locks.replicas as Exclusion).run(rt.name, async () => {
        coordinatorHealth.up();
        const record = await shared.lastReconcile(rt.name);
        if (!due(record)) return this.#reconciledElsewhere(record as SharedReconcile);
        // Never give the connector a token older than the one it holds: this replica's renewal is failing
        // too, or due itself; it looks again shortly.
        const expiresAt = rt.tokenExpiry(this.#now()) ?? 0;
        if (record && expiresAt <= record.expiresAt) return 'older' as const;
        const reconciled = await this.#reconcileNow(profile, record?.connectorId);
        if (reconciled === 'failed' || reconciled === 'skipped') return reconciled;
        const connectorId = rt.connectorId;
        await shared
          .recordReconcile(rt.name, { expiresAt, reconciledAt: this.#now(), replica: shared.replicaId, ...(connectorId ? { connectorId } : {}) })
          .catch((error: unknown) =>
            log.warn({ profile: rt.name, event: 'reconcile.unshared', op: 'reconcile', error: classifyFailure(error).message }, 'could not tell the other replicas about the reconcile'),
          );
        return reconciled;
      });
      if (outcome === 'older') return this.#deferReconcile(config.backoff.maxMs * (1 + random()));
      if (outcome !== HELD_ELSEWHERE) return outcome;
      // Another replica holds the lease: it is reconciling now, or died holding it and the lease will expire.
      coordinatorHealth.up();
      return this.#deferReconcile(config.backoff.baseMs * (1 + random()));
    } catch (error) {
      coordinatorHealth.down(error);
      const wait = rt.reconcile.backoff.nextDelay(config.backoff, random);
      rt.reconcile.backoff = rt.reconcile.backoff.failed(this.#ctx.clock.mono(), 0);
      return this.#deferReconcile(wait, isCoordinatorUnavailable(error));
    }
  }

  /**
   * The coordinator is reachable again: a reconcile held only for it is due now, not when its backoff (grown
   * while the coordinator was away) runs out. Returns whether one was.
   */
  coordinatorBack(): boolean {
    const reconcile = this.#rt.reconcile;
    if (!reconcile.pending || !reconcile.awaitsCoordinator) return false;
    reconcile.awaitsCoordinator = false;
    reconcile.backoff = Backoff.none;
    return true;
  }

  #reconciledElsewhere(record: SharedReconcile): ReconcileOutcome {
    const rt = this.#rt;
    rt.reconcile.pending = false;
    rt.reconcile.backoff = Backoff.none;
    // The replica that reconciled renews and reconciles again before its token is inside the margin. Should it
    // not have by the time half the margin is left (dead, stopped, its clock wrong), this one takes over.
    rt.watchSharedAt = rt.monoTimeOf(record.expiresAt - this.#ctx.config.marginMs / 2, this.#now());
    this.#ctx.metrics.reconcile(rt.name, 'skipped');
    this.#ctx.log.debug({ profile: rt.name, event: 'reconcile.skipped', op: 'reconcile' }, 'another replica gave the connector a token of this lifetime');
    return 'skipped';
  }

  /** The reconcile waits: another replica holds the lease, or (`awaitsCoordinator`) the coordinator is away. */
  #deferReconcile(waitMs: number, awaitsCoordinator = false): ReconcileOutcome {
    const rt = this.#rt;
    rt.reconcile.pending = true;
    rt.reconcile.awaitsCoordinator = awaitsCoordinator;
    rt.reconcile.backoff = rt.reconcile.backoff.waitUntil(this.#ctx.clock.mono() + waitMs);
    this.#ctx.metrics.reconcile(rt.name, 'deferred');
    return 'deferred';
  }
}
