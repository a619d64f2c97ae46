// A lock that holds across processes: an atomic mkdir, whose mtime the holder keeps fresh while it holds it
// long, so a lock left by a crashed process goes stale and is taken over. A lock can also name its holder's
// process beside it, in `<lock>.owner`: a waiter on the same host that finds the holder dead takes the lock over
// at once rather than after the stale time. The renewal lock and the profile state's write lock do (a renewal
// waits on both); the other locks of a local write do without it. The record is a symbolic link whose target is
// the text `host pid id` (as Emacs marks the files it edits): made, read and removed in one call each.
//
// The renewal path takes two of these per renewal, so a holding costs what it must and no more: mkdir to take
// it and a symlink to name its holder, an unlink and rmdir to give it back, and (only when it is held past half
// the stale time) a stat and a utimes per refresh. Taking, recording and giving back are synchronous calls: each is one local metadata operation of
// some microseconds, and a round trip through libuv's thread pool costs several times that in CPU (see
// `npm run bench`, the renewal path against its floor). The layout is the one proper-lockfile used before, so
// a process of an earlier release and one of this release exclude each other. Waiting is bounded by our own
// loop, so the caller states a time, not a number of attempts.
import { mkdirSync, rmdirSync, symlinkSync, unlinkSync } from 'node:fs';
import { readlink, rename, rm, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

export interface FileLockOptions {
  /** Give up after trying this long. Must exceed `staleMs` to outwait a crashed holder. */
  waitMs: number;
  /** A lock not refreshed for this long belongs to a dead process and is taken over (at least 2000). */
  staleMs: number;
  /** The error to throw when `waitMs` passes; it should name the lock and say what to do. */
  timeoutError: () => Error;
  /** Record the holder's process beside the lock, so that waiters can take it over at once when it dies. */
  recordOwner?: boolean;
}

/**
 * Runs `fn` while holding the lock directory `lockPath`. If the lock is lost while `fn` runs (its directory
 * removed or not refreshable for `staleMs`), the signal passed to `fn` is aborted; `fn` decides whether to stop.
 */
export async function withFileLock<T>(
  lockPath: string,
  fn: (signal: AbortSignal) => Promise<T>,
  options: FileLockOptions,
): Promise<T> {
  const holding = await acquire(lockPath, options);
  // Best effort: without it, a crash is still recovered from, after the stale time.
  const recorded = options.recordOwner === true && recordOwner(lockPath);
  try {
    return await fn(holding.signal);
  } finally {
    holding.stopRefreshing();
    // While the lock was ours, nobody else wrote a record (ours names a live process); once it was lost, the
    // record and the directory there may be the new holder's.
    if (!holding.signal.aborted) {
      if (recorded) quietly(() => unlinkSync(ownerFile(lockPath)));
      quietly(() => rmdirSync(lockPath));
    }
  }
}

/**
 * A random id for an owner record. node:crypto is loaded with the first lock taken, not with every command
 * that imports this module (it costs a command that takes no lock about a tenth of Node's own start-up).
 */
const randomUUID = (): string => process.getBuiltinModule('node:crypto').randomUUID();

/**
 * Names this process as the holder. A record already there belongs to a holder that died and whose lock went
 * stale (the stale-time rule took it over, not a waiter here): left in place, it would let a waiter judge this
 * live holding dead, so it is replaced.
 */
function recordOwner(lockPath: string): boolean {
  const record = encodeOwner({ pid: process.pid, host: thisHost(), id: randomUUID() });
  try {
    symlinkSync(record, ownerFile(lockPath));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return false;
  }
  quietly(() => unlinkSync(ownerFile(lockPath)));
  try {
    symlinkSync(record, ownerFile(lockPath));
    return true;
  } catch {
    return false;
  }
}

function quietly(fn: () => void): void {
  try {
    fn();
  } catch {
    // Best effort: a lock or record already gone is what was wanted.
  }
}

let host: string | undefined;
/** The host name, asked once: a holder records it with every renewal lock. */
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

async function readOwner(file: string): Promise<Owner | undefined> {
  const parts = (await readlink(file).catch(() => '')).split(' ');
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

/**
 * Takes over a lock whose holder on this host is no longer running. Of several waiters, only the one that
 * renames the owner record away removes the lock; the others find no record and wait as usual. Returns whether
 * the lock was removed, so the caller tries again at once.
 */
async function takeOverFromDeadOwner(lockPath: string): Promise<boolean> {
  const owner = await readOwner(ownerFile(lockPath));
  if (!owner || owner.host !== thisHost() || owner.pid === process.pid || isAlive(owner.pid)) return false;
  const claimed = `${ownerFile(lockPath)}.${randomUUID()}`;
  try {
    await rename(ownerFile(lockPath), claimed);
  } catch {
    return false;
  }
  // The record renamed must be the dead holder's, not one a new holder made in between.
  const removed = (await readOwner(claimed))?.id === owner.id
    ? await rm(lockPath, { recursive: true, force: true }).then(() => true, () => false)
    : false;
  await unlink(claimed).catch(() => undefined);
  return removed;
}

interface Holding {
  /** Aborts when the lock is lost: its directory removed, replaced, or not refreshable. */
  signal: AbortSignal;
  stopRefreshing(): void;
}

const STALE_MIN_MS = 2_000;
/** An mtime read back may be rounded by the file system; a later one than this means another holder's. */
const MTIME_SLACK_MS = 2_000;

async function acquire(lockPath: string, options: FileLockOptions): Promise<Holding> {
  const staleMs = Math.max(options.staleMs, STALE_MIN_MS);
  const deadline = Date.now() + options.waitMs;
  let delay = 10;
  for (;;) {
    const takenAt = Date.now();
    try {
      mkdirSync(lockPath, { mode: 0o700 });
      return hold(lockPath, staleMs, takenAt);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if ((await removeIfStale(lockPath, staleMs)) || (await takeOverFromDeadOwner(lockPath))) continue;
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw options.timeoutError();
    // Jitter keeps several waiters from retrying in lockstep.
    await sleep(Math.min(remaining, delay * (0.5 + Math.random())));
    delay = Math.min(delay * 1.5, 100);
  }
}

/** Removes a lock its holder stopped refreshing `staleMs` ago; true when it is gone (or was already). */
async function removeIfStale(lockPath: string, staleMs: number): Promise<boolean> {
  let mtimeMs: number;
  try {
    mtimeMs = (await stat(lockPath)).mtimeMs;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
  if (Date.now() - mtimeMs <= staleMs) return false;
  await rm(lockPath, { recursive: true, force: true });
  return true;
}

/**
 * Keeps a held lock fresh: every half stale time its mtime is moved to now, after checking that the directory
 * is still the one this holder made (present, and not touched since by anyone else). A holding shorter than
 * that, as a renewal is, never pays for a refresh.
 */
function hold(lockPath: string, staleMs: number, takenAt: number): Holding {
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
      const { mtimeMs } = await stat(lockPath);
      const expected = lastSet ?? takenAt;
      if (mtimeMs > expected + MTIME_SLACK_MS || (lastSet !== undefined && mtimeMs < lastSet - MTIME_SLACK_MS)) {
        lost('another process took it over');
        return;
      }
      const at = new Date();
      await utimes(lockPath, at, at);
      lastSet = at.getTime();
    } catch (error) {
      lost((error as NodeJS.ErrnoException).code === 'ENOENT' ? 'its directory was removed' : `it could not be refreshed (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
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
    stopRefreshing() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
