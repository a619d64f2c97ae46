// A lock that holds across processes: proper-lockfile's atomic mkdir, whose mtime the holder keeps fresh, so a
// lock left by a crashed process goes stale and is taken over. A lock held across network calls (the renewal
// lock) can also name its holder's process beside it, in `<lock>.owner`: a waiter on the same host that finds
// the holder dead takes the lock over at once rather than after the stale time. The record is a symbolic link
// whose target is the text `host pid id` (as Emacs marks the files it edits): made, read and removed in one
// call each. Locks held for a local write only do without it. Waiting is bounded by our own loop rather than proper-lockfile's retry counts, so
// the caller states a time, not a number of attempts.
import { randomUUID } from 'node:crypto';
import { readlink, rename, rm, symlink, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import lockfile from 'proper-lockfile';

export interface FileLockOptions {
  /** Give up after trying this long. Must exceed `staleMs` to outwait a crashed holder. */
  waitMs: number;
  /** A lock not refreshed for this long belongs to a dead process and is taken over (proper-lockfile min 2000). */
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
  const controller = new AbortController();
  const release = await acquire(lockPath, options, (error) => controller.abort(error));
  // Best effort: without it, a crash is still recovered from, after the stale time.
  const recorded = options.recordOwner === true && (await recordOwner(lockPath));
  try {
    return await fn(controller.signal);
  } finally {
    // While the lock was ours, nobody else wrote a record (ours names a live process); once it was lost, the
    // record there may be the new holder's.
    if (recorded && !controller.signal.aborted) await unlink(ownerFile(lockPath)).catch(() => undefined);
    // Releasing a compromised lock rejects with ERELEASED; the holder already learnt of it through the signal.
    await release().catch(() => undefined);
  }
}

/**
 * Names this process as the holder. A record already there belongs to a holder that died and whose lock went
 * stale (proper-lockfile took it over, not a waiter here): left in place, it would let a waiter judge this
 * live holding dead, so it is replaced.
 */
async function recordOwner(lockPath: string): Promise<boolean> {
  const record = encodeOwner({ pid: process.pid, host: hostname(), id: randomUUID() });
  const make = () => symlink(record, ownerFile(lockPath)).then(() => true);
  return make().catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') return false;
    await unlink(ownerFile(lockPath)).catch(() => undefined);
    return make().catch(() => false);
  });
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
  if (!owner || owner.host !== hostname() || owner.pid === process.pid || isAlive(owner.pid)) return false;
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

async function acquire(
  lockPath: string,
  options: FileLockOptions,
  onCompromised: (error: Error) => void,
): Promise<() => Promise<void>> {
  const deadline = Date.now() + options.waitMs;
  let delay = 10;
  for (;;) {
    try {
      return await lockfile.lock(lockPath, {
        lockfilePath: lockPath,
        realpath: false,
        stale: options.staleMs,
        retries: 0,
        onCompromised,
      });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error;
      if (await takeOverFromDeadOwner(lockPath)) continue;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw options.timeoutError();
      // Jitter keeps several waiters from retrying in lockstep.
      await sleep(Math.min(remaining, delay * (0.5 + Math.random())));
      delay = Math.min(delay * 1.5, 100);
    }
  }
}
