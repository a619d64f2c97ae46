// Reading a file on the daemon's and `exec`'s path whose name someone else may influence (a template's SRC,
// /etc/group). A plain readFile of such a path can wedge the process or leak another file:
//
// - a FIFO (or a device, or a hung network mount) blocks open(2) or read(2) in a thread of libuv's pool, for
//   good. Four of those and every file operation of the process waits; and Node joins those threads at exit,
//   so even a clean shutdown never ends. Here the open cannot block (O_NONBLOCK), what was opened is checked on
//   its descriptor to be a regular file before a byte is read, the read is bounded in size, and the whole read
//   has a deadline. A path whose earlier read is still stuck past its deadline is refused at once instead of
//   taking another thread.
// - a symbolic link put where the file was, by whoever can write in its directory, makes a process running as
//   root read (and publish) a file that user could not. A link is followed only when it is owned by root or by
//   the user this process runs as, and the file it leads to is too, with neither that file nor its directory
//   writable by anyone else. The file opened is the one checked: its device and inode, and (Linux) the
//   path the kernel followed to it, are compared on the descriptor.
//
// A read stuck in the kernel on a dead network mount (NFS `hard`) cannot be interrupted by any process: the
// deadline frees the caller, not the thread, and such a process cannot exit until the mount answers.
import { constants, type Stats } from 'node:fs';
import { lstat, open, readlink } from 'node:fs/promises';
import path from 'node:path';
import { SyncauthError } from '../errors.js';

/** What a template (or /etc/group) may weigh: far above any real one, far below what would hurt. */
export const MAX_READ_BYTES = 1024 * 1024;
/** A local file is read in microseconds; one that takes seconds is on a mount that does not answer. */
export const READ_DEADLINE_MS = 5_000;

const MAX_LINKS = 40;
const STICKY = 0o1000;

export interface SafeReadOptions {
  /** Larger files are refused, not truncated. Default {@link MAX_READ_BYTES}. */
  maxBytes?: number;
  /** For the whole read: following the path, opening, reading. Default {@link READ_DEADLINE_MS}. */
  deadlineMs?: number;
}

export type FileRefusal = 'not_regular' | 'too_large' | 'untrusted_link' | 'changed' | 'timeout' | 'stuck';

/** A file refused by {@link readRegularFile}. `why` says what is wrong without the path; the message has both. */
export class FileRefusedError extends SyncauthError {
  constructor(
    readonly file: string,
    readonly refusal: FileRefusal,
    readonly why: string,
  ) {
    super('FILE_REFUSED', `${file}: ${why}`, { kind: 'configuration' });
  }
}

function kindOf(info: Stats): string {
  if (info.isFIFO()) return 'a FIFO (named pipe)';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  if (info.isSocket()) return 'a socket';
  if (info.isDirectory()) return 'a directory';
  if (info.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

function notRegular(file: string, info: Stats): FileRefusedError {
  const kind = kindOf(info);
  return new FileRefusedError(file, 'not_regular', kind.startsWith('a ') ? `is ${kind}, not a regular file` : `is ${kind}`);
}

const euid = process.geteuid?.() ?? -1;

/** Root and this process's own user: nobody else may decide which file a link leads to. */
function trustedOwner(uid: number): boolean {
  return uid === 0 || uid === euid;
}

/** Group- or world-writable. A sticky directory (such as /tmp) lets others add files but not replace ours. */
function othersMayWrite(info: Stats): boolean {
  if ((info.mode & 0o022) === 0) return false;
  return !(info.isDirectory() && (info.mode & STICKY) !== 0);
}

interface Resolved {
  /** The path with every link resolved: what is opened. */
  real: string;
  info: Stats;
  /** The file itself is reached through a link (a link to a directory on the way does not count). */
  viaLink: boolean;
}

/**
 * Follows `file` one component at a time, as the kernel would, refusing a link not owned by root or this user
 * (such a link decides what is read). Gives the real path and the lstat of what it names. A trusted link to a
 * directory on the way (/var/run to /run) makes the path no different from its real one.
 */
async function resolveTrusted(file: string, alive: () => void): Promise<Resolved> {
  let pending = file.split('/').filter(Boolean);
  let current = '/';
  let links = 0;
  let viaLink = false;
  let info = await lstat('/');
  while (pending.length > 0) {
    alive();
    const name = pending.shift() as string;
    if (name === '.') continue;
    if (name === '..') {
      current = path.dirname(current);
      info = await lstat(current);
      continue;
    }
    const next = path.join(current, name);
    info = await lstat(next);
    if (!info.isSymbolicLink()) {
      current = next;
      continue;
    }
    links += 1;
    // The last name is a link: the file is what the link leads to, checked in checkLinkTarget.
    if (pending.length === 0) viaLink = true;
    if (links > MAX_LINKS) throw Object.assign(new Error(`${file}: too many symbolic links`), { code: 'ELOOP' });
    if (!trustedOwner(info.uid)) {
      throw new FileRefusedError(file, 'untrusted_link', `goes through the symbolic link ${next}, owned by uid ${info.uid}; a link is followed only when root or this user (uid ${euid}) owns it`);
    }
    const target = await readlink(next);
    if (target.startsWith('/')) current = '/';
    pending = [...target.split('/').filter(Boolean), ...pending];
    info = await lstat(current);
  }
  return { real: current, info, viaLink };
}

/** Behind a link: the file and its directory must be root's or this user's, and writable by nobody else. */
async function checkLinkTarget(file: string, real: string, info: Stats): Promise<void> {
  const refuse = (why: string): never => {
    throw new FileRefusedError(file, 'untrusted_link', `is a symbolic link to ${real}, which ${why}; a link is followed only to a file root or this user (uid ${euid}) owns, in a directory they own, that no one else can write`);
  };
  if (!trustedOwner(info.uid)) refuse(`is owned by uid ${info.uid}`);
  if (othersMayWrite(info)) refuse('others may write');
  const dir = await lstat(path.dirname(real));
  if (!trustedOwner(dir.uid)) refuse(`is in a directory owned by uid ${dir.uid}`);
  if (othersMayWrite(dir)) refuse('is in a directory others may write');
}

async function readChecked(file: string, maxBytes: number, alive: () => void): Promise<string> {
  const resolved = await resolveTrusted(file, alive);
  // Refused before it is opened: opening a device can have effects of its own (a tape rewinds, a modem hangs up).
  if (!resolved.info.isFile()) throw notRegular(file, resolved.info);
  if (resolved.viaLink) await checkLinkTarget(file, resolved.real, resolved.info);
  alive();
  // The real path, links resolved and checked above: should one have been put in since, it is not followed.
  const handle = await open(resolved.real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY | constants.O_NOFOLLOW);
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw notRegular(file, info);
    // What was opened must be what was checked, by the path the kernel followed: a directory on the way swapped
    // for a link between the checks and the open would lead elsewhere (Linux names it in /proc; elsewhere the
    // device and inode are compared alone).
    const opened = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
    if (info.dev !== resolved.info.dev || info.ino !== resolved.info.ino || (opened !== undefined && opened !== resolved.real)) {
      throw new FileRefusedError(file, 'changed', 'was replaced while it was being opened; not read');
    }
    if (resolved.viaLink) await checkLinkTarget(file, resolved.real, info);
    if (info.size > maxBytes) throw new FileRefusedError(file, 'too_large', `is ${info.size} bytes, more than the ${maxBytes} allowed`);
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      alive();
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > maxBytes) throw new FileRefusedError(file, 'too_large', `grew past the ${maxBytes} bytes allowed while it was read`);
    return buffer.toString('utf8', 0, length);
  } finally {
    await handle.close();
  }
}

interface Read {
  done: Promise<string>;
  /** Its deadline passed and it has not returned: a thread of the pool is stuck on the path. */
  stuck: boolean;
}

/** Reads in flight by path: concurrent reads of one file share one, and a stuck one is not repeated. */
const reads = new Map<string, Read>();

/**
 * The text of `file`, which must be a regular file of at most `maxBytes`, read within `deadlineMs`; see the top
 * of this file. Errors of the file system (ENOENT, EACCES, …) are thrown as they are; a file refused for what
 * it is, a deadline missed or a read still stuck from before throw {@link FileRefusedError}.
 */
export async function readRegularFile(file: string, options: SafeReadOptions = {}): Promise<string> {
  const maxBytes = options.maxBytes ?? MAX_READ_BYTES;
  const deadlineMs = options.deadlineMs ?? READ_DEADLINE_MS;
  const absolute = path.resolve(file);
  const key = `${absolute}\0${maxBytes}`;
  let read = reads.get(key);
  if (read?.stuck) {
    throw new FileRefusedError(absolute, 'stuck', 'an earlier read of it has not returned yet (a mount that does not answer?); not tried again until it does');
  }
  if (!read) {
    const started = performance.now();
    const entry: Read = { done: Promise.resolve(''), stuck: false };
    // Between steps: a read that comes back after its deadline goes no further (it opens nothing more).
    const alive = (): void => {
      if (performance.now() - started > deadlineMs) throw new FileRefusedError(absolute, 'timeout', `was not read within ${deadlineMs / 1000} s`);
    };
    entry.done = readChecked(absolute, maxBytes, alive);
    reads.set(key, entry);
    entry.done.then(
      () => reads.get(key) === entry && reads.delete(key),
      () => reads.get(key) === entry && reads.delete(key),
    );
    read = entry;
  }
  const current = read;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      current.stuck = true;
      reject(new FileRefusedError(absolute, 'timeout', `was not read within ${deadlineMs / 1000} s (a mount that does not answer?)`));
    }, deadlineMs);
  });
  try {
    return await Promise.race([current.done, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
