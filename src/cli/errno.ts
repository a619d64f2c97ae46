// The operating system's refusals (a busy port, a file where a directory belongs, a directory where a file
// belongs, a path another user owns) as sentences naming the port or path and what to do, instead of Node's
// `listen EADDRINUSE: address already in use …`. reportError turns any such error that reaches it into one;
// code that knows more (which flag chose the port) can call listenFailure or describeSystemError itself.
import { statSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { ExitCode, SyncauthError } from '../errors.js';

interface SystemError extends NodeJS.ErrnoException {
  address?: string;
  port?: number;
  dest?: string;
}

/** A path the command works with, so an error about it (or something under it) can say which setting chose it. */
export interface PathRole {
  path: string;
  /** `the config directory, SYNCAUTH_CONFIG_DIR` */
  what: string;
  /** What to change: `set SYNCAUTH_CONFIG_DIR (--config-dir) to a directory`. */
  fix: string;
  kind: 'directory' | 'file';
}

const roles: PathRole[] = [];

/** Records a path the command resolved from its settings (see buildContext). */
export function notePathRole(role: PathRole): void {
  if (!roles.some((r) => r.path === role.path && r.kind === role.kind)) roles.push(role);
}

function roleOf(target: string): PathRole | undefined {
  return roles.find((r) => target === r.path || target.startsWith(`${r.path}${path.sep}`) || r.path.startsWith(`${target}${path.sep}`));
}

export function isSystemError(error: unknown): error is SystemError {
  return error instanceof Error && typeof (error as SystemError).code === 'string' && /^E[A-Z]+$/.test((error as SystemError).code as string) &&
    (typeof (error as SystemError).syscall === 'string' || typeof (error as SystemError).errno === 'number');
}

function who(): string {
  try {
    const { username, uid } = userInfo();
    return uid >= 0 ? `user ${username} (uid ${uid})` : `user ${username}`;
  } catch {
    return typeof process.getuid === 'function' ? `uid ${process.getuid()}` : 'this user';
  }
}

/** The first part of `target` (from the root down) that exists and is not a directory. */
function fileInTheWay(target: string): string | undefined {
  const parts = path.resolve(target).split(path.sep);
  for (let i = 2; i <= parts.length; i++) {
    const prefix = parts.slice(0, i).join(path.sep) || path.sep;
    const info = statOf(prefix);
    if (!info) return undefined;
    if (!info.isDirectory()) return prefix;
  }
  return undefined;
}

function statOf(target: string) {
  try {
    return statSync(target);
  } catch {
    return undefined;
  }
}

function tail(role: PathRole | undefined): string {
  return role ? ` (${role.what})` : '';
}

function make(code: string, message: string, hint: string, cause: unknown): SyncauthError {
  return new SyncauthError(code, message, { hint, cause, exitCode: ExitCode.error });
}

const PORT_HINT = 'stop the program that holds it (`ss -ltnp` shows which), or choose another port';

/** A failure to listen on host:port, named as the user chose it (`setting`: `--listen`, `--port`). */
export function listenFailure(error: unknown, where: { host: string; port: number; setting?: string }): SyncauthError {
  const code = isSystemError(error) ? error.code : undefined;
  const by = where.setting ? ` (${where.setting})` : '';
  switch (code) {
    case 'EADDRINUSE':
      return make('SYSTEM_PORT_IN_USE', `port ${where.port} on ${where.host} is already in use by another program${by}`, PORT_HINT, error);
    case 'EACCES':
    case 'EPERM':
      return make('SYSTEM_PORT_DENIED', `${who()} may not listen on port ${where.port} of ${where.host}${by}`,
        'ports below 1024 need privileges: choose a port from 1024 up', error);
    case 'EADDRNOTAVAIL':
      return make('SYSTEM_ADDRESS_UNAVAILABLE', `${where.host} is not an address of this machine, so nothing can listen on ${where.host}:${where.port}${by}`,
        'use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)', error);
    default:
      return make('SYSTEM_LISTEN_FAILED', `cannot listen on ${where.host}:${where.port}${by}: ${error instanceof Error ? error.message : String(error)}`,
        'choose another address or port', error);
  }
}

/**
 * A sentence for an operating-system error about a port or a path, or undefined for any other error. The
 * message names the path or port; the hint says what to do.
 */
export function describeSystemError(error: unknown): SyncauthError | undefined {
  if (!isSystemError(error)) return undefined;
  const { code } = error;
  if (error.syscall === 'listen' || (error.port !== undefined && ['EADDRINUSE', 'EADDRNOTAVAIL'].includes(code ?? ''))) {
    if (error.port === undefined) return undefined;
    return listenFailure(error, { host: error.address ?? 'this machine', port: error.port });
  }
  const target = error.path;
  const role = target ? roleOf(target) : undefined;
  switch (code) {
    case 'ENOTDIR': {
      const blocker = target ? fileInTheWay(target) : undefined;
      if (!blocker) return undefined;
      const blockerRole = roleOf(blocker);
      return make('SYSTEM_NOT_A_DIRECTORY', `${blocker} is a file, but syncauth needs a directory there${tail(blockerRole)}`,
        `move that file away, or ${blockerRole?.fix ?? 'choose another directory'}`, error);
    }
    case 'EISDIR': {
      if (target) {
        return make('SYSTEM_IS_A_DIRECTORY', `${target} is a directory, but syncauth needs a file there${tail(role)}`,
          role?.fix ?? `give the path of a file (inside ${target}, if that is where it belongs)`, error);
      }
      // Node leaves the path out of a failed read; a file role that is a directory is the likely culprit.
      const suspect = roles.find((r) => r.kind === 'file' && statOf(r.path)?.isDirectory());
      if (suspect) {
        return make('SYSTEM_IS_A_DIRECTORY', `${suspect.path} is a directory, but syncauth needs a file there (${suspect.what})`, suspect.fix, error);
      }
      return make('SYSTEM_IS_A_DIRECTORY', 'a directory stands where syncauth expected a file', 'check the file paths given in flags and the environment', error);
    }
    case 'ENOENT': {
      if (!target) return undefined;
      const parent = path.dirname(target);
      const missing = statOf(parent) === undefined ? `the directory ${parent}` : target;
      return make('SYSTEM_NOT_FOUND', `${missing} does not exist${tail(role)}`, role?.fix ?? `create ${parent} or give another path`, error);
    }
    case 'EACCES':
    case 'EPERM': {
      if (!target) return undefined;
      return make('SYSTEM_PERMISSION_DENIED', `permission denied: ${who()} may not use ${target}${tail(role)}`,
        `check the owner and mode of ${target} and the directories above it (ls -ld), or run syncauth as the user that owns them`, error);
    }
    case 'EROFS':
      if (!target) return undefined;
      return make('SYSTEM_READ_ONLY', `${target} is on a read-only file system${tail(role)}`, role?.fix ?? 'choose a path on a writable file system', error);
    case 'ENOSPC':
      return make('SYSTEM_DISK_FULL', `no space is left on the device${target ? ` holding ${target}` : ''}`, 'free some space and try again', error);
    default:
      return undefined;
  }
}
