// A lock that holds across processes: proper-lockfile's atomic mkdir, whose mtime the holder keeps fresh, so a
// lock left by a crashed process goes stale and is taken over. Waiting is bounded by our own loop rather than
// proper-lockfile's retry counts, so the caller states a time, not a number of attempts.
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
  try {
    return await fn(controller.signal);
  } finally {
    // Releasing a compromised lock rejects with ERELEASED; the holder already learnt of it through the signal.
    await release().catch(() => undefined);
  }
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
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw options.timeoutError();
      // Jitter keeps several waiters from retrying in lockstep.
      await sleep(Math.min(remaining, delay * (0.5 + Math.random())));
      delay = Math.min(delay * 1.5, 100);
    }
  }
}
