// A lock that holds across processes: a symbolic link created at the lock's path (creating one is atomic, and
// fails when anything is there), whose target is the text `host pid id` naming its holder (as Emacs marks the
// files it edits). Taking it is one call, giving it back is one: the renewal path takes one per renewal, and
// each directory operation it makes costs more than the HTTP exchange's own CPU (see `npm run bench`, the
// renewal path against its floor). The holder keeps the link's mtime fresh while it holds it long (past half
// the stale time), so a lock left by a crashed process goes stale and is taken over; a waiter on the same host
// that finds the named holder dead takes the lock over at once (for the locks that ask for it, `recordOwner`).
// Taking and giving back are synchronous calls: each is one local metadata operation, and a round trip
// through libuv's thread pool costs several times that in CPU.
//
// Earlier releases locked with a directory at the same path (proper-lockfile's layout), naming its holder in
// `<lock>.owner`. Each kind of lock makes the other's creation fail, so a process of an earlier release and one
// of this release still exclude each other; a directory lock is judged here as those releases judged it (its
// mtime, its owner record). An earlier release cannot judge a link lock (it reads the link's target as a file
// that does not exist, and waits): a link left by a killed holder of this release is taken over by the next
// process of this release, or removed by hand. Where the file system refuses symbolic links (Windows without
// the right to make them, FAT), the lock is a directory as before, without an owner record: it is taken over
// after the stale time. Waiting is bounded by our own loop, so the caller states a time, not a number of
// attempts.
import { mkdirSync, rmdirSync, symlinkSync, unlinkSync } from 'node:fs';
import { link, lstat, readlink, rename, rm, unlink, lutimes, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A random id (an owner record, a claimed lock's new name). node:crypto is loaded with the first lock taken, not
 * with every command that imports this module (it costs a command that takes no lock about a tenth of Node's own
 * start-up).
 */
const randomUUID = (): string => process.getBuiltinModule('node:crypto').randomUUID();

export interface FileLockOptions {
  /** Give up after trying this long. Must exceed `staleMs` to outwait a crashed holder. */
  waitMs: number;
  /** A lock not refreshed for this long belongs to a dead process and is taken over (at least 2000). */
  staleMs: number;
  /** The error to throw when `waitMs` passes; it should name the lock and say what to do. */
  timeoutError: () => Error;
  /**
   * A waiter on this host that finds the holder named in the lock dead takes it over at once, without waiting
   * for the stale time (the renewal lock, a profile state's write lock, and others held around work a killed
   * process may leave half done).
   */
  recordOwner?: boolean;
}

/**
 * Runs `fn` while holding the lock `lockPath`. If the lock is lost while `fn` runs (removed, replaced or not
 * refreshable for `staleMs`), the signal passed to `fn` is aborted; `fn` decides whether to stop.
 */
export async function withFileLock<T>(
  lockPath: string,
  fn: (signal: AbortSignal) => Promise<T>,
  options: FileLockOptions,
): Promise<T> {
  const holding = await acquire(lockPath, options);
  try {
    return await fn(holding.signal);
  } finally {
    holding.stopRefreshing();
    // While the lock was ours, nobody else could make one at its path; once it was lost, what is there may be
    // the new holder's.
    if (!holding.signal.aborted) quietly(() => (holding.directory ? rmdirSync(lockPath) : unlinkSync(lockPath)));
  }
}

function quietly(fn: () => void): void {
  try {
    fn();
  } catch {
    // Best effort: a lock already gone is what was wanted.
  }
}

let host: string | undefined;
/** The host name, asked once: every lock names it. */
function thisHost(): string {
  host ??= hostname();
  return host;
}

interface Owner {
  pid: number;
  host: string;
  /** Tells this holding apart from a later one by the same process id. */
  id: string;
}

function ownerFile(lockPath: string): string {
  return `${lockPath}.owner`;
}

function encodeOwner(owner: Owner): string {
  return `${owner.host} ${owner.pid} ${owner.id}`;
}

function decodeOwner(text: string | undefined): Owner | undefined {
  const parts = (text ?? '').split(' ');
  const [host, pid, id] = parts;
  return parts.length === 3 && host && id && /^\d+$/.test(pid ?? '') ? { host, pid: Number(pid), id } : undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

function isDeadHere(owner: Owner | undefined): boolean {
  return owner !== undefined && owner.host === thisHost() && owner.pid !== process.pid && !isAlive(owner.pid);
}

interface Holding {
  /** Aborts when the lock is lost: removed, replaced, or not refreshable. */
  signal: AbortSignal;
  /** The lock is a directory: the file system refused a link. */
  directory: boolean;
  stopRefreshing(): void;
}

/** What a file system that makes no symbolic links answers. */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

const STALE_MIN_MS = 2_000;
/** An mtime read back may be rounded by the file system; a later one than this means another holder's. */
const MTIME_SLACK_MS = 2_000;

async function acquire(lockPath: string, options: FileLockOptions): Promise<Holding> {
  const staleMs = Math.max(options.staleMs, STALE_MIN_MS);
  const deadline = Date.now() + options.waitMs;
  const record = encodeOwner({ pid: process.pid, host: thisHost(), id: randomUUID() });
  let delay = 10;
  for (;;) {
    const takenAt = Date.now();
    try {
      symlinkSync(record, lockPath);
      return hold(lockPath, record, staleMs, takenAt);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      if (NO_LINKS.has(code)) {
        try {
          mkdirSync(lockPath, { mode: 0o700 });
          return hold(lockPath, undefined, staleMs, takenAt);
        } catch (inner) {
          if ((inner as NodeJS.ErrnoException).code !== 'EEXIST') throw inner;
        }
      } else if (code !== 'EEXIST') {
        throw error;
      }
    }
    if (await takeOver(lockPath, staleMs, options.recordOwner === true)) continue;
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw options.timeoutError();
    // Jitter keeps several waiters from retrying in lockstep.
    await sleep(Math.min(remaining, delay * (0.5 + Math.random())));
    delay = Math.min(delay * 1.5, 100);
  }
}

/**
 * Removes the lock found at `lockPath` when its holder stopped refreshing it `staleMs` ago or (with
 * `deadOwner`) is a process of this host that no longer runs. True when the lock is gone (or already was), so
 * the caller tries again at once.
 */
async function takeOver(lockPath: string, staleMs: number, deadOwner: boolean): Promise<boolean> {
  let info;
  try {
    info = await lstat(lockPath);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
  if (info.isDirectory()) return takeOverDirectory(lockPath, info.mtimeMs, staleMs, deadOwner);
  if (!info.isSymbolicLink()) return false;
  const target = await readlink(lockPath).catch(() => undefined);
  if (target === undefined) return true;
  if (!(Date.now() - info.mtimeMs > staleMs || (deadOwner && isDeadHere(decodeOwner(target))))) return false;
  // Of several waiters that judged it so, only the one that renames it away removes it; the link renamed must
  // still be the one judged (the same holder, not refreshed since), not one a new holder made in between,
  // which is put back.
  const claimed = `${lockPath}.${randomUUID()}`;
  try {
    await rename(lockPath, claimed);
  } catch {
    return false;
  }
  const [again, claimedInfo] = await Promise.all([readlink(claimed).catch(() => undefined), lstat(claimed).catch(() => undefined)]);
  const same = again === target && claimedInfo?.mtimeMs === info.mtimeMs;
  if (!same) await link(claimed, lockPath).catch(() => undefined);
  await unlink(claimed).catch(() => undefined);
  return same;
}

/** An earlier release's lock directory, judged as that release judged it. */
async function takeOverDirectory(lockPath: string, mtimeMs: number, staleMs: number, deadOwner: boolean): Promise<boolean> {
  if (Date.now() - mtimeMs > staleMs) {
    await rm(lockPath, { recursive: true, force: true });
    // An owner record left beside it would let an earlier release's waiter judge the next holder dead.
    await unlink(ownerFile(lockPath)).catch(() => undefined);
    return true;
  }
  if (!deadOwner) return false;
  const owner = decodeOwner(await readlink(ownerFile(lockPath)).catch(() => undefined));
  if (!isDeadHere(owner)) return false;
  const claimed = `${ownerFile(lockPath)}.${randomUUID()}`;
  try {
    await rename(ownerFile(lockPath), claimed);
  } catch {
    return false;
  }
  // The record renamed must be the dead holder's, not one a new holder made in between.
  const removed = decodeOwner(await readlink(claimed).catch(() => undefined))?.id === owner?.id
    ? await rm(lockPath, { recursive: true, force: true }).then(() => true, () => false)
    : false;
  await unlink(claimed).catch(() => undefined);
  return removed;
}

/**
 * Keeps a held lock fresh: every half stale time its mtime is moved to now, after checking that the link is
 * still the one this holder made (`record`; a directory, undefined, by its mtime alone). A holding shorter
 * than that, as a renewal is, never pays for a refresh.
 */
function hold(lockPath: string, record: string | undefined, staleMs: number, takenAt: number): Holding {
  const controller = new AbortController();
  let lastSet: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const lost = (reason: string): void => {
    controller.abort(Object.assign(new Error(`the lock ${lockPath} was lost: ${reason}`), { code: 'ECOMPROMISED' }));
  };
  const refresh = async (): Promise<void> => {
    if (Date.now() - (lastSet ?? takenAt) > staleMs) {
      // Due long ago: the process was stopped or starved, and a waiter may have judged the lock stale.
      lost('it was not refreshed within the stale time');
      return;
    }
    try {
      const [target, { mtimeMs }] = await Promise.all([record === undefined ? undefined : readlink(lockPath), lstat(lockPath)]);
      const expected = lastSet ?? takenAt;
      if (target !== record || mtimeMs > expected + MTIME_SLACK_MS || (lastSet !== undefined && mtimeMs < lastSet - MTIME_SLACK_MS)) {
        lost('another process took it over');
        return;
      }
      const at = new Date();
      await (record === undefined ? utimes(lockPath, at, at) : lutimes(lockPath, at, at));
      lastSet = at.getTime();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      lost(code === 'ENOENT' ? 'it was removed' : code === 'EINVAL' ? 'another process took it over' : `it could not be refreshed (${code ?? 'error'})`);
      return;
    }
    if (!stopped) schedule();
  };
  const schedule = (): void => {
    timer = setTimeout(() => void refresh(), staleMs / 2);
    timer.unref();
  };
  schedule();
  return {
    signal: controller.signal,
    directory: record === undefined,
    stopRefreshing() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
