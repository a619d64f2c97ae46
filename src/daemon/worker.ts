// One profile's renewals, as a part of its own: the worker owns what the daemon knows about the profile (its
// token, its backoff, why it is parked) privately, and the daemon talks to it through a handful of methods:
// visit (one sweep's work, single flight), expire (drop a token whose time is up), view (status and health),
// apply (a reloaded entry), dispose. Everything it needs from outside comes through a narrow context.
import { SyncauthError } from '../errors.js';
import type { Logger } from '../log.js';
import { getCurrentAccount } from '../oauth/api.js';
import { isOAuthError, type TokenSet } from '../oauth/index.js';
import { removeTemporaryLeftovers } from '../profile/files.js';
import { isProfileStoreError, type ProfileState, type ProfileStore } from '../profile/index.js';
import { reauthorizeCommand } from '../profile/name.js';
import { tokenFileFor } from '../publish/place.js';
import { ACCOUNT_ID_TIMEOUT_MS, templatesUse, type TemplateSpec } from '../publish/template.js';
import { readTokenFile, removeLeftovers, type TokenPublisher } from '../publish/token-file.js';
import { ServiceClient } from '../service/index.js';
import { syncConnector } from '../sync/reconcile.js';
import { renewHoldingLock } from '../sync/renew.js';
import { remainingMs } from '../sync/token-cache.js';
import { linkSignals } from '../abort.js';
import { Backoff } from '../backoff.js';
import { classifyFailure, type Failure } from './classify.js';
import type { DaemonConfig } from './config.js';
import { isCoordinatorUnavailable, type Coordinator, type SharedReconcile } from './coordinator.js';
import { HELD_ELSEWHERE, type Exclusion, type SingleFlight } from './exclusion.js';
import type { RateGate, Semaphore } from './limiter.js';
import type { DaemonMetrics, ProfileHealth } from './metrics.js';
import { ProfileRuntime, type DaemonClock, type HeldToken } from './runtime.js';
import { healthOf, profileStatus } from './status.js';
import type {
  DaemonGrant,
  DaemonOptions,
  DaemonProfile,
  ParkReason,
  ProfileEntry,
  ProfileLoadFailure,
  ProfileStatus,
  ReconcileOutcome,
  RenewalOutcome,
  SweepEntry,
} from './types.js';

export function isLoadFailure(entry: ProfileEntry): entry is ProfileLoadFailure {
  return 'error' in entry;
}

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
  readonly rateGate: RateGate | undefined;
  /** Aborted when the daemon gives up on work in flight at shutdown. */
  readonly shutdown: AbortSignal;
  readonly random: () => number;
  readonly loadProfile: DaemonOptions['loadProfile'];
  readonly templates: readonly TemplateSpec[];
  readonly serviceClient: DaemonOptions['serviceClient'];
  /** The coordinator's reachability is the daemon's, told once however many workers notice. */
  readonly coordinatorHealth: { down(error: unknown): void; up(): void };
}

/** One visit's work: its sweep entry, and the reconcile it started, which runs outside the single flight. */
interface Visited {
  entry: SweepEntry;
  reconcile?: Promise<ReconcileOutcome>;
}

type ReconcileKind = 'renewed' | 'retry';

export class ProfileWorker {
  readonly #ctx: WorkerContext;
  readonly #rt: ProfileRuntime;
  /** The profile's reconcile running now, and the one queued to run after it (with the newest token). */
  #reconcileRunning: Promise<ReconcileOutcome> | undefined;
  #reconcileQueued: { kind: ReconcileKind; promise: Promise<ReconcileOutcome> } | undefined;

  private constructor(name: string, ctx: WorkerContext) {
    this.#ctx = ctx;
    this.#rt = new ProfileRuntime(name, ctx.clock);
  }

  /** A worker for `entry`: its recorded state read, a token file left by an earlier run adopted or removed. */
  static async start(entry: ProfileEntry, ctx: WorkerContext): Promise<ProfileWorker> {
    const worker = new ProfileWorker(entry.name, ctx);
    worker.#applyEntry(entry);
    if (!worker.#rt.parked) await worker.#observeInitialState();
    await worker.#adoptPublished();
    return worker;
  }

  get name(): string {
    return this.#rt.name;
  }

  /** The work in flight, if any, the reconciles it starts included: shutdown waits for it. */
  get inFlight(): Promise<unknown> | undefined {
    const visit = this.#ctx.locks.flight.inFlight(this.#rt.name);
    if (!visit && !this.#reconciling) return undefined;
    return (async () => {
      await visit?.catch(() => undefined);
      // A renewal that ends starts a reconcile, and one that runs may have another queued behind it.
      while (this.#reconciling) await this.#reconciling.catch(() => undefined);
    })();
  }

  // ---- what the daemon calls ----

  /**
   * One sweep's visit. Single flight, and never waiting: a profile whose previous cycle still runs (a slow
   * service, a hung endpoint, each within its deadline) is skipped and counted, and the sweep goes on.
   */
  async visit(): Promise<SweepEntry> {
    const name = this.#rt.name;
    const visited = await this.#ctx.locks.flight.run(name, () =>
      this.#work().catch((error: unknown): Visited => {
        this.#ctx.log.error({ profile: name, event: 'sweep.failed', op: 'sweep', err: error }, 'unexpected failure in the sweep');
        return { entry: { profile: name, action: 'idle' } };
      }),
    );
    if (visited === HELD_ELSEWHERE || visited.entry.action === 'in_flight') {
      this.#ctx.metrics.skipped(name);
      return { profile: name, action: 'in_flight' };
    }
    // The reconcile the visit started runs on the profile's own chain, outside the single flight: the sweep
    // still reports its outcome, but the next visit may renew while it runs.
    return visited.reconcile ? { ...visited.entry, reconcile: await visited.reconcile } : visited.entry;
  }

  /** Drops the token held when its time is up at `at`; the token file goes with it. */
  expire(at: number): Promise<void> {
    const rt = this.#rt;
    if (!rt.token || rt.holdsToken(at)) return Promise.resolve();
    // With replicas, the token this one holds may simply be older than the one another replica renewed.
    if ((rt.knownExpiresAt ?? 0) > rt.token.expiresAt) this.#ctx.log.debug({ profile: rt.name, event: 'token.expired', op: 'publish', older: true }, 'an older access token expired; another process holds the current one');
    else this.#ctx.log.warn({ profile: rt.name, event: 'token.expired', op: 'publish' }, `the access token of profile "${rt.name}" expired before a renewal succeeded`);
    return this.#dropToken();
  }

  /** How the profile looks at `at`, for status() and /readyz. */
  view(at: number): ProfileStatus {
    return profileStatus(this.#rt, at, this.#ctx.config);
  }

  /** Its health and the expiry known, for the metrics: cheaper than the whole view. */
  health(at: number): { health: ProfileHealth; expiresAt: number | undefined } {
    return { health: healthOf(this.#rt, at, this.#ctx.config).health, expiresAt: this.#rt.expiry(at) };
  }

  /** The token for the socket's readers: only while it is unexpired. */
  liveToken(at: number): { value: string; expiresAt: number } | undefined {
    const rt = this.#rt;
    const expiresAt = rt.tokenExpiry(at);
    return rt.token && expiresAt !== undefined && at < expiresAt ? { value: rt.token.value, expiresAt } : undefined;
  }

  /** A reloaded entry: new settings or secrets; a profile that could not be loaded before starts now. */
  async apply(entry: ProfileEntry): Promise<void> {
    const rt = this.#rt;
    const wasUnavailable = rt.parked?.reason === 'unavailable';
    this.#applyEntry(entry);
    if (!wasUnavailable || !rt.config) return;
    rt.parked = undefined;
    rt.loadBackoff = Backoff.none;
    this.#ctx.log.info({ profile: rt.name, event: 'profile.loaded', op: 'load' }, `profile "${rt.name}" loaded`);
    await this.#observeInitialState();
  }

  /**
   * The Dropbox account id, for templates that use it: learnt once per profile from the account endpoint,
   * within a short deadline, and after a failure not asked again for a minute (the render that needs it fails
   * and keeps its previous file meanwhile; the token file and the other templates do not wait).
   */
  async accountId(accessToken: string): Promise<string | undefined> {
    const rt = this.#rt;
    const apiUrl = rt.config?.dropboxApiUrl;
    if (rt.accountId || !apiUrl || this.#ctx.clock.mono() < rt.accountRetryAt || !(await templatesUse(this.#ctx.templates, 'account_id'))) return rt.accountId;
    try {
      rt.accountId = (await getCurrentAccount({ apiUrl, accessToken, timeoutMs: ACCOUNT_ID_TIMEOUT_MS, signal: this.#ctx.shutdown })).accountId;
    } catch (error) {
      rt.accountRetryAt = this.#ctx.clock.mono() + 60_000;
      this.#ctx.log.warn({ profile: rt.name, event: 'account.unknown', op: 'publish', error: classifyFailure(error).message }, `could not learn the Dropbox account id of profile "${rt.name}" for its templates`);
    }
    return rt.accountId;
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
   * Stops the worker. Removed from the configuration: its token file goes. At shutdown (`keepPublished`): a
   * token with life left stays for the consumers through a restart (its expiry is beside it); one about to
   * expire goes, since nobody will remove it once this process is gone.
   */
  async dispose(options: { keepPublished: boolean }): Promise<void> {
    const rt = this.#rt;
    rt.removed = true;
    if (!options.keepPublished) await this.inFlight;
    clearTimeout(rt.expiryTimer);
    const at = this.#now();
    const keep = options.keepPublished && (rt.tokenExpiry(at) ?? at) - at > this.#ctx.config.safetyMs && rt.publishedToken === rt.token?.value;
    if (keep) await rt.fileChain;
    else await this.#ctx.files.unpublish(rt);
    await rt.client?.client.close().catch(() => undefined);
    if (!options.keepPublished) this.#ctx.metrics.forget(rt.name);
  }

  // ---- the token held ----

  #now(): number {
    return this.#ctx.clock.wall();
  }

  #drawJitter(): number {
    return this.#ctx.random() * this.#ctx.config.jitterMs;
  }

  #dropToken(): Promise<void> {
    const rt = this.#rt;
    rt.token = undefined;
    clearTimeout(rt.expiryTimer);
    rt.expiryTimer = undefined;
    return this.#ctx.files.unpublish(rt);
  }

  #holdToken(token: HeldToken): void {
    const rt = this.#rt;
    clearTimeout(rt.expiryTimer);
    rt.token = token;
    rt.learnExpiry(token.expiresAt, this.#drawJitter(), token.monoExpiresAt);
    this.#armExpiry();
  }

  /**
   * Between sweeps too: a token must leave the file the moment it expires, not at the next tick. Timers run on
   * the monotonic clock; a wall clock that jumps past the expiry is caught by the schedule's heartbeat. A timer
   * that fires before the token's time is up by the daemon's clocks (timers round to the millisecond; the
   * clocks drift apart) is armed again for what is left, instead of leaving the token to the next sweep.
   */
  #armExpiry(): void {
    const rt = this.#rt;
    clearTimeout(rt.expiryTimer);
    const at = this.#now();
    rt.expiryTimer = setTimeout(() => {
      const now = this.#now();
      if (rt.token && rt.holdsToken(now)) this.#armExpiry();
      else void this.expire(now);
    }, Math.max(1, (rt.tokenExpiry(at) ?? at) - at));
    rt.expiryTimer.unref();
  }

  /**
   * A token file left by an earlier run stays while its token has more than the safety window to live, so
   * consumers keep working through a restart; this process takes it as the token it holds. Anything else
   * there (an expired token, one of unknown age, a leftover temporary file) goes.
   */
  async #adoptPublished(): Promise<void> {
    const rt = this.#rt;
    const { files, clock, log } = this.#ctx;
    await removeTemporaryLeftovers(this.#ctx.templates.map((spec) => tokenFileFor(spec.dest, rt.name)), 0);
    const file = files.pathOf(rt.name);
    if (file === undefined) return;
    await removeLeftovers(file);
    const left = rt.parked ? undefined : await readTokenFile(file, files.expectation(rt.name)).catch(() => undefined);
    const at = this.#now();
    if (!left || left.expiresAt - at <= this.#ctx.config.safetyMs) {
      await files.unpublish(rt);
      return;
    }
    this.#holdToken({ value: left.value, expiresAt: left.expiresAt, monoExpiresAt: clock.mono() + (left.expiresAt - at) });
    // Templates are rendered again from it: one added since the last run gets its file now.
    if (this.#ctx.templates.length > 0) await files.publish(rt);
    else rt.publishedToken = left.value;
    // What the connector holds is not known to a process that just started: its previous run may have been
    // stopped before a reconcile succeeded (the service down, a retry pending), or, with replicas, while it
    // watched for another replica to reconcile. Both lived in memory. The first sweep looks: alone, it gives the
    // connector this token; with replicas, only when the shared record says the connector's token is due, and
    // otherwise it watches again.
    if (rt.config?.reconcile) rt.oweReconcile();
    log.info({ profile: rt.name, event: 'token.adopted', op: 'publish', expiresAt: new Date(left.expiresAt).toISOString() }, `kept the published access token of profile "${rt.name}"; it is still valid`);
  }

  // ---- parking ----

  #park(reason: ParkReason, failure: Failure, until: 'secrets' | 'readable' | 'reload', secretsVersion: string | undefined): void {
    const rt = this.#rt;
    const already = rt.parked?.reason === reason && rt.parked.code === failure.code;
    rt.parked = { reason, code: failure.code, message: failure.message, until, secretsVersion };
    if (reason === 'reauthorization_needed') void this.#dropToken();
    if (already) return;
    if (reason === 'reauthorization_needed') {
      this.#ctx.log.error(
        { profile: rt.name, event: 'profile.reauthorization_needed', op: 'renew', errorCode: failure.code },
        `profile "${rt.name}" needs re-authorization: ${failure.message}. Run \`${reauthorizeCommand(rt.name)}\` to authorize again; ` +
          'the daemon stops renewing this profile until its secrets change.',
      );
    } else {
      this.#ctx.log.error(
        { profile: rt.name, event: 'profile.parked', op: 'renew', errorCode: failure.code },
        `profile "${rt.name}" cannot be renewed: ${failure.message}${failure.hint ? ` (${failure.hint})` : ''}. ` +
          `Fix it (e.g. \`${reauthorizeCommand(rt.name)}\`); the daemon stops renewing this profile until its secrets change or it reloads (SIGHUP).`,
      );
    }
  }

  #unpark(why: string): void {
    const rt = this.#rt;
    if (!rt.parked) return;
    rt.parked = undefined;
    rt.backoff = Backoff.none;
    this.#ctx.log.info({ profile: rt.name, event: 'profile.resumed', op: 'load' }, `profile "${rt.name}": ${why}; renewing it again`);
  }

  async #maybeUnpark(): Promise<void> {
    const rt = this.#rt;
    const parked = rt.parked;
    if (!parked || parked.until === 'reload' || !rt.config) return;
    let state: ProfileState | undefined;
    try {
      state = await this.#readState();
    } catch {
      return;
    }
    if (parked.until === 'secrets' && state?.secretsVersion === parked.secretsVersion) return;
    if (rt.config.readGrant) {
      try {
        rt.grant = await rt.config.readGrant();
      } catch (error) {
        this.#ctx.log.warn({ profile: rt.name, event: 'profile.secrets_unreadable', op: 'load', error: classifyFailure(error).message }, `profile "${rt.name}": could not read its new secrets`);
        return;
      }
    }
    rt.secretsVersion = state?.secretsVersion;
    if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), this.#drawJitter());
    this.#unpark(parked.until === 'readable' ? 'its state file is readable again' : 'new secrets were stored');
  }

  // ---- loading ----

  #readState(): Promise<ProfileState | undefined> {
    return this.#ctx.store.read(this.#rt.name);
  }

  /** At start and when a profile is added: what the state file says about expiry, connector and secrets. */
  async #observeInitialState(): Promise<void> {
    const rt = this.#rt;
    try {
      const state = await this.#readState();
      rt.secretsVersion = state?.secretsVersion;
      rt.connectorId = state?.connectorId;
      if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), this.#drawJitter());
      if (state?.needsReauthorization) {
        // Flagged by an earlier run or by another command: known now, not at the next renewal hours from now.
        const failure: Failure = {
          kind: 'terminal',
          code: state.lastError?.code ?? 'OAUTH_INVALID_GRANT',
          message: state.lastError?.message ?? 'the grant was revoked or has expired',
        };
        this.#park('reauthorization_needed', failure, 'secrets', state.secretsVersion);
      }
    } catch (error) {
      this.#park('configuration_error', classifyFailure(error), 'readable', undefined);
    }
  }

  #applyEntry(entry: ProfileEntry): void {
    const rt = this.#rt;
    const { log } = this.#ctx;
    if (isLoadFailure(entry)) {
      if (rt.config) {
        // A profile that ran before keeps its last good settings: a keychain locked during a reload must not
        // stop renewals that were working.
        log.warn({ profile: rt.name, event: 'profile.reload_failed', op: 'load', error: entry.error.message }, `profile "${rt.name}" could not be reloaded; keeping its previous settings`);
        return;
      }
      rt.loadError = entry.error;
      const failure = classifyFailure(entry.error);
      if (!rt.parked || rt.parked.reason !== 'unavailable') {
        log.error({ profile: rt.name, event: 'profile.load_failed', op: 'load', errorCode: failure.code }, `profile "${rt.name}" could not be loaded: ${failure.message}${failure.hint ? ` (${failure.hint})` : ''}`);
      }
      rt.parked = { reason: 'unavailable', code: failure.code, message: failure.message, until: 'reload', secretsVersion: undefined };
      return;
    }
    const grantChanged = rt.grant !== undefined && rt.grantDiffers(entry.grant);
    const targetKey = entry.reconcile ? JSON.stringify(entry.reconcile) : '';
    if (rt.client && rt.client.key !== targetKey) {
      void rt.client.client.close();
      rt.client = undefined;
    }
    rt.config = entry;
    rt.grant = entry.grant;
    rt.loadError = undefined;
    if (rt.parked && grantChanged) this.#unpark('its secrets changed');
  }

  /** A profile that could not be loaded is loaded again, with backoff, so fixing its files is enough. */
  async #retryLoad(): Promise<void> {
    const rt = this.#rt;
    const { loadProfile, clock, config, random } = this.#ctx;
    if (!loadProfile || !rt.loadBackoff.ready(clock.mono())) return;
    const entry = await loadProfile(rt.name).catch((error: unknown) => ({ name: rt.name, error: error instanceof Error ? error : new Error(String(error)) }));
    if (isLoadFailure(entry)) {
      rt.loadBackoff = rt.loadBackoff.failed(clock.mono(), rt.loadBackoff.nextDelay(config.backoff, random));
      return;
    }
    await this.apply(entry);
  }

  // ---- one visit ----

  async #work(): Promise<Visited> {
    const rt = this.#rt;
    if (rt.parked?.reason === 'unavailable') await this.#retryLoad();
    const profile = rt.config;
    if (!profile) return { entry: { profile: rt.name, action: 'parked' } };
    if (rt.parked) await this.#maybeUnpark();
    if (rt.parked) return { entry: { profile: rt.name, action: 'parked' } };
    const at = this.#now();
    // A write that failed when the token was renewed (the directory unusable for a while) is tried again at
    // every sweep: the file must not keep the previous token until it expires. So is a removal that failed
    // when the token expired: the file must not keep an expired token until a renewal succeeds.
    if (this.#ctx.files.publishes) {
      if (rt.token && rt.holdsToken(at)) {
        if (rt.publishedToken !== rt.token.value) await this.#ctx.files.publish(rt);
      } else if (rt.fileFailed) await this.#ctx.files.unpublish(rt);
    }
    if (!rt.inBackoff() && rt.renewalDue(at, this.#ctx.config.marginMs, this.#ctx.config.needsOwnToken)) {
      const { adopted, renewal } = await this.#ctx.limiter.run(() => this.#renewUnderLock(profile));
      const entry: SweepEntry = { profile: rt.name, action: 'renewal', renewal };
      if ((renewal !== 'renewed' && !adopted) || !profile.reconcile || rt.removed) return { entry };
      rt.oweReconcile();
      // A token taken from another process: that process may not have given it to the connector (`token` never
      // does), so this one does, unless someone renewed again since (the retry's rule).
      return { entry, reconcile: this.#reconcile(adopted ? 'retry' : 'renewed') };
    }
    if (rt.reconcileDue() && profile.reconcile) {
      // One reconcile per profile at a time: a retry while one runs is that one's to make (it is still busy).
      if (this.#reconciling) return { entry: { profile: rt.name, action: 'in_flight' } };
      return { entry: { profile: rt.name, action: 'reconcile' }, reconcile: this.#reconcile('retry') };
    }
    return { entry: { profile: rt.name, action: 'idle' } };
  }

  // ---- the reconcile chain ----

  /**
   * A reconcile on the profile's own chain: at once when none runs, otherwise once the running one has ended
   * (callers meanwhile share that one). It reads the token when it starts, so it gives the connector the
   * newest; a renewal never waits for it, and it never overlaps another of the same profile.
   */
  #reconcile(kind: ReconcileKind): Promise<ReconcileOutcome> {
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
  get #reconciling(): Promise<ReconcileOutcome> | undefined {
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
    });
    return run;
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

  // ---- renewal ----

  #settle(outcome: RenewalOutcome): RenewalOutcome {
    this.#rt.lastRenewal = { at: this.#now(), outcome };
    this.#ctx.metrics.renewal(this.#rt.name, outcome);
    return outcome;
  }

  async #renewUnderLock(profile: DaemonProfile): Promise<{ renewal: RenewalOutcome; adopted?: boolean }> {
    const rt = this.#rt;
    const { shutdown, locks } = this.#ctx;
    try {
      const outcome = await locks.renewal.run(
        rt.name,
        async (lockSignal) => {
          const linked = linkSignals(lockSignal, shutdown);
          try {
            return await this.#renewHolding(profile, linked.signal);
          } finally {
            linked.release();
          }
        },
      );
      // Another holder is renewing it now; the next visit reads what it recorded.
      return outcome === HELD_ELSEWHERE ? { renewal: this.#settle('fresh') } : outcome;
    } catch (error) {
      return { renewal: await this.#renewalFailed(profile, error) };
    }
  }

  /** The renewal itself, holding the profile's lock; `signal` aborts when the lock is lost or the daemon stops. */
  async #renewHolding(profile: DaemonProfile, signal: AbortSignal): Promise<{ renewal: RenewalOutcome; adopted?: boolean }> {
    const rt = this.#rt;
    const { store, config, rateGate, clock } = this.#ctx;
    // Another process may have renewed while this one waited for the lock.
    const state = await this.#readState();
    if (state?.accessTokenExpiresAt) rt.learnExpiry(Date.parse(state.accessTokenExpiresAt), this.#drawJitter());
    if (!rt.renewalDue(this.#now(), config.marginMs, config.needsOwnToken)) {
      rt.backoff = Backoff.none;
      return { renewal: this.#settle('fresh') };
    }
    if (profile.readGrant && state?.secretsVersion !== rt.secretsVersion) {
      rt.grant = await profile.readGrant();
      rt.secretsVersion = state?.secretsVersion;
    }
    const grant = rt.grant as NonNullable<typeof rt.grant>;
    if (config.needsOwnToken && (await this.#adoptKept(profile, grant))) {
      rt.backoff = Backoff.none;
      return { renewal: this.#settle('fresh'), adopted: true };
    }
    if (rateGate) await rateGate.wait(signal);
    const sentMono = clock.mono();
    const tokens = await renewHoldingLock({
      profiles: store,
      name: rt.name,
      app: { appKey: grant.appKey, appSecret: grant.appSecret },
      refreshToken: grant.refreshToken,
      tokenUrl: profile.tokenUrl,
      now: clock.wall,
      signal,
      timeoutMs: config.tokenTimeoutMs,
      onNewRefreshToken: (refreshToken) => this.#keepRefreshToken(profile, refreshToken),
      ...(profile.storeAccessToken ? { onNewAccessToken: (fresh: TokenSet) => this.#shareAccessToken(profile, fresh, grant) } : {}),
    });
    this.#settle('renewed');
    await this.#renewed(tokens, sentMono);
    return { renewal: 'renewed' as const };
  }

  /**
   * This process publishes its token and its own is due, while the state says another process renewed: the
   * token that process kept in the secret store is taken, published and held as this one's, when it belongs
   * to the grant held and has more than the margin (and the largest jitter) left. Returns whether it was; if
   * not (the env store keeps none, the store is out of reach, the kept token is as old), this process renews.
   */
  async #adoptKept(profile: DaemonProfile, grant: DaemonGrant): Promise<boolean> {
    const rt = this.#rt;
    const { config, clock, log } = this.#ctx;
    const enough = config.marginMs + config.jitterMs;
    const at = this.#now();
    const known = rt.expiry(at);
    if (!profile.readAccessToken || known === undefined || known - at <= enough) return false;
    let kept: Awaited<ReturnType<NonNullable<DaemonProfile['readAccessToken']>>>;
    try {
      kept = await profile.readAccessToken(grant);
    } catch (error) {
      log.warn({ profile: rt.name, event: 'token.unread', op: 'renew', error: classifyFailure(error).message }, `could not read the access token of profile "${rt.name}" another process kept; renewing instead`);
      return false;
    }
    const now = this.#now();
    const left = kept ? remainingMs(kept, now) : 0;
    if (!kept || left <= enough || kept.accessToken === rt.token?.value) return false;
    this.#holdToken({ value: kept.accessToken, expiresAt: kept.expiresAt, monoExpiresAt: clock.mono() + left });
    // Published before anything else awaits, as after a renewal of its own.
    await this.#ctx.files.publish(rt);
    log.info(
      { profile: rt.name, event: 'token.shared', op: 'renew', expiresAt: new Date(kept.expiresAt).toISOString() },
      `took the access token of profile "${rt.name}" another process renewed, instead of renewing again`,
    );
    return true;
  }

  async #keepRefreshToken(profile: DaemonProfile, refreshToken: string): Promise<void> {
    const rt = this.#rt;
    // In memory first: whatever happens to the store, this process keeps the grant alive.
    if (rt.grant) rt.grant = { ...rt.grant, refreshToken };
    if (profile.storeRefreshToken) {
      try {
        await profile.storeRefreshToken(refreshToken);
      } catch (error) {
        // Not used before it is stored: the renewal counts as failed and is retried (with the token in memory),
        // storing again each time, however the store classifies its own failure.
        throw new SyncauthError('REFRESH_TOKEN_NOT_STORED', `Dropbox rotated the refresh token of profile "${rt.name}" and storing the new one failed: ${classifyFailure(error).message}`, {
          cause: error,
        });
      }
      this.#ctx.log.info({ profile: rt.name, event: 'grant.rotated', op: 'renew' }, `Dropbox rotated the refresh token of profile "${rt.name}"; the new one is stored`);
    } else {
      this.#ctx.log.warn(
        { profile: rt.name, event: 'grant.rotated', op: 'renew', stored: false },
        `Dropbox rotated the refresh token of profile "${rt.name}", and its secrets are read-only here: the new one is kept in memory only. ` +
          `Store it where the grant comes from (run \`${reauthorizeCommand(rt.name)}\`) before this process stops.`,
      );
    }
  }

  /** A failure to share the token with other processes costs them a renewal of their own, not this one. */
  async #shareAccessToken(profile: DaemonProfile, tokens: TokenSet, grant: DaemonGrant): Promise<void> {
    try {
      await profile.storeAccessToken?.(tokens, grant);
    } catch (error) {
      this.#ctx.log.warn({ profile: this.#rt.name, event: 'token.unshared', op: 'renew', error: classifyFailure(error).message }, `could not keep the access token of profile "${this.#rt.name}" in its secret store; other commands will renew their own`);
    }
  }

  /** Holds and publishes the fresh token and records the renewal; the reconcile comes after the lock is released. */
  async #renewed(tokens: TokenSet, sentMono: number): Promise<void> {
    const rt = this.#rt;
    this.#holdToken({ value: tokens.accessToken, expiresAt: tokens.expiresAt, monoExpiresAt: sentMono + tokens.expiresIn * 1000 });
    // Published before anything else awaits: holding the token makes the profile ready, and /readyz must never
    // say ready while the file consumers read still holds the old token or none.
    await this.#ctx.files.publish(rt);
    rt.backoff = Backoff.none;
    rt.lastSuccessAt = this.#now();
    this.#ctx.metrics.success(rt.name, rt.lastSuccessAt);
    try {
      // Storing a rotated refresh token bumps the stored secretsVersion; that change is ours, not news.
      rt.secretsVersion = (await this.#readState())?.secretsVersion ?? rt.secretsVersion;
    } catch {
      // The next sweep's read reports a broken state file.
    }
    this.#ctx.log.info({ profile: rt.name, event: 'renewal.succeeded', op: 'renew', expiresAt: new Date(tokens.expiresAt).toISOString() }, `renewed the access token of profile "${rt.name}"`);
  }

  async #renewalFailed(profile: DaemonProfile, error: unknown): Promise<RenewalOutcome> {
    const rt = this.#rt;
    const { config, random, log } = this.#ctx;
    const failure = classifyFailure(error);
    if (failure.kind === 'terminal' || failure.kind === 'configuration') {
      // Another process may have stored a new grant since this one was read: try it before giving up.
      if (isOAuthError(error, 'OAUTH_INVALID_GRANT') && profile.readGrant) {
        try {
          const stored = await profile.readGrant();
          if (rt.grantDiffers(stored)) {
            rt.grant = stored;
            rt.backoff = rt.backoff.waitUntil(0);
            log.info({ profile: rt.name, event: 'grant.changed', op: 'renew' }, `profile "${rt.name}": the stored grant changed; trying it`);
            return this.#settle('failed');
          }
        } catch {
          // Parked below; new secrets un-park it.
        }
      }
      let secretsVersion = rt.secretsVersion;
      try {
        secretsVersion = (await this.#readState())?.secretsVersion;
      } catch {
        // Keep the version the grant was read under.
      }
      const reason: ParkReason = failure.kind === 'terminal' ? 'reauthorization_needed' : 'configuration_error';
      // A state file that does not parse is fixed by hand, not by new secrets.
      this.#park(reason, failure, isProfileStoreError(error, 'PROFILE_CORRUPT') ? 'readable' : 'secrets', secretsVersion);
      return this.#settle(reason);
    }
    const wait = this.#boundedByExpiry(rt.backoff.nextDelay(config.backoff, random, failure.retryAfterMs), failure.retryAfterMs);
    rt.backoff = rt.backoff.failed(this.#ctx.clock.mono(), wait);
    log.warn(
      { profile: rt.name, event: 'renewal.failed', op: 'renew', errorCode: failure.code, attempt: rt.backoff.failures, retryInMs: wait },
      `could not renew the access token of profile "${rt.name}": ${failure.message}; trying again in ${Math.ceil(wait / 1000)} s`,
    );
    return this.#settle(failure.kind === 'rate_limited' ? 'rate_limited' : 'failed');
  }

  /**
   * A Retry-After is honoured, but never past the token's expiry less a safety window: a token that dies
   * waiting politely is worse than one more request the server asked us not to send yet.
   */
  #boundedByExpiry(waitMs: number, retryAfterMs: number | undefined): number {
    const rt = this.#rt;
    const { config } = this.#ctx;
    const at = this.#now();
    const expiry = rt.expiry(at);
    if (retryAfterMs === undefined || expiry === undefined) return waitMs;
    const latest = Math.max(config.backoff.baseMs, expiry - config.safetyMs - at);
    if (waitMs <= latest) return waitMs;
    this.#ctx.log.warn(
      { profile: rt.name, event: 'renewal.retry_after_capped', op: 'renew', retryAfterMs, retryInMs: latest },
      `the token endpoint asked to wait ${Math.ceil(retryAfterMs / 1000)} s, past the expiry of the access token of profile "${rt.name}"; trying again in ${Math.ceil(latest / 1000)} s instead`,
    );
    return latest;
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
        profiles: store,
        profile: rt.name,
      });
      rt.connectorId = result.connector.id;
      rt.reconcile = { pending: false, backoff: Backoff.none, lastOutcome: result.action };
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
    const due = (record: SharedReconcile | undefined): boolean => !record || record.expiresAt - this.#now() <= config.marginMs + config.jitterMs;
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
