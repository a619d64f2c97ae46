// Bounds on concurrent work: how many run at once, how many start per second, and visiting a list a few at a time. The
// daemon bounds its profiles with them; the keychain store its child processes.

/** At most `size` functions run at once; the rest wait their turn in order. */
export class Semaphore {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free -= 1;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      // The slot passes straight to the next waiter, so a newcomer cannot overtake it.
      if (next) next();
      else this.#free += 1;
    }
  }
}

/**
 * Spaces starts at least 1/rate seconds apart: each caller reserves the next free slot at once (so callers
 * keep their order and a burst never exceeds the cap) and then waits for it. It counts what the cap cost: the
 * callers that had to wait, the time they were given to wait, and how many wait now.
 */
export class RateGate {
  #perSecond: number;
  #intervalMs: number;
  #nextAt = -Infinity;
  #delayed = 0;
  #delayMs = 0;
  #waiting = 0;

  constructor(
    perSecond: number,
    private readonly now: () => number,
    private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
  ) {
    this.#perSecond = perSecond;
    this.#intervalMs = 1000 / perSecond;
  }

  /** A new rate for the slots reserved from now on (a fleet's cap shared anew when its members change). */
  setRate(perSecond: number): void {
    this.#perSecond = perSecond;
    this.#intervalMs = 1000 / perSecond;
  }

  /** The rate now, and what waiting for it has cost since the gate was made (`delayMs`: the waits given, summed). */
  get stats(): { perSecond: number; delayed: number; delayMs: number; waiting: number } {
    return { perSecond: this.#perSecond, delayed: this.#delayed, delayMs: this.#delayMs, waiting: this.#waiting };
  }

  async wait(signal?: AbortSignal): Promise<void> {
    const now = this.now();
    const slot = Math.max(now, this.#nextAt);
    this.#nextAt = slot + this.#intervalMs;
    if (slot <= now) return;
    this.#delayed += 1;
    this.#delayMs += slot - now;
    this.#waiting += 1;
    try {
      await this.sleep(slot - now, signal);
    } finally {
      this.#waiting -= 1;
    }
  }
}

/**
 * Calls `fn` on every item, at most `width` at a time, in order: a daemon's sweep over ten thousand profiles
 * keeps a few visits under way, not ten thousand waiting at once. After a call fails no other starts; resolves
 * once every call started has ended, rejecting with the first failure.
 */
export async function eachBounded<T>(items: readonly T[], width: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async (): Promise<void> => {
    while (!failure && next < items.length) {
      const index = next++;
      try {
        await fn(items[index] as T, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(width, items.length)) }, lane));
  if (failure) throw failure.error;
}
