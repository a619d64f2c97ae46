// A sink (the token file, a template's DEST, the socket) belongs to one running process at a time. Its lock
// sits beside it, `<sink>.lock`: a hard link to a Unix socket the holder listens on (one socket per directory
// and process, `.syncauth-holder-<pid>-<random>`, however many sinks it holds there). Whether the holder lives
// is asked of the kernel, never judged by a pid (containers sharing a volume are all pid 1): connecting is
// answered while the holder runs, and refused (ECONNREFUSED) once it has ended, however it ended. Making the
// link is atomic and fails when anything is at the lock's path, so two processes never both take one lock; a
// lock whose holder is gone is taken over under a short mutex, so that two processes finding it stale at once
// do not both take it. Connecting, the asker reads one line naming the holder: pid, start time, command.
//
// A Unix socket's path is at most 107 bytes. Bound or reached by a longer path, the socket is addressed through
// the directory's descriptor (`/proc/self/fd/N/<name>`); a lock whose own name is too long for even that is
// named by a hash of the sink's name, still beside it.
import { closeSync, openSync } from 'node:fs';
import { link, lstat, readdir, unlink } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import path from 'node:path';
import { ValidationError } from '../errors.js';
import { listenUnix } from '../net/listen.js';
import { withFileLock } from '../profile/lock.js';

/** node:crypto, loaded with the first lock taken rather than with every command that imports this module. */
const crypto = () => process.getBuiltinModule('node:crypto');
const randomHex = (bytes: number): string => crypto().randomBytes(bytes).toString('hex');

/** What a Unix socket's path may hold (sun_path is 108 bytes, one for the terminating zero). */
const SOCKET_PATH_MAX = 107;
const HOLDER_PREFIX = '.syncauth-holder-';
const LOCK_SUFFIX = '.lock';
/** How long an asker waits for a live holder to answer; a holder that accepts and says nothing is still alive. */
const ASK_TIMEOUT_MS = 1_000;

/** The process holding a sink, as it names itself to an asker. */
export interface SinkHolder {
  pid: number;
  /** When the process started (RFC 3339). */
  startedAt: string;
  /** The command line it runs, as `syncauth daemon --config /etc/syncauth/syncauth.yaml`. */
  command?: string;
}

/** This process, as it names itself. Command lines carry no secrets (they come from files and the environment). */
export function thisProcess(): SinkHolder {
  const args = process.argv.slice(2);
  return { pid: process.pid, startedAt: new Date(Date.now() - process.uptime() * 1000).toISOString(), command: ['syncauth', ...args].join(' ') };
}

/** The lock beside `sink`: `<sink>.lock`, or a name made from a hash of the sink's when that is too long for a file name. */
export function lockPathOf(sink: string): string {
  const base = path.basename(sink);
  if (Buffer.byteLength(`${base}${LOCK_SUFFIX}`) <= 255) return `${sink}${LOCK_SUFFIX}`;
  return path.join(path.dirname(sink), `.syncauth-${crypto().createHash('sha256').update(base).digest('hex').slice(0, 32)}${LOCK_SUFFIX}`);
}

/** How the holder is named in a refusal. */
export function describeHolder(holder: SinkHolder | undefined): string {
  if (!holder) return 'a running process that did not say who it is';
  return `pid ${holder.pid}, started ${holder.startedAt}${holder.command ? `, running \`${holder.command}\`` : ''}`;
}

function heldMessage(holder: SinkHolder | undefined): string {
  return `it is held by another running process (${describeHolder(holder)}), which publishes it; stop that process or give this one other paths`;
}

/** A directory's descriptor, for reaching a socket in it by a short path. */
class DirHandle {
  #fd: number | undefined;
  constructor(readonly dir: string) {}

  /** A path to `name` in the directory that a socket call accepts; undefined when none is short enough. */
  address(name: string): string | undefined {
    const full = path.join(this.dir, name);
    if (Buffer.byteLength(full) <= SOCKET_PATH_MAX) return full;
    this.#fd ??= openSync(this.dir, 'r');
    const short = `/proc/self/fd/${this.#fd}/${name}`;
    return Buffer.byteLength(short) <= SOCKET_PATH_MAX ? short : undefined;
  }

  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }
}

type Found = { state: 'live'; holder?: SinkHolder } | { state: 'stale' } | { state: 'gone' } | { state: 'refused'; why: string };

/** Asks whatever listens at `address`: live (and who), stale (nothing listens), or another answer. */
function ask(address: string): Promise<Found> {
  return new Promise((resolve) => {
    const socket = connect({ path: address });
    let text = '';
    const done = (found: Found): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(found);
    };
    const live = (): void => {
      try {
        const holder = JSON.parse(text.split('\n')[0] ?? '') as SinkHolder;
        done({ state: 'live', ...(typeof holder.pid === 'number' ? { holder } : {}) });
      } catch {
        done({ state: 'live' });
      }
    };
    const timer = setTimeout(live, ASK_TIMEOUT_MS);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (text.includes('\n')) live();
    });
    socket.once('end', live);
    socket.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') done({ state: 'stale' });
      else if (error.code === 'ENOENT') done({ state: 'gone' });
      else if (error.code === 'EACCES') done({ state: 'live' });
      else done({ state: 'refused', why: error.code ?? error.message });
    });
  });
}

/** The socket this process listens on in one directory, linked at each lock it holds there. */
interface DirHolder {
  dir: DirHandle;
  name: string;
  ino: number;
  server: Server;
  locks: Set<string>;
}

export interface SinkRequestForLock {
  path: string;
  /** The setting that named it, for the refusal. */
  field: string;
}

/**
 * The sinks this process holds. `take` takes every lock asked for, or none (a refusal names every sink held by
 * another live process, and its holder); `ensure` takes one more later (a profile added by a reload); `release`
 * gives them back, removing only the locks that are still this process's own.
 */
export class SinkLocks {
  readonly #identity: SinkHolder;
  readonly #dirs = new Map<string, DirHolder>();
  /** Sink → its lock path. */
  readonly #held = new Map<string, string>();

  constructor(identity: SinkHolder = thisProcess()) {
    this.#identity = identity;
  }

  /** Whether this process holds `sink`'s lock. */
  holds(sink: string): boolean {
    return this.#held.has(sink);
  }

  get size(): number {
    return this.#held.size;
  }

  /** Takes the lock of every sink, or of none: throws one ValidationError naming every sink held elsewhere. */
  async take(requests: readonly SinkRequestForLock[]): Promise<void> {
    const taken: string[] = [];
    const issues: { field: string; message: string }[] = [];
    // First only looked at: a sink held elsewhere refuses the whole before this process makes anything.
    issues.push(...(await this.heldElsewhere(requests)));
    if (issues.length > 0) throw new ValidationError(issues);
    for (const request of requests) {
      if (this.#held.has(request.path)) continue;
      const refused = await this.#takeOne(request.path).catch((error: NodeJS.ErrnoException) => `cannot lock it (${error.code ?? error.message})`);
      if (refused === undefined) taken.push(request.path);
      else issues.push({ field: request.field, message: `${request.path}: ${refused}` });
    }
    if (issues.length === 0) return;
    for (const sink of taken) await this.#releaseOne(sink);
    throw new ValidationError(issues);
  }

  /** The sinks of `requests` another live process holds, one issue each naming it; looks only, makes nothing. */
  async heldElsewhere(requests: readonly SinkRequestForLock[]): Promise<{ field: string; message: string }[]> {
    const issues: { field: string; message: string }[] = [];
    for (const request of requests) {
      if (this.#held.has(request.path)) continue;
      const held = await this.#heldElsewhere(request.path).catch(() => undefined);
      if (held !== undefined) issues.push({ field: request.field, message: `${request.path}: ${held}` });
    }
    return issues;
  }

  /** Takes one more sink's lock if not held yet; throws (a ValidationError) when another live process holds it. */
  ensure(sink: string, field: string): Promise<void> {
    if (this.#held.has(sink)) return Promise.resolve();
    return this.take([{ path: sink, field }]);
  }

  /** Gives back the locks of `sinks` (all when omitted). */
  async release(sinks?: readonly string[]): Promise<void> {
    for (const sink of sinks ?? [...this.#held.keys()]) await this.#releaseOne(sink);
  }

  /** Why `sink` cannot be taken, when its lock is another live process's (or in the way); undefined otherwise. Makes nothing. */
  async #heldElsewhere(sink: string): Promise<string | undefined> {
    const lock = lockPathOf(sink);
    const info = await lstat(lock).catch(() => undefined);
    if (!info) return undefined;
    const own = this.#dirs.get(path.dirname(sink));
    if (own && own.ino === info.ino) return undefined;
    if (!info.isSocket()) return `${lock} is in the way (it is not a lock syncauth made); remove it if no other process publishes here`;
    const dir = new DirHandle(path.dirname(sink));
    try {
      const found = await this.#askAt(dir, lock);
      return found.state === 'live' ? heldMessage(found.holder) : undefined;
    } finally {
      dir.close();
    }
  }

  /** Undefined when taken; otherwise why not, naming the holder. */
  async #takeOne(sink: string): Promise<string | undefined> {
    const dir = path.dirname(sink);
    const lock = lockPathOf(sink);
    const holder = await this.#holderIn(dir);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        await link(path.join(dir, holder.name), lock);
        this.#hold(holder, sink, lock);
        return undefined;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const info = await lstat(lock).catch(() => undefined);
      if (!info) continue;
      if (info.ino === holder.ino) {
        this.#hold(holder, sink, lock);
        return undefined;
      }
      if (!info.isSocket()) return `${lock} is in the way (it is not a lock syncauth made); remove it if no other process publishes here`;
      const found = await this.#askAt(holder.dir, lock);
      if (found.state === 'live') return heldMessage(found.holder);
      if (found.state === 'refused') return `cannot tell whether the process holding ${lock} still runs (${found.why})`;
      if (found.state === 'gone') continue;
      // Its holder has ended: taken over, one process at a time, after asking again.
      const took = await withFileLock(
        `${lock}.takeover`,
        async () => {
          const again = await lstat(lock).catch(() => undefined);
          if (again && again.ino !== info.ino) return false;
          if (again && (await this.#askAt(holder.dir, lock)).state !== 'stale') return false;
          await unlink(lock).catch(() => undefined);
          await link(path.join(dir, holder.name), lock);
          return true;
        },
        { waitMs: 5_000, staleMs: 2_000, timeoutError: () => new Error(`${lock}.takeover is held`) },
      ).catch(() => false);
      if (took) {
        this.#hold(holder, sink, lock);
        return undefined;
      }
    }
    return `could not take ${lock}: other processes keep taking it`;
  }

  #hold(holder: DirHolder, sink: string, lock: string): void {
    holder.locks.add(lock);
    this.#held.set(sink, lock);
  }

  /** Asks the holder of `lock`, reaching it by a path short enough (a short-lived link beside it when need be). */
  async #askAt(dir: DirHandle, lock: string): Promise<Found> {
    const direct = dir.address(path.basename(lock));
    if (direct) return ask(direct);
    const alias = `${HOLDER_PREFIX}ask-${randomHex(6)}`;
    try {
      await link(lock, path.join(dir.dir, alias));
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ENOENT' ? { state: 'gone' } : { state: 'refused', why: (error as NodeJS.ErrnoException).code ?? 'failed' };
    }
    try {
      const address = dir.address(alias);
      return address ? await ask(address) : { state: 'refused', why: 'its path is too long for a Unix socket' };
    } finally {
      await unlink(path.join(dir.dir, alias)).catch(() => undefined);
    }
  }

  /** This process's socket in `dir`, made on first use; holder sockets other processes left there when they ended go. */
  async #holderIn(dir: string): Promise<DirHolder> {
    const known = this.#dirs.get(dir);
    if (known) return known;
    const handle = new DirHandle(dir);
    await this.#clearDeadHolders(handle);
    const name = `${HOLDER_PREFIX}${process.pid}-${randomHex(6)}`;
    const address = handle.address(name);
    if (!address) throw Object.assign(new Error(`${dir} is too long a path for a Unix socket, and /proc is not mounted`), { code: 'ENAMETOOLONG' });
    const identity = `${JSON.stringify(this.#identity)}\n`;
    const server = createServer((socket) => {
      socket.on('error', () => undefined);
      socket.end(identity);
    });
    // Only this user may ask (connecting takes write permission on the socket).
    await listenUnix(server, address, 0o177);
    // Never what keeps the process alive.
    server.unref();
    const ino = (await lstat(path.join(dir, name))).ino;
    const holder = { dir: handle, name, ino, server, locks: new Set<string>() };
    this.#dirs.set(dir, holder);
    return holder;
  }

  /** Holder sockets in `dir` that nobody answers on any more (their process was killed): removed. */
  async #clearDeadHolders(dir: DirHandle): Promise<void> {
    const names = await readdir(dir.dir).catch(() => [] as string[]);
    for (const name of names) {
      if (!name.startsWith(HOLDER_PREFIX)) continue;
      const address = dir.address(name);
      if (address && (await ask(address)).state === 'stale') await unlink(path.join(dir.dir, name)).catch(() => undefined);
    }
  }

  async #releaseOne(sink: string): Promise<void> {
    const lock = this.#held.get(sink);
    if (lock === undefined) return;
    this.#held.delete(sink);
    const dir = path.dirname(sink);
    const holder = this.#dirs.get(dir);
    if (!holder) return;
    // Removed only while it is still this process's: one taken over meanwhile is its new holder's.
    if ((await lstat(lock).catch(() => undefined))?.ino === holder.ino) await unlink(lock).catch(() => undefined);
    holder.locks.delete(lock);
    if (holder.locks.size > 0) return;
    this.#dirs.delete(dir);
    await new Promise<void>((resolve) => holder.server.close(() => resolve()));
    const own = path.join(dir, holder.name);
    if ((await lstat(own).catch(() => undefined))?.ino === holder.ino) await unlink(own).catch(() => undefined);
    holder.dir.close();
  }
}
