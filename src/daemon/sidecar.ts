// The sidecar's parts as one group: the sinks' locks, the coordinator (Redis), the re-authorization stores, the
// notifier, the page and the daemon start one after another, each registered with its close as it starts. A
// part that fails to start, a stop asked for during the start, and the stop at the end all close what was
// started in one way: in reverse order, each once, each in its own try. The command line builds the parts (it
// knows the settings and how each is made) and hands them in as functions; this module knows only their order.
import type { Logger } from '../log.js';
import type { SinkLocks } from '../publish/sink-lock.js';
import type { Coordinator } from './coordinator.js';
import { stopDuringStart, type HeldSignals } from './signals.js';
import type { RunningDaemon } from './types.js';

/** Something started, and how to close it. */
export interface Part {
  readonly what: string;
  close(): Promise<void> | void;
}

/**
 * Parts started one after another, closed in reverse. A start that throws closes those started before it, then
 * the error goes on; `close` closes each part once, however often it is called, and logs (never throws) a part
 * that fails to close, so one failure never leaks the rest.
 */
export class PartGroup {
  readonly #parts: Part[] = [];
  #closing: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  /**
   * Starts one part with `open`; what it returns (unless undefined: the part is off) is closed with `close`
   * when the group closes. When `open` throws, the parts started so far are closed, and the error is thrown.
   */
  async start<T>(what: string, open: () => Promise<T | undefined> | T | undefined, close: (part: T) => Promise<void> | void): Promise<T | undefined> {
    let part: T | undefined;
    try {
      part = await open();
    } catch (error) {
      await this.close();
      throw error;
    }
    if (part !== undefined) this.#parts.push({ what, close: () => close(part) });
    return part;
  }

  /** A step of the start that opens nothing; when it throws, the parts started so far are closed. */
  async step(run: () => Promise<void> | void): Promise<void> {
    await this.start('step', async () => void (await run()), () => undefined);
  }

  /** What is started now, in order of starting. */
  get started(): readonly string[] {
    return this.#parts.map((part) => part.what);
  }

  close(): Promise<void> {
    this.#closing ??= this.#closeAll();
    return this.#closing;
  }

  async #closeAll(): Promise<void> {
    for (let part = this.#parts.pop(); part; part = this.#parts.pop()) {
      try {
        await part.close();
      } catch (error) {
        this.log.warn({ event: 'daemon.close_failed', op: 'stop', part: part.what, error: (error as Error).message }, `could not close the ${part.what} cleanly`);
      }
    }
  }
}

/** What of the notifier the group uses: closing it, and one last delivery try after a one-shot run. */
export interface SidecarNotifier {
  close(): Promise<void>;
  tick(): Promise<void>;
}

/** The stores the page and the notifier's links share. */
export interface SidecarStores {
  close(): Promise<void>;
}

/**
 * The parts as the command line builds them, each a function called when its turn comes; a part a run does not
 * have is left out, or its function returns undefined.
 */
export interface SidecarParts<S extends SidecarStores, N extends SidecarNotifier> {
  log: Logger;
  /** `--once`: a stop during the start exits with the shell's code for the signal (see `stopDuringStart`). */
  once: boolean;
  /** The signals held while starting: a stop is honoured at the next step, what was started closed. */
  signals: HeldSignals;
  /** Takes the lock of every sink of the run; refuses (throws) when another live process holds one. */
  sinks: () => Promise<SinkLocks>;
  /** Run once the sinks are this run's alone, before anything else starts (clearing what killed writes left). */
  prepare?: () => Promise<void> | void;
  /** The coordinator; `ready`, when it has it, settles once the backend answers (or gives up for now). */
  coordinator?: () => Promise<Coordinator & { ready?(): Promise<void> }>;
  stores?: () => Promise<S | undefined>;
  /** The notifier; `isResolved` tells whether the daemon, once running, holds a ready token for the profile. */
  notifier?: (stores: S | undefined, isResolved: (profile: string) => boolean) => Promise<N | undefined>;
  /** Said once the services' parts are started and before anything listens. */
  beforeServing?: () => void;
  /**
   * The re-authorization page, started before the daemon (a port in use refuses a start that has published
   * nothing); `daemon` answers for the daemon once it runs. Returns what closes the page.
   */
  page?: (daemon: RunningDaemon, stores: S | undefined) => Promise<(() => Promise<void>) | undefined>;
  daemon: (parts: { sinks: SinkLocks; coordinator: Coordinator | undefined; notifier: N | undefined }) => Promise<RunningDaemon>;
}

/** A started sidecar: its daemon, the parts a run still talks to, and what closes them all. */
export interface Sidecar<N extends SidecarNotifier> {
  readonly daemon: RunningDaemon;
  readonly notifier: N | undefined;
  readonly sinks: SinkLocks;
  /** Closes every part, the daemon first and the sinks' locks last; once, however often it is called. */
  close(): Promise<void>;
}

/**
 * Starts the parts in order: sinks, coordinator (waiting for it to answer, or for a stop), stores, notifier,
 * page, daemon. Returns undefined when a stop asked for during the start ended it (everything started is
 * closed by then); throws, with everything started closed, when a part fails to start.
 */
export async function startSidecar<S extends SidecarStores, N extends SidecarNotifier>(parts: SidecarParts<S, N>): Promise<Sidecar<N> | undefined> {
  const { log, signals } = parts;
  const group = new PartGroup(log);
  const stopped = (): Promise<boolean> => stopDuringStart(signals, log, parts.once, () => group.close());
  const sinks = (await group.start('sinks', parts.sinks, (locks) => locks.release())) as SinkLocks;
  if (parts.prepare) await group.step(parts.prepare);
  const coordinator = await group.start('coordinator', () => parts.coordinator?.(), (c) => c.close());
  // A replica that starts while Redis is away still starts: it renews nothing, says so, and reports not ready.
  // A stop during that wait need not sit it out.
  await Promise.race([coordinator?.ready?.().catch(() => undefined), signals.stopped]);
  // A reminder of a profile this daemon renews again (set up anew while no daemon ran) ends instead of asking.
  const served: { daemon?: RunningDaemon } = {};
  const isResolved = (profile: string): boolean => served.daemon?.status().profiles.find((p) => p.name === profile)?.ready === true;
  const stores = await group.start('re-authorization stores', () => parts.stores?.(), (s) => s.close());
  const notifier = await group.start('notifier', () => parts.notifier?.(stores, isResolved), (n) => n.close());
  parts.beforeServing?.();
  if (await stopped()) return undefined;
  // Until the daemon runs, the page knows no profile.
  const starting = {
    status: () => served.daemon?.status() ?? { ready: false, profiles: [] },
    reauthorized: (name: string, grant: Parameters<RunningDaemon['reauthorized']>[1]) =>
      served.daemon ? served.daemon.reauthorized(name, grant) : Promise.resolve({ stored: false, error: 'the daemon is starting' }),
  } as RunningDaemon;
  await group.start('re-authorization page', () => parts.page?.(starting, stores), (close) => close().catch(() => undefined));
  const daemon = (await group.start('daemon', () => parts.daemon({ sinks, coordinator, notifier }), (d) => d.close())) as RunningDaemon;
  served.daemon = daemon;
  if (parts.once && (await stopped())) return undefined;
  return { daemon, notifier, sinks, close: () => group.close() };
}
