// Bounds on the work across profiles: how many run at once, and how many token requests start per second.

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
 * keep their order and a burst never exceeds the cap) and then waits for it.
 */
export class RateGate {
  readonly #intervalMs: number;
  #nextAt = -Infinity;

  constructor(
    perSecond: number,
    private readonly now: () => number,
    private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
  ) {
    this.#intervalMs = 1000 / perSecond;
  }

  async wait(signal?: AbortSignal): Promise<void> {
    const now = this.now();
    const slot = Math.max(now, this.#nextAt);
    this.#nextAt = slot + this.#intervalMs;
    if (slot > now) await this.sleep(slot - now, signal);
  }
}
