// The daemon's three ways of keeping two holders of one profile apart, behind one interface:
// - within this process, single flight: a profile's visit while its previous one still runs is not made;
// - across processes on the host (a `token` or `refresh` beside the daemon), the profile store's renewal lock,
//   waited for up to a bound;
// - across replicas, the coordinator's lease, tried once: another replica holding it is doing the work.
// Each runs a function holding the key, hands it a signal that aborts when the hold is lost, and releases the
// key however the function ends; one that does not wait answers HELD_ELSEWHERE without running it.
import type { ProfileStore } from '../profile/index.js';
import type { Coordinator } from './coordinator.js';

/** What `run` answers when the key is held elsewhere and this exclusion does not wait for it. */
export const HELD_ELSEWHERE: unique symbol = Symbol('held elsewhere');

export interface Exclusion {
  run<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T | typeof HELD_ELSEWHERE>;
}

const NEVER = new AbortController().signal;

/** In-process single flight; `inFlight(key)` is the work running now, for a shutdown to wait for. */
export class SingleFlight implements Exclusion {
  readonly #running = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T | typeof HELD_ELSEWHERE> {
    if (this.#running.has(key)) return Promise.resolve(HELD_ELSEWHERE);
    const running = fn(NEVER);
    this.#running.set(key, running);
    const done = (): void => {
      if (this.#running.get(key) === running) this.#running.delete(key);
    };
    running.then(done, done);
    return running;
  }

  inFlight(key: string): Promise<unknown> | undefined {
    return this.#running.get(key);
  }
}

/** The profile store's renewal lock: waits up to `waitMs`, then fails with PROFILE_LOCK_TIMEOUT. */
export function renewalLock(store: ProfileStore, waitMs: number): Exclusion {
  return {
    run: (key, fn) => store.withLock(key, fn, { waitMs }),
  };
}

/** The replicas' lease: tried once; throws when the coordinator cannot be reached. */
export function replicaLease(coordinator: Coordinator): Exclusion {
  return {
    async run(key, fn) {
      const lease = await coordinator.acquire(key);
      if (!lease) return HELD_ELSEWHERE;
      try {
        return await fn(lease.signal);
      } finally {
        await lease.release();
      }
    },
  };
}
