// Readiness for systemd (Type=notify) without native code: `systemd-notify` sends the sd_notify datagram to
// $NOTIFY_SOCKET. It runs as a child of the daemon, so the unit needs NotifyAccess=all, and without
// --no-block it waits until the manager has processed the message (a barrier), which is what lets the manager
// attribute a message from a short-lived process to the unit at all. The child gets NOTIFY_SOCKET and PATH
// only: the daemon's environment holds secrets. Nothing here throws; a daemon not run by systemd (no
// NOTIFY_SOCKET) or a notification that could not be sent just gives false.
import { spawn, type ChildProcess } from 'node:child_process';

/** How long a notification may take, the manager's processing of it included. */
export const NOTIFY_TIMEOUT_MS = 5_000;

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** One sd_notify assignment per line, e.g. `READY=1`, `STOPPING=1`, `STATUS=serving 2 profiles`. */
const ASSIGNMENT = /^[A-Z][A-Z0-9_]*=[^\n]*$/;

/** The arguments for `systemd-notify`: READY=1 and STATUS= as its options, any other assignment as is. */
export function notifyArguments(state: string): string[] | undefined {
  const lines = state.split('\n').filter((line) => line !== '');
  if (lines.length === 0 || !lines.every((line) => ASSIGNMENT.test(line))) return undefined;
  return lines.map((line) => {
    if (line === 'READY=1') return '--ready';
    if (line.startsWith('STATUS=')) return `--status=${line.slice('STATUS='.length)}`;
    return line;
  });
}

/**
 * Tells the service manager about `state` (newline-separated assignments: `READY=1`, `STOPPING=1`,
 * `STATUS=...`). Resolves true once `systemd-notify` reports the message delivered; false when not run by
 * systemd, when `state` is malformed, or when the command is missing, fails or outlasts `timeoutMs`.
 */
export function notifySystemd(
  state: string,
  env: NodeJS.ProcessEnv = process.env,
  options: { timeoutMs?: number } = {},
): Promise<boolean> {
  const socket = env.NOTIFY_SOCKET;
  const args = notifyArguments(state);
  if (!socket || !args) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn('systemd-notify', args, {
        env: { NOTIFY_SOCKET: socket, PATH: env.PATH || DEFAULT_PATH },
        stdio: 'ignore',
      });
    } catch {
      resolve(false);
      return;
    }
    let settled = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish(false);
    }, options.timeoutMs ?? NOTIFY_TIMEOUT_MS);
    timer.unref();
    function finish(ok: boolean): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(ok);
    }
    child.once('error', () => finish(false));
    child.once('close', (code) => finish(code === 0));
  });
}
