// The sidecar's signals: held while it starts, then a graceful stop (SIGTERM, SIGINT) or a reload (SIGHUP)
// while it runs, and systemd told when it is ready and when it stops.
import { ExitCode } from '../errors.js';
import type { Logger } from '../log.js';
import type { ProfileSinks } from '../publish/token-file.js';
import { notifySystemd } from './systemd.js';
import type { RunningDaemon } from './types.js';

/**
 * SIGTERM, SIGINT and SIGHUP while the daemon starts (reading the configuration, loading profiles, starting the
 * listeners), before its running handlers are in place: without this, Node's default action ends the process
 * mid-write, leaving a lock directory or a temporary file behind. A stop is remembered and honoured at the next
 * step of the start (what was started is closed cleanly); a reload is done once started. A second stop signal
 * exits at once, as it does later.
 */
export interface HeldSignals {
  stop?: NodeJS.Signals;
  /** Settles when a stop signal arrives: a wait of the start (Redis answering) races it. */
  stopped: Promise<void>;
  reload: boolean;
  release(): void;
}

export function holdSignals(): HeldSignals {
  let stopped = (): void => undefined;
  const held: HeldSignals = {
    stopped: new Promise<void>((resolve) => (stopped = resolve)),
    reload: false,
    release: () => {
      process.off('SIGTERM', onStop);
      process.off('SIGINT', onStop);
      process.off('SIGHUP', onReload);
    },
  };
  const onStop = (signal: NodeJS.Signals): void => {
    if (held.stop) process.exit(ExitCode.error);
    held.stop = signal;
    stopped();
  };
  const onReload = (): void => {
    held.reload = true;
  };
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  process.on('SIGHUP', onReload);
  return held;
}

/** The exit code of a one-shot run that a signal stopped, as the shell reports it (the daemon proper exits 0). */
export const ONCE_STOPPED: Partial<Record<NodeJS.Signals, number>> = { SIGINT: 130, SIGTERM: 143 };

/** Should a stray handle keep the event loop alive once everything is closed, do not hang the container's stop. */
export function exitSoon(): void {
  setTimeout(() => process.exit(process.exitCode ?? ExitCode.ok), 2_000).unref();
}

/**
 * A stop asked for during the start: logs it, closes what was started, and ends the run (true) as a stop would.
 * A one-shot run exits with the shell's code for the signal.
 */
export async function stopDuringStart(held: Pick<HeldSignals, 'stop'>, log: Logger, once: boolean, close: () => Promise<void> = async () => undefined): Promise<boolean> {
  const signal = held.stop;
  if (!signal) return false;
  log.info({ event: 'daemon.stopping', op: 'stop', signal, during: 'start' }, `${signal} while starting: stopping before serving`);
  await close().catch((error: unknown) => log.error({ event: 'daemon.stop_failed', op: 'stop', err: error }, 'shutdown was not clean'));
  log.info({ event: 'daemon.stopped', op: 'stop' }, 'stopped');
  if (once) process.exit(ONCE_STOPPED[signal] ?? ExitCode.error);
  // As after a later stop: a wait the start left pending (Redis's connection) must not hold the exit up.
  exitSoon();
  return true;
}

/**
 * Under systemd (Type=notify, NOTIFY_SOCKET set): READY=1 once every profile is first ready, which means its
 * token is already in its files. Returns what stops the watch.
 */
export function reportReadiness(running: RunningDaemon, log: Logger): () => void {
  if (!process.env.NOTIFY_SOCKET) return () => undefined;
  const timer = setInterval(() => {
    if (!running.status().ready) return;
    clearInterval(timer);
    void notifySystemd('READY=1').then((sent) => {
      if (sent) log.info({ event: 'daemon.ready', op: 'start' }, 'told systemd the daemon is ready');
      else log.warn({ event: 'daemon.notify_failed', op: 'start' }, 'could not tell systemd the daemon is ready (systemd-notify failed)');
    });
  }, 100);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Until a stop signal: SIGHUP reloads (with what `reconfigure` accepts; false keeps everything as it is), the
 * first SIGTERM or SIGINT closes the daemon (letting work in flight finish), a second exits at once. A signal
 * held during the start is acted on at once. Resolves once the daemon is closed.
 */
export function untilStopped(
  running: RunningDaemon,
  log: Logger,
  stopReadiness: () => void,
  reconfigure: () => Promise<{ profileSinks?: Map<string, ProfileSinks> } | false>,
  held: Pick<HeldSignals, 'stop' | 'reload'>,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false;
    const reload = (): void => {
      log.info({ event: 'daemon.reloading', op: 'load', signal: 'SIGHUP' }, 'SIGHUP: reloading the profiles');
      void reconfigure().then((accepted) => (accepted ? running.reload(accepted) : undefined));
    };
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) {
        log.warn({ event: 'daemon.stopping', op: 'stop', signal, wait: false }, 'second signal: exiting without waiting');
        process.exit(ExitCode.error);
      }
      stopping = true;
      log.info({ event: 'daemon.stopping', op: 'stop', signal }, 'stopping: letting in-flight work finish');
      stopReadiness();
      void notifySystemd('STOPPING=1')
        .then(() => running.close())
        .catch((error: unknown) => log.error({ event: 'daemon.stop_failed', op: 'stop', err: error }, 'shutdown was not clean'))
        .finally(() => {
          process.off('SIGTERM', stop);
          process.off('SIGINT', stop);
          process.off('SIGHUP', reload);
          log.info({ event: 'daemon.stopped', op: 'stop' }, 'stopped');
          resolve();
        });
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.on('SIGHUP', reload);
    if (held.stop) stop(held.stop);
    else if (held.reload) reload();
  });
}
