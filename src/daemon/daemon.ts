// The daemon as a whole: it owns the workers (one per profile), the sweep that visits them, the schedule, the
// health server and the token socket, and a list of what to close. It knows nothing of renewals; the workers
// do. Closing undoes the start in reverse order, each step in its own try, so one failure never leaks the rest.
import { setTimeout as delay } from 'node:timers/promises';
import { createLogger, type Logger } from '../log.js';
import { tokenFileFor } from '../publish/place.js';
import { TokenPublisher } from '../publish/publisher.js';
import { SocketSink } from '../publish/sink.js';
import { TemplateRenderer } from '../publish/template.js';
import { checkTokenFileTemplate, sameProfileSinks, type ProfileSinks } from '../publish/token-file.js';
import { classifyFailure } from './classify.js';
import { noticeWithinMs, resolveDaemonConfig, type DaemonConfig } from './config.js';
import { TokenChecks } from './token-check.js';
import { scheduleSweeps, type ClockJump, type SweepSchedule } from './cron.js';
import { eachBounded, RateGate, Semaphore } from '../limiter.js';
import { renewalLock, replicaLease, SingleFlight } from './exclusion.js';
import { DaemonMetrics } from './metrics.js';
import type { DaemonClock } from './runtime.js';
import { startHealthServer } from './server.js';
import type { ReauthorizationResult, ReauthorizedGrant } from './events.js';
import type { DaemonOptions, DaemonStatus, ProfileEntry, RunningDaemon, SweepEntry, SweepOptions, SweepReport } from './types.js';
import { GrantSharing } from './grant-sharing.js';
import { DEFAULT_FLEET_FALLBACK_MS, DEFAULT_FLEET_TOKEN_REQUESTS_PER_SECOND, Fleet } from './fleet.js';
import { AccountPauses } from './account-pause.js';
import { CallBudgets } from './call-budget.js';
import { registerSlotSecret } from '../redact.js';
import { refreshTokenSlot } from '../sync/profile-session.js';
import { FamilyListings } from '../sync/family-listing.js';
import { ProfileWorker } from './worker.js';
import type { WorkerContext } from './worker-context.js';

/** How many daemons of this process serve each profile (hold its worker): a redaction is released at none. */
const servedInProcess = new Map<string, number>();

/** A daemon's workers by profile, counted in `servedInProcess` while the daemon runs. */
class Workers extends Map<string, ProfileWorker> {
  #counted = true;

  override set(name: string, worker: ProfileWorker): this {
    if (this.#counted && !this.has(name)) servedInProcess.set(name, (servedInProcess.get(name) ?? 0) + 1);
    return super.set(name, worker);
  }

  override delete(name: string): boolean {
    if (this.#counted && this.has(name)) uncount(name);
    return super.delete(name);
  }

  /** The daemon stopped: its workers no longer count (they stay listed for a last status). */
  uncountAll(): void {
    if (!this.#counted) return;
    this.#counted = false;
    for (const name of this.keys()) uncount(name);
  }
}

function uncount(name: string): void {
  const left = (servedInProcess.get(name) ?? 1) - 1;
  if (left > 0) servedInProcess.set(name, left);
  else servedInProcess.delete(name);
}

/**
 * Beyond the shutdown timeout, what closing the rest may take in all: a part that takes longer (a coordinator
 * that does not answer, a file on a mount that hangs) is left behind and logged, so a stop always ends.
 */
const CLOSE_GRACE_MS = 2_000;
/** How long the service's connection check after a re-authorization may take before the page says so. */
const REAUTH_CHECK_TIMEOUT_MS = 60_000;
/** However late, each part gets this long to close. */
const CLOSE_MIN_MS = 250;

interface Closer {
  what: string;
  close(): Promise<void>;
}

export class Daemon implements RunningDaemon {
  readonly #options: DaemonOptions;
  readonly #config: DaemonConfig;
  readonly #log: Logger;
  readonly #clock: DaemonClock;
  readonly #workers = new Workers();
  readonly #shutdown = new AbortController();
  readonly #metrics: DaemonMetrics;
  readonly #ctx: WorkerContext;
  /** What start() opened, in order; close() closes it in reverse. */
  readonly #closers: Closer[] = [];
  /** Stopped before the rest: no sweep may start while work in flight settles. */
  #schedule: SweepSchedule | undefined;
  #url: string | undefined;
  #closing: Promise<void> | undefined;
  /** Renders templates (the daemon-wide ones and profiles' own) off the renewal path; stopped at close, a render under way abandoned. */
  readonly #renderer: TemplateRenderer;
  readonly #files: TokenPublisher;
  /** Where consumers ask for a token: it answers from each profile's token held now, once opened at start. */
  readonly #socket: SocketSink | undefined;
  #coordinatorDownSince: number | undefined;
  /** When each profile's published token is checked with Dropbox. */
  readonly #checks: TokenChecks;
  /** Sweeps visiting now: checks wait for them (renewals first). */
  #sweeping = 0;
  /** The look at the published files under way for /readyz, and the one waiting for it to end. */
  #publishedCheck: Promise<void> | undefined;
  #publishedCheckNext: Promise<void> | undefined;
  /** The profiles have been started: the socket, open before them, answers for them from now on. */
  #started = false;
  /**
   * Every profile configured, served here or not (fleet mode serves only this replica's share of the shared
   * ones). A shared profile another replica serves is held as its name alone (undefined) when the daemon can load
   * a profile by itself (`loadProfile`): loaded again when taken, its grant is not kept on this replica's heap.
   */
  #entries = new Map<string, ProfileEntry | undefined>();
  /** Fleet mode's membership and shares; undefined without a fleet. */
  readonly #fleet: Fleet | undefined;
  #fleetSync: Promise<void> | undefined;
  /** The fleet's cap on token requests a second, shared by its live members; undefined without a fleet. */
  readonly #fleetRate: number | undefined;
  /** Profiles this replica serves for the while of a re-authorization completed here, though another owns them. */
  readonly #visiting = new Set<string>();
  /** The fleet's generation the workers were last matched to; undefined after a reload. */
  #matched: string | undefined;

  /** Checks every option; nothing is started until `start()`. */
  constructor(options: DaemonOptions) {
    this.#options = options;
    this.#config = resolveDaemonConfig(options);
    this.#log = options.logger ?? createLogger();
    const now = options.now ?? Date.now;
    // A test that moves the wall clock by hand moves this one with it, unless it gives both.
    const mono = options.monotonicNow ?? options.now ?? (() => performance.now());
    this.#clock = { wall: now, mono };
    const sleep = options.sleep ?? ((ms: number, signal?: AbortSignal) => delay(ms, undefined, signal ? { signal } : {}));
    const templates = options.templates ?? [];
    this.#renderer = new TemplateRenderer(templates, this.#log, options.sinkLocks);
    const socket = options.socket;
    this.#socket = socket
      ? new SocketSink(socket.path, '--socket', { ...(socket.mode !== undefined ? { mode: socket.mode } : {}), ...(socket.gid !== undefined ? { gid: socket.gid } : {}) }, {
          profiles: () => [...this.#workers.keys()],
          token: (name) => this.#workers.get(name)?.liveToken(this.#clock.wall()),
          starting: () => !this.#started,
        })
      : undefined;
    // Each profile's sinks, built from the options: the token file (or its own), the templates (and its own), the socket.
    const files = new TokenPublisher({
      template: options.tokenFile,
      ...(options.tokenFileAccess ? { access: options.tokenFileAccess } : {}),
      templates: this.#renderer,
      ...(this.#socket ? { socket: this.#socket } : {}),
      accountId: (name: string, accessToken: string) => this.#workers.get(name)?.accountId(accessToken) ?? Promise.resolve(undefined),
      ...(options.profileSinks ? { profileSinks: options.profileSinks } : {}),
      ...(options.sinkLocks ? { locks: options.sinkLocks } : {}),
      now,
      log: this.#log,
    });
    this.#files = files;
    this.#metrics = new DaemonMetrics({
      now,
      marginMs: this.#config.marginMs,
      ...(options.coordinator ? { coordinatorUp: () => (options.coordinator as NonNullable<typeof options.coordinator>).isAvailable() } : {}),
      fleet: () => (this.#fleet ? this.#fleetView() : undefined),
      budget: () => ({ cap: this.#ctx.rateGate?.stats, pauses: this.#ctx.pauses.stats(), paused: (account) => this.#ctx.pauses.pausedHere(account) !== undefined }),
      profiles: () => {
        const at = now();
        return [...this.#workers.values()].map((worker) => ({ name: worker.name, ...worker.health(at) }));
      },
    });
    this.#checks = new TokenChecks({
      intervalMs: this.#config.checks.intervalMs,
      perSecond: this.#config.checks.perSecond,
      now,
      coordinator: options.coordinator,
      log: this.#log,
      profiles: () => this.#workers.values(),
      busy: () => this.#sweeping > 0,
    });
    this.#fleet = fleetOf(options, this.#config.marginMs, this.#log, () => this.#fleetChanged());
    const fleet = this.#fleet;
    // A fleet's cap is the fleet's: each live replica takes its part, set anew when the members change.
    const rate = fleet ? (this.#config.maxRenewalsPerSecond ?? DEFAULT_FLEET_TOKEN_REQUESTS_PER_SECOND) : this.#config.maxRenewalsPerSecond;
    this.#fleetRate = fleet ? rate : undefined;
    this.#ctx = Object.freeze({
      config: this.#config,
      clock: this.#clock,
      log: this.#log,
      store: options.profileStore,
      locks: Object.freeze({
        flight: new SingleFlight(),
        renewal: renewalLock(options.profileStore, this.#config.lockWaitMs),
        replicas: options.coordinator ? replicaLease(options.coordinator) : undefined,
      }),
      coordinator: options.coordinator,
      files,
      metrics: this.#metrics,
      limiter: new Semaphore(this.#config.concurrency),
      reconcileLimiter: new Semaphore(this.#config.concurrency),
      families: new FamilyListings({ now: mono }),
      rateGate: rate === undefined ? undefined : new RateGate(rate, now, sleep),
      shutdown: this.#shutdown.signal,
      random: options.random ?? Math.random,
      loadProfile: options.loadProfile,
      templates,
      serviceClient: options.serviceClient,
      dropboxApiDispatcher: options.dropboxApiDispatcher,
      notices: options.notices,
      grants: GrantSharing.of(options.coordinator, options.grantKey, this.#log),
      onReauthorized: options.onReauthorized,
      pauses: new AccountPauses({ backend: options.coordinator?.pauses, now, log: this.#log }),
      budgets: new CallBudgets({ backend: options.coordinator?.budgets, now, marginMs: this.#config.marginMs, log: this.#log }),
      fleet: fleet
        ? {
            confirm: (name: string) => (this.#shared(name) && !this.#visiting.has(name) ? fleet.confirm(name) : Promise.resolve(true)),
            servesForFallback: (name: string) => this.#shared(name) && fleet.servesForFallback(name),
            shares: (name: string) => this.#shared(name),
          }
        : undefined,
      coordinatorHealth: { down: (error: unknown) => this.#coordinatorDown(error), up: () => this.#coordinatorUp() },
    });
  }

  get url(): string | undefined {
    return this.#url;
  }

  get registry(): DaemonMetrics['registry'] {
    return this.#metrics.registry;
  }

  /**
   * Opens the server and the socket, then loads the profiles (adopting or publishing their tokens), then
   * schedules the sweeps. What can refuse (a port or socket in use) is opened first: a start that fails has
   * published, adopted and rendered nothing.
   */
  async start(): Promise<this> {
    const options = this.#options;
    const renderer = this.#renderer;
    try {
      if (options.listen) {
        const server = await startHealthServer(options.listen, { status: () => this.status(), checkPublished: () => this.#checkPublished(), registry: () => this.#metrics.registry });
        this.#url = server.url;
        this.#closers.push({ what: 'health server', close: () => server.close() });
      }
      const socket = this.#socket;
      if (socket) {
        await socket.open({ log: this.#log, now: this.#clock.wall });
        this.#closers.push({ what: 'token socket', close: () => socket.close() });
      }
      this.#closers.push({ what: 'profiles', close: () => this.#disposeWorkers() });
      const files = this.#files;
      this.#closers.push({
        what: 'templates',
        close: async () => {
          renderer.stop();
          await files.close();
        },
      });
      const initial = await this.#loadEntries();
      this.#checkTemplate(initial);
      const fleet = this.#fleet;
      if (fleet) {
        // Joined before any profile starts, so the first share is computed from the members already there.
        await fleet.start();
        this.#shareRate();
        this.#closers.push({ what: 'fleet membership', close: () => fleet.close() });
      }
      for (const entry of initial) {
        if (this.#entries.has(entry.name)) continue;
        this.#entries.set(entry.name, entry);
        if (!this.#serves(entry.name)) {
          this.#letGo(entry.name);
          continue;
        }
        this.#workers.set(entry.name, await ProfileWorker.start(entry, this.#ctx));
      }
      if (fleet) {
        this.#matched = fleet.generation;
        this.#logShare();
      }
      this.#started = true;
    } catch (error) {
      // Nothing half started stays behind: what this start opened is closed. The coordinator was the caller's
      // to open, and stays the caller's to close.
      await this.#closeAll();
      throw error;
    }
    // Closed last, once everything that uses it is.
    if (options.coordinator) {
      const coordinator = options.coordinator;
      this.#closers.unshift({ what: 'coordinator', close: () => coordinator.close() });
    }
    const schedule = this.#config.schedule;
    if (schedule !== false) {
      this.#schedule = scheduleSweeps(schedule, () => this.sweep(), this.#log, { clock: this.#clock, onJump: (jump) => this.#clockJumped(jump) });
      // Reconciles held while the coordinator was down go ahead as soon as it is back, not at the next sweep
      // (up to a minute later, by which time the connector's token may have expired).
      const stop = options.coordinator?.onAvailable?.(() => {
        if (!this.#schedule) return;
        let held = false;
        for (const worker of this.#workers.values()) if (worker.coordinatorBack()) held = true;
        if (!held) return;
        void this.sweep().catch((error: unknown) => this.#log.error({ event: 'sweep.failed', op: 'sweep', err: error }, 'the sweep after the coordinator came back failed'));
      });
      if (stop) this.#closers.push({ what: 'coordinator listener', close: async () => void stop() });
    }
    const tickMs = options.checkTickMs ?? (schedule === false ? false : Math.min(1_000, Math.max(50, this.#config.checks.intervalMs / 4)));
    if (this.#checks.on && tickMs !== false) {
      const timer = setInterval(() => {
        void this.checkTick().catch((error: unknown) => this.#log.error({ event: 'check.failed', op: 'check', err: error }, 'the token checks failed'));
      }, tickMs);
      timer.unref();
      this.#closers.push({ what: 'token checks', close: async () => clearInterval(timer) });
    }
    if (this.#config.sweepOnStart) {
      void this.sweep().catch((error: unknown) => this.#log.error({ event: 'sweep.failed', op: 'sweep', err: error }, 'the first sweep failed'));
    }
    return this;
  }

  /** Expired tokens leave the file before anything else happens, even for a profile whose renewal is running. */
  async sweep(options: SweepOptions = {}): Promise<SweepReport> {
    const at = this.#clock.wall();
    if (this.#closing) return { at: new Date(at).toISOString(), profiles: [] };
    this.#metrics.swept(at);
    this.#sweeping += 1;
    try {
      return await this.#sweepAt(at, options.onlyDue === true);
    } finally {
      this.#sweeping -= 1;
    }
  }

  /**
   * For a caller that drives the daemon itself (`schedule: false`; a fleet with `timers: false`, as the soak
   * runs it): the earliest wall-clock time at which a sweep may have work to do, from this process's own state
   * (a renewal, a token's expiry, a reconcile or its retry, the fleet's share to match again; see due.ts). What
   * other processes write to the profile store is seen only by a sweep.
   */
  nextDueAt(): number {
    const at = this.#clock.wall();
    if (this.#closing || (this.#fleet && this.#fleet.generation !== this.#matched)) return at;
    let next = Infinity;
    for (const worker of this.#workers.values()) {
      next = Math.min(next, worker.nextDueAt(at));
      if (next <= at) return at;
    }
    return next;
  }

  /** A fleet with `timers: false`: the heartbeat and look at the members a sweep begins with, without the visits. */
  async heartbeat(): Promise<void> {
    if (this.#closing) return;
    await this.#fleet?.tick();
  }

  async checkTick(): Promise<void> {
    if (this.#closing) return;
    await this.#checks.tick();
  }

  async #sweepAt(at: number, onlyDue: boolean): Promise<SweepReport> {
    if (this.#fleet) {
      await this.#fleet.tick();
      await this.#matchShare();
    }
    const workers = [...this.#workers.values()];
    const width = this.#config.concurrency;
    await eachBounded(workers, width, (worker) => worker.expire(at));
    // A few profiles visited at a time (as many as renew at once), each in order: ten thousand visits started
    // together held ten thousand waits for a renewal slot on the heap. A visit's reconcile runs on under its
    // own bound while the next profile is visited; the report waits for it.
    const entries: SweepEntry[] = new Array<SweepEntry>(workers.length);
    const reconciles: Promise<void>[] = [];
    await eachBounded(workers, width, async (worker, i) => {
      // Not visited before its time (due.ts): reported as the visit would have found it.
      if (onlyDue && worker.nextDueAt(at) > at) {
        entries[i] = { profile: worker.name, action: 'idle' };
        return;
      }
      const { entry, reconcile } = await worker.visitOwn();
      entries[i] = entry;
      if (reconcile) reconciles.push(reconcile.then((outcome) => void (entries[i] = { ...entry, reconcile: outcome })));
    });
    await Promise.all(reconciles);
    return { at: new Date(at).toISOString(), profiles: entries };
  }

  rendersSettled(): Promise<void> {
    return this.#ctx.files.rendersSettled();
  }

  status(): DaemonStatus {
    const at = this.#clock.wall();
    const profiles = [...this.#workers.values()].map((worker) => worker.view(at));
    const coordinator = this.#options.coordinator;
    const checks = this.#config.checks;
    const within = noticeWithinMs(checks, profiles.length);
    const fleet = this.#fleet;
    return {
      // Without the coordinator only reconciles wait: every consumer here still gets a fresh token. A fleet
      // replica may serve none of the shared profiles (more replicas than profiles) and still be ready.
      ready: (profiles.length > 0 || (fleet !== undefined && this.#entries.size > 0)) && profiles.every((p) => p.ready),
      ...(within !== undefined ? { checks: { intervalSeconds: checks.intervalMs / 1000, maxPerSecond: checks.perSecond, noticeWithinSeconds: Math.ceil(within / 1000) } } : {}),
      ...(coordinator ? { coordinator: { available: coordinator.isAvailable() } } : {}),
      ...(fleet ? { fleet: this.#fleetView() } : {}),
      profiles,
    };
  }

  async reauthorized(profile: string, grant: ReauthorizedGrant): Promise<ReauthorizationResult> {
    const worker = this.#workers.get(profile);
    if (this.#closing) return { stored: false, error: 'the daemon is stopping' };
    if (!worker && !(this.#fleet && this.#entries.has(profile))) return { stored: false, error: `the daemon does not serve profile "${profile}"` };
    try {
      if (worker) return await worker.reauthorized(grant, REAUTH_CHECK_TIMEOUT_MS);
      // A fleet's page may be reached on any replica: one that does not own the profile completes the loop with
      // a worker of its own for the while (it renews with the grant, gives the connector the token and runs the
      // service's check, so the person sees the loop closed), and shares the grant, sealed, which the owner takes.
      if (this.#visiting.has(profile)) return { stored: false, error: `a re-authorization of profile "${profile}" is being completed here already` };
      this.#visiting.add(profile);
      const visiting = await this.#entryOf(profile)
        .then((entry) => ProfileWorker.start(entry, this.#ctx))
        .catch((error: unknown) => {
          this.#visiting.delete(profile);
          throw error;
        });
      try {
        return await visiting.reauthorized(grant, REAUTH_CHECK_TIMEOUT_MS);
      } finally {
        this.#visiting.delete(profile);
        await visiting.dispose({ keepPublished: false });
        if (!this.#workers.has(profile)) this.#letGo(profile);
      }
    } catch (error) {
      return { stored: false, error: classifyFailure(error).message };
    }
  }

  async reload(options: { profileSinks?: ReadonlyMap<string, ProfileSinks> } = {}): Promise<void> {
    if (this.#closing) return;
    let entries: readonly ProfileEntry[];
    const sinks = options.profileSinks;
    try {
      entries = await this.#loadEntries();
      this.#checkTemplate(entries, sinks);
    } catch (error) {
      const failure = classifyFailure(error);
      this.#log.error({ event: 'daemon.reload_failed', op: 'load', errorCode: failure.code }, `could not reload the profiles: ${failure.message}; keeping the current ones`);
      return;
    }
    const wanted = new Map(entries.map((e) => [e.name, e]));
    this.#entries = wanted;
    this.#matched = undefined;
    const left: string[] = [];
    for (const worker of [...this.#workers.values()]) {
      // A profile whose own sinks change starts again on the new ones: its token file at the old place goes.
      const moved = sinks !== undefined && !sameProfileSinks(this.#files.sinksOf(worker.name), sinks.get(worker.name));
      if (wanted.has(worker.name) && !moved && this.#serves(worker.name, sinks)) continue;
      this.#workers.delete(worker.name);
      await worker.dispose({ keepPublished: false });
      left.push(...this.#sinkPaths(worker.name));
    }
    if (sinks) this.#files.setProfileSinks(sinks);
    // The sinks no profile served now writes are given back to whoever asks for them next.
    const still = new Set([...wanted.keys()].flatMap((name) => this.#sinkPaths(name)));
    await this.#options.sinkLocks?.release(left.filter((file) => !still.has(file)));
    for (const entry of wanted.values()) {
      const worker = this.#workers.get(entry.name);
      if (worker) await worker.apply(entry);
      else if (this.#serves(entry.name)) this.#workers.set(entry.name, await ProfileWorker.start(entry, this.#ctx));
      else this.#letGo(entry.name);
    }
    this.#log.info({ event: 'daemon.reloaded', op: 'load', profiles: [...this.#workers.keys()] }, 'profiles reloaded');
  }

  /** Stops the schedule, lets work in flight finish (or cancels it after the shutdown timeout), then closes the rest. */
  close(): Promise<void> {
    this.#closing ??= this.#closeAll();
    return this.#closing;
  }

  // ---- inside ----

  /** Whether the profile is shared in the fleet: this replica publishes its token nowhere. */
  #shared(name: string, sinks?: ReadonlyMap<string, ProfileSinks>): boolean {
    if (this.#fleet === undefined || this.#files.servesEveryProfile) return false;
    const own = sinks ? sinks.get(name) : this.#files.sinksOf(name);
    return own === undefined || (own.tokenFile === undefined && (own.templates?.length ?? 0) === 0);
  }

  /**
   * Whether this replica serves the profile: always when it publishes it here (with `sinks`, the own sinks a
   * reload is about to set), else when the fleet gives it this replica.
   */
  #serves(name: string, sinks?: ReadonlyMap<string, ProfileSinks>): boolean {
    return !this.#shared(name, sinks) || (this.#fleet as Fleet).owns(name);
  }

  /**
   * This replica's part of the fleet's cap on token requests: the cap over the live members it sees, and while
   * Redis is away over those it last saw (so the fleet holds the cap in mode `all` too); a replica that has never
   * seen them takes the whole cap, as it may be alone (docs/daemon.md, Fleets).
   */
  #shareRate(): void {
    const fleet = this.#fleet;
    if (!fleet || this.#fleetRate === undefined) return;
    this.#ctx.rateGate?.setRate(this.#fleetRate / fleet.members.length);
  }

  #fleetChanged(): void {
    this.#shareRate();
    if (!this.#started || this.#closing || !this.#schedule) return;
    // A member gone or joined: its profiles are taken (or given) now, not at the next sweep.
    void this.sweep().catch((error: unknown) => this.#log.error({ event: 'sweep.failed', op: 'sweep', err: error }, 'the sweep after the fleet changed failed'));
  }

  /**
   * The workers matched to this replica's share: a shared profile it now owns is started (it renews at once:
   * no access token crosses Redis), one it no longer owns is stopped, and its runtime state dropped.
   */
  #matchShare(): Promise<void> {
    if (this.#fleetSync) return this.#fleetSync;
    const running = this.#matchShareNow().finally(() => {
      if (this.#fleetSync === running) this.#fleetSync = undefined;
    });
    this.#fleetSync = running;
    return running;
  }

  async #matchShareNow(): Promise<void> {
    // Once per change of the members or the mode (or a reload): a sweep with nothing changed hashes nothing.
    const generation = (this.#fleet as Fleet).generation;
    if (generation === this.#matched) return;
    this.#matched = generation;
    const taken: string[] = [];
    const given: ProfileWorker[] = [];
    for (const name of this.#entries.keys()) {
      const worker = this.#workers.get(name);
      const serves = this.#serves(name);
      if (serves && !worker) taken.push(name);
      else if (!serves && worker) given.push(worker);
    }
    if (taken.length === 0 && given.length === 0) return;
    for (const worker of given) this.#workers.delete(worker.name);
    await eachBounded(given, this.#config.concurrency, async (worker) => {
      await worker.dispose({ keepPublished: false });
      if (!this.#workers.has(worker.name)) this.#letGo(worker.name);
    });
    const entries = this.#entries;
    await eachBounded(taken, this.#config.concurrency, async (name) => {
      if (this.#closing || this.#workers.has(name) || this.#entries !== entries || !entries.has(name)) return;
      const entry = await this.#entryOf(name);
      // A reload while it loaded has the say.
      if (this.#closing || this.#workers.has(name) || this.#entries !== entries) return;
      this.#workers.set(name, await ProfileWorker.start(entry, this.#ctx));
    });
    this.#log.info(
      { event: 'fleet.share_changed', op: 'coordinate', taken: taken.length, given: given.length, served: this.#workers.size },
      `this replica took ${taken.length} shared profile${taken.length === 1 ? '' : 's'} and handed over ${given.length}; it serves ${this.#workers.size} now`,
    );
  }

  /**
   * A shared profile this replica does not serve is held as its name alone, when the daemon can load it again
   * by itself: its grant leaves the heap, and the redaction of its refresh token (registered by the load, in the
   * profile's slot) with it. A replica holds the grants of its share, not of the fleet's.
   */
  #letGo(name: string): void {
    if (!this.#fleet || !this.#options.loadProfile || !this.#shared(name) || this.#visiting.has(name)) return;
    if (this.#entries.get(name) === undefined) return;
    this.#entries.set(name, undefined);
    this.#options.profileStore.forget?.(name);
    // Another daemon of this process (several in one program, or a test) may serve it: its redaction stays then.
    if (!servedInProcess.has(name)) registerSlotSecret(refreshTokenSlot(name), undefined);
  }

  /** The profile's entry: as held, or loaded again (a profile this replica let go and now takes). */
  async #entryOf(name: string): Promise<ProfileEntry> {
    const held = this.#entries.get(name);
    if (held) return held;
    const load = this.#options.loadProfile as NonNullable<DaemonOptions['loadProfile']>;
    return load(name).catch((error: unknown) => ({ name, error: error instanceof Error ? error : new Error(String(error)) }));
  }

  #fleetView(): NonNullable<DaemonStatus['fleet']> {
    const fleet = this.#fleet as Fleet;
    let shared = 0;
    let served = 0;
    for (const name of this.#entries.keys()) {
      if (!this.#shared(name)) continue;
      shared += 1;
      if (this.#workers.has(name)) served += 1;
    }
    return { replica: fleet.replicaId, members: fleet.members.length, mode: fleet.mode, served, shared };
  }

  #logShare(): void {
    const view = this.#fleetView();
    this.#log.info(
      { event: 'fleet.joined', op: 'start', replica: view.replica, members: view.members, served: view.served, shared: view.shared },
      `joined a fleet of ${view.members} replica${view.members === 1 ? '' : 's'}: this one serves ${view.served} of the ${view.shared} shared profiles, and every profile it publishes here`,
    );
  }

  async #closeAll(): Promise<void> {
    const deadline = performance.now() + this.#config.shutdownTimeoutMs + CLOSE_GRACE_MS;
    const left = (): number => Math.max(CLOSE_MIN_MS, deadline - performance.now());
    // The schedule first, then the work in flight, then the rest in reverse order of opening.
    const schedule = this.#schedule;
    this.#schedule = undefined;
    if (schedule) await this.#closeOne({ what: 'schedule', close: () => schedule.stop() }, left());
    await this.#settleWork();
    while (this.#closers.length > 0) await this.#closeOne(this.#closers.pop(), left());
  }

  async #closeOne(closer: Closer | undefined, withinMs: number): Promise<void> {
    if (!closer) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), withinMs);
      });
      if ((await Promise.race([closer.close(), late])) === 'late') {
        this.#log.warn({ event: 'daemon.close_failed', op: 'stop', part: closer.what }, `the ${closer.what} did not close within ${(withinMs / 1000).toFixed(1)} s; leaving it`);
      }
    } catch (error) {
      this.#log.warn({ event: 'daemon.close_failed', op: 'stop', part: closer.what, error: (error as Error).message }, `could not close the ${closer.what} cleanly`);
    } finally {
      clearTimeout(timer);
    }
  }

  async #settleWork(): Promise<void> {
    const pending = [...this.#workers.values()].flatMap((worker) => (worker.inFlight ? [worker.inFlight] : []));
    if (pending.length === 0) return;
    const timeoutMs = this.#config.shutdownTimeoutMs;
    if (await settleWithin(pending, timeoutMs)) return;
    this.#log.warn({ event: 'daemon.cancelled_work', op: 'stop' }, `in-flight work did not finish within ${Math.round(timeoutMs / 1000)} s; cancelling it`);
    this.#shutdown.abort();
    for (const worker of this.#workers.values()) worker.abandon();
    await settleWithin(pending, 2_000);
  }

  async #disposeWorkers(): Promise<void> {
    this.#workers.uncountAll();
    for (const worker of this.#workers.values()) {
      try {
        await worker.dispose({ keepPublished: true });
      } catch (error) {
        this.#log.warn({ profile: worker.name, event: 'daemon.close_failed', op: 'stop', error: (error as Error).message }, `could not stop profile "${worker.name}" cleanly`);
      }
    }
  }

  #loadEntries(): Promise<readonly ProfileEntry[]> | readonly ProfileEntry[] {
    const profiles = this.#options.profiles;
    return typeof profiles === 'function' ? profiles() : profiles;
  }

  /** The files the profile publishes: its token file and its templates' destinations. */
  #sinkPaths(name: string): string[] {
    const file = this.#files.pathOf(name);
    return [...(file === undefined ? [] : [file]), ...this.#files.templatesOf(name).map((spec) => tokenFileFor(spec.dest, name))];
  }

  /** The daemon-wide token file serves the profiles without one of their own. */
  #checkTemplate(entries: readonly ProfileEntry[], sinks?: ReadonlyMap<string, ProfileSinks>): void {
    const own = (name: string) => (sinks ? sinks.get(name) : this.#files.sinksOf(name))?.tokenFile !== undefined;
    if (this.#options.tokenFile !== undefined) checkTokenFileTemplate(this.#options.tokenFile, new Set(entries.map((e) => e.name).filter((name) => !own(name))).size);
  }

  /**
   * Whether each profile's published files are still in place, for /readyz: a file found removed or replaced
   * makes its profile not ready until the next sweep puts it back. Each probe is answered after a look that
   * began after it arrived; probes that arrive during a look share the one after it, so at most one look runs
   * and one waits, however often it is probed.
   */
  #checkPublished(): Promise<void> {
    if (this.#publishedCheckNext) return this.#publishedCheckNext;
    const look = (): Promise<void> => {
      const running = eachBounded([...this.#workers.values()], this.#config.concurrency, async (worker) => void (await worker.checkPublished()));
      this.#publishedCheck = running.finally(() => {
        if (this.#publishedCheck === checked) this.#publishedCheck = undefined;
      });
      const checked = this.#publishedCheck;
      return checked;
    };
    const running = this.#publishedCheck;
    if (!running) return look();
    const next = running.catch(() => undefined).then(() => {
      this.#publishedCheckNext = undefined;
      return look();
    });
    this.#publishedCheckNext = next;
    return next;
  }

  #coordinatorDown(error: unknown): void {
    if (this.#coordinatorDownSince !== undefined) return;
    this.#coordinatorDownSince = this.#clock.wall();
    this.#log.warn(
      { event: 'coordinator.down', op: 'reconcile', errorCode: 'COORDINATOR_UNAVAILABLE', error: classifyFailure(error).message },
      'the coordinator is unreachable: connector reconciles wait until it is back; every token this replica publishes is still renewed',
    );
  }

  #coordinatorUp(): void {
    if (this.#coordinatorDownSince === undefined) return;
    this.#coordinatorDownSince = undefined;
    this.#log.info({ event: 'coordinator.up', op: 'reconcile' }, 'the coordinator is reachable again; held reconciles go ahead');
  }

  /** Once per jump of either clock: expired tokens leave the file first, then what is due is renewed. */
  #clockJumped(jump: ClockJump): void {
    const log = this.#log;
    const seconds = (ms: number): number => Math.round(Math.abs(ms) / 1000);
    if (jump.pausedMs > 0) log.warn({ event: 'clock.paused', op: 'sweep', pausedMs: jump.pausedMs }, `this process was paused for ${seconds(jump.pausedMs)} s; renewing what is due now`);
    if (jump.wallStepMs > 0) {
      log.warn({ event: 'clock.stepped', op: 'sweep', wallStepMs: jump.wallStepMs }, `the wall clock moved ${seconds(jump.wallStepMs)} s ahead of the process's timers (a host resumed from suspend, or the clock was set forward); renewing what is due now`);
    } else if (jump.wallStepMs < 0) {
      log.warn({ event: 'clock.stepped', op: 'sweep', wallStepMs: jump.wallStepMs }, `the wall clock stepped back ${seconds(jump.wallStepMs)} s; token lifetimes are judged by the monotonic clock too`);
    }
    void this.sweep().catch((error: unknown) => log.error({ event: 'sweep.failed', op: 'sweep', err: error }, 'the sweep after a clock jump failed'));
  }
}

async function settleWithin(pending: Promise<unknown>[], ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const done = Promise.allSettled(pending).then(() => true as const);
  const finished = await Promise.race([done, timeout]);
  clearTimeout(timer);
  return finished;
}

/** The fleet of the options, when fleet mode is on; its checks are resolveDaemonConfig's. */
function fleetOf(options: DaemonOptions, marginMs: number, log: Logger, onChange: () => void): Fleet | undefined {
  const fleet = options.fleet;
  if (!fleet) return undefined;
  const backend = options.coordinator?.fleet;
  if (!backend || !options.coordinator) return undefined;
  const more = fleet === true ? {} : fleet;
  return new Fleet({
    backend,
    replicaId: options.coordinator.replicaId,
    ...(more.leaseMs !== undefined ? { leaseMs: more.leaseMs } : {}),
    fallbackMs: more.fallbackMs ?? Math.min(DEFAULT_FLEET_FALLBACK_MS, marginMs / 2),
    ...(options.monotonicNow ? { mono: options.monotonicNow } : {}),
    ...(more.timers === false ? { timers: false } : {}),
    log,
    onChange,
  });
}
