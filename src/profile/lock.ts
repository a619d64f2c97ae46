// A lock that holds across processes: proper-lockfile's atomic mkdir, whose mtime the holder keeps fresh, so a
// lock left by a crashed process goes stale and is taken over. Beside the lock, `<lock>.owner` names the
// holder's process: a waiter on the same host that finds the holder dead takes the lock over at once rather
// than after the stale time. Waiting is bounded by our own loop rather than proper-lockfile's retry counts, so
// the caller states a time, not a number of attempts.
import { randomUUID } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
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
  const owner: Owner = { pid: process.pid, host: hostname(), id: randomUUID() };
  // Best effort: without it, a crash is still recovered from, after the stale time.
  await writeFile(ownerFile(lockPath), JSON.stringify(owner), { mode: 0o600 }).catch(() => undefined);
  try {
    return await fn(controller.signal);
  } finally {
    const current = await readOwner(lockPath);
    if (current?.id === owner.id) await rm(ownerFile(lockPath), { force: true }).catch(() => undefined);
    // Releasing a compromised lock rejects with ERELEASED; the holder already learnt of it through the signal.
    await release().catch(() => undefined);
  }
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

async function readOwner(lockPath: string): Promise<Owner | undefined> {
  try {
    const data = JSON.parse(await readFile(ownerFile(lockPath), 'utf8')) as Partial<Owner>;
    return typeof data.pid === 'number' && typeof data.host === 'string' && typeof data.id === 'string' ? (data as Owner) : undefined;
  } catch {
    return undefined;
  }
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
  const owner = await readOwner(lockPath);
  if (!owner || owner.host !== hostname() || owner.pid === process.pid || isAlive(owner.pid)) return false;
  const claimed = `${ownerFile(lockPath)}.${randomUUID()}`;
  try {
    await rename(ownerFile(lockPath), claimed);
  } catch {
    return false;
  }
  const taken = await readFile(claimed, 'utf8').catch(() => '');
  // The record renamed must be the dead holder's, not one a new holder wrote in between.
  const removed = taken.includes(owner.id) ? await rm(lockPath, { recursive: true, force: true }).then(() => true, () => false) : false;
  await rm(claimed, { force: true }).catch(() => undefined);
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
