// A local listener for co-located processes that would rather ask than read a file: HTTP over a Unix socket,
// serving the current token on request only. Who may connect is decided by the socket file's mode and group
// (connecting takes write permission on it), so the file never exists with a looser mode than asked.
//
//   GET /v1/token/<profile>               the token alone, text/plain, no newline
//   GET /v1/token/<profile>?format=json   {"access_token", "expires_at" (RFC 3339), "profile"}
//   GET /v1/token                         the same, when exactly one profile is served
//
// 404 for a profile not served, 503 while no unexpired token is held, 405 for any other method.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { existsSync } from 'node:fs';
import { chmod, chown, lstat, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { absorbing, SyncauthError, ValidationError, type FieldIssue } from '../errors.js';
import { parseSocketMode, resolveGroup } from './file.js';
import type { Logger } from '../log.js';
import { listenUnix } from '../net/listen.js';

export interface TokenSource {
  token(profile: string): { value: string; expiresAt: number } | undefined;
  profiles(): readonly string[];
  /** True while the profiles are still being started: every request is answered 503, to be asked again. */
  starting?(): boolean;
}

export interface TokenSocket {
  readonly path: string;
  close(): Promise<void>;
}

export interface TokenSocketOptions {
  /** Default 0o600. A group that should connect needs write permission (e.g. 0o660 with `gid`). */
  mode?: number;
  gid?: number;
  log: Logger;
  /** Epoch milliseconds, for judging expiry; default Date.now. */
  now?: () => number;
}

const FIELD = '--socket';
const PREFIX = '/v1/token';

/** How the socket is given: its path, mode and group as set. */
export interface SocketSetting {
  path: string | undefined;
  mode: string | undefined;
  group: string | undefined;
  /** The setting that named the path, for messages. */
  pathField: string;
}

/**
 * The socket from its settings, checked before anything starts: a bad mode or group, or either given without a
 * socket, is refused (one ValidationError naming each). Undefined when no socket is given.
 */
export async function socketSpecOf(setting: SocketSetting): Promise<{ path: string; mode?: number; gid?: number } | undefined> {
  const issues: FieldIssue[] = [];
  const mode = setting.mode === undefined ? undefined : await absorbing(issues, () => parseSocketMode(setting.mode as string, '--socket-mode'));
  const gid = setting.group === undefined ? undefined : await absorbing(issues, () => resolveGroup(setting.group as string, '--socket-group'));
  if ((setting.mode !== undefined || setting.group !== undefined) && !setting.path) {
    issues.push({ field: setting.mode !== undefined ? '--socket-mode' : '--socket-group', message: `needs a socket (${setting.pathField})` });
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return setting.path ? { path: setting.path, ...(mode !== undefined ? { mode } : {}), ...(gid !== undefined ? { gid } : {}) } : undefined;
}

/** 'live' when a process listens on the socket at `path` (connecting tells, within a second), 'stale' when none does, else the error code. */
function probe(path: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const done = (result: string): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => done('live'), 1_000);
    socket.once('connect', () => done('live'));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED' ? 'stale' : (error.code ?? 'unknown')));
  });
}

/**
 * Refuses what `startTokenSocket` would refuse at `path` (something other than a socket, or a socket another
 * process listens on), touching nothing: checked before anything of a start is published.
 */
export async function checkSocketPath(path: string): Promise<void> {
  await clearPath(path, false);
}

/** Removes a socket file a dead process left at `path` (unless `remove` is false); refuses anything else found there. */
async function clearPath(path: string, remove = true): Promise<void> {
  const info = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw new ValidationError([{ field: FIELD, message: `cannot use ${path} (${error.code ?? error.message})` }]);
  });
  if (info === undefined) return;
  if (!info.isSocket()) throw new ValidationError([{ field: FIELD, message: `${path} exists and is not a socket; refusing to replace it` }]);
  const state = await probe(path);
  if (state === 'live') throw new ValidationError([{ field: FIELD, message: `another process is listening on ${path}` }]);
  if (state !== 'stale') throw new ValidationError([{ field: FIELD, message: `cannot tell whether ${path} is in use (${state})` }]);
  if (remove) await rm(path, { force: true });
}

function handler(source: TokenSource, now: () => number, log: Logger) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const send = (status: number, type: string, body: string, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...headers });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    const text = (status: number, body: string, headers?: Record<string, string>): void =>
      send(status, 'text/plain; charset=utf-8', `${body}\n`, headers);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      text(405, 'method not allowed: use GET', { allow: 'GET, HEAD' });
      return;
    }
    if (source.starting?.()) {
      text(503, 'the daemon is starting; try again shortly', { 'retry-after': '1' });
      return;
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const served = source.profiles();
    const list = served.length > 0 ? served.join(', ') : 'none';
    let profile: string | undefined;
    if (url.pathname === PREFIX || url.pathname === `${PREFIX}/`) {
      if (served.length !== 1) {
        text(404, `${served.length} profiles are served (${list}): ask for ${PREFIX}/<profile>`);
        return;
      }
      profile = served[0];
    } else if (url.pathname.startsWith(`${PREFIX}/`)) {
      try {
        profile = decodeURIComponent(url.pathname.slice(PREFIX.length + 1));
      } catch {
        profile = undefined;
      }
    } else {
      text(404, `not found: try ${PREFIX}/<profile> (served: ${list})`);
      return;
    }
    if (profile === undefined || !served.includes(profile)) {
      text(404, `no such profile here; served: ${list}`);
      return;
    }
    const format = url.searchParams.get('format') ?? 'text';
    if (format !== 'text' && format !== 'json') {
      text(400, 'format must be text or json');
      return;
    }
    const token = source.token(profile);
    if (!token || !(token.expiresAt > now())) {
      text(503, `no unexpired token for profile ${profile} right now; try again shortly`, { 'retry-after': '1' });
      return;
    }
    log.debug({ profile, event: 'socket.served', format }, 'token served on the socket');
    if (format === 'json') {
      const body = { access_token: token.value, expires_at: new Date(token.expiresAt).toISOString(), profile };
      send(200, 'application/json', JSON.stringify(body));
    } else {
      send(200, 'text/plain; charset=utf-8', token.value);
    }
  };
}

/**
 * Listens on `path`. The socket is created under a umask that leaves at most the owner's bits of `mode`, then
 * given its group and only then its mode: a process of another user cannot connect in between.
 */
export async function startTokenSocket(path: string, source: TokenSource, options: TokenSocketOptions): Promise<TokenSocket> {
  const mode = (options.mode ?? 0o600) & 0o777;
  const log = options.log;
  await clearPath(path);
  const server: Server = createServer(handler(source, options.now ?? Date.now, log));
  server.keepAliveTimeout = 5_000;
  await listenUnix(server, path, 0o777 & ~(mode & 0o700)).catch((error: NodeJS.ErrnoException) => {
    const dirMissing = !existsSync(dirname(path));
    const why: Record<string, string> = {
      EADDRINUSE: `${path} is already in use by another program`,
      EACCES: dirMissing ? `cannot create a socket at ${path}: its directory does not exist` : `may not create a socket at ${path}: permission denied on its directory`,
      ENOENT: `cannot create a socket at ${path}: its directory does not exist`,
    };
    throw new ValidationError([{ field: FIELD, message: why[error.code ?? ''] ?? `cannot listen on ${path} (${error.code ?? error.message})` }]);
  });
  // Closing unlinks the socket file already (libuv does); what is left is removed only if it is still ours, not
  // a socket a newer process created at the path meanwhile.
  const created = await lstat(path).then((info) => info.ino, () => undefined);
  const close = async (): Promise<void> => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    const left = await lstat(path).catch(() => undefined);
    if (left !== undefined && left.ino === created) await rm(path, { force: true });
  };
  try {
    // What is at the path must still be the socket this process just made, not something put there since:
    // chown and chmod would follow a link.
    const made = await lstat(path);
    if (!made.isSocket() || made.ino !== created || made.uid !== (process.geteuid?.() ?? made.uid)) throw Object.assign(new Error('replaced'), { code: 'EEXIST' });
    if (options.gid !== undefined) await chown(path, -1, options.gid);
    await chmod(path, mode);
  } catch (error) {
    await close();
    const code = (error as NodeJS.ErrnoException).code ?? 'failed';
    throw new SyncauthError('SOCKET_SETUP_FAILED', `cannot give ${path} its group and mode (${code})`, {
      hint: 'the group must be one this process belongs to, unless it runs as root',
    });
  }
  log.info({ event: 'socket.listening', path, mode: `0${mode.toString(8)}`, gid: options.gid }, 'serving tokens on a Unix socket');
  let closing: Promise<void> | undefined;
  return {
    path,
    close: () => (closing ??= close()),
  };
}
