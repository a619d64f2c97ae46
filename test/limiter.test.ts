// src/limiter.ts on its own, in-process: how many run at once (Semaphore), how many start per second (RateGate,
// on vitest's fake clock, so no bound depends on the machine's speed), and visiting a list a few at a time
// (eachBounded). The daemon and the keychain store lean on these; their own tests see them only through load.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { eachBounded, RateGate, Semaphore } from '../src/limiter.js';

/** A promise settled from outside, to hold a piece of work open until the test lets it end. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every promise callback that is ready run (a few turns of the microtask queue). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i += 1) await Promise.resolve();
}

describe('Semaphore', () => {
  it('runs at most `size` at once and starts the rest in the order they asked, each as a slot frees', async () => {
    const semaphore = new Semaphore(2);
    const gates = Array.from({ length: 5 }, () => deferred());
    const started: number[] = [];
    let running = 0;
    let most = 0;
    const runs = gates.map((gate, index) =>
      semaphore.run(async () => {
        started.push(index);
        running += 1;
        most = Math.max(most, running);
        await gate.promise;
        running -= 1;
        return index;
      }),
    );
    await settle();
    expect(started).toEqual([0, 1]);
    gates[1]?.resolve();
    await settle();
    expect(started).toEqual([0, 1, 2]);
    gates[0]?.resolve();
    await settle();
    expect(started).toEqual([0, 1, 2, 3]);
    for (const gate of gates) gate.resolve();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
  });

  it('hands a freed slot to the one waiting: one asking as the slot is handed over waits behind it', async () => {
    const semaphore = new Semaphore(1);
    const first = deferred();
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const work = (name: string, gate?: Promise<void>) => async (): Promise<void> => {
      running += 1;
      most = Math.max(most, running);
      order.push(name);
      await gate;
      await settle();
      running -= 1;
    };
    const held = semaphore.run(work('first', first.promise));
    const waiting = semaphore.run(work('waiting'));
    // Asks as soon as the first is done, when its slot has just been handed over and the waiter not yet resumed.
    const newcomer = held.then(() => semaphore.run(work('newcomer')));
    await settle();
    first.resolve();
    await Promise.all([held, waiting, newcomer]);
    expect(order).toEqual(['first', 'waiting', 'newcomer']);
    expect(most).toBe(1);
  });

  it('frees the slot of a function that fails, and passes its failure on', async () => {
    const semaphore = new Semaphore(1);
    const failure = new Error('boom');
    await expect(semaphore.run(async () => Promise.reject(failure))).rejects.toBe(failure);
    await expect(semaphore.run(() => Promise.resolve('after'))).resolves.toBe('after');
  });
});

describe('RateGate', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal?.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          reject(signal.reason);
        },
        { once: true },
      );
    });

  /** Starts `count` waits at once; the fake clock's time at which each passed, relative to the start. */
  function burst(gate: RateGate, count: number): number[] {
    const start = Date.now();
    const passed: number[] = [];
    for (let i = 0; i < count; i += 1) void gate.wait().then(() => (passed[i] = Date.now() - start));
    return passed;
  }

  it('lets a burst through 1/rate seconds apart, in the order it asked', async () => {
    const gate = new RateGate(4, () => Date.now(), sleep);
    const passed = burst(gate, 4);
    await vi.advanceTimersByTimeAsync(0);
    expect(passed).toEqual([0]);
    await vi.advanceTimersByTimeAsync(249);
    expect(passed).toEqual([0]);
    await vi.advanceTimersByTimeAsync(1);
    expect(passed).toEqual([0, 250]);
    await vi.advanceTimersByTimeAsync(500);
    expect(passed).toEqual([0, 250, 500, 750]);
  });

  it('keeps no credit from idle time: after a pause the cap holds from the next start', async () => {
    const gate = new RateGate(2, () => Date.now(), sleep);
    await vi.advanceTimersByTimeAsync(0);
    await gate.wait();
    await vi.advanceTimersByTimeAsync(60_000);
    const passed = burst(gate, 3);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(passed).toEqual([0, 500, 1_000]);
  });

  it('counts the callers that waited, the waits given and those waiting now; a caller with a free slot is not counted', async () => {
    const gate = new RateGate(4, () => Date.now(), sleep);
    expect(gate.stats).toEqual({ perSecond: 4, delayed: 0, delayMs: 0, waiting: 0 });
    const passed = burst(gate, 3);
    await vi.advanceTimersByTimeAsync(0);
    // The first passed at once; the others were given 250 and 500 ms.
    expect(gate.stats).toEqual({ perSecond: 4, delayed: 2, delayMs: 750, waiting: 2 });
    await vi.advanceTimersByTimeAsync(250);
    expect(gate.stats.waiting).toBe(1);
    await vi.advanceTimersByTimeAsync(250);
    expect(passed).toEqual([0, 250, 500]);
    expect(gate.stats).toEqual({ perSecond: 4, delayed: 2, delayMs: 750, waiting: 0 });
    gate.setRate(0.5);
    expect(gate.stats.perSecond).toBe(0.5);
  });

  it('stops a wait when its signal aborts, and gives the wait the signal', async () => {
    const seen: (AbortSignal | undefined)[] = [];
    const gate = new RateGate(1, () => Date.now(), (ms, signal) => {
      seen.push(signal);
      return sleep(ms, signal);
    });
    await gate.wait();
    const controller = new AbortController();
    const waiting = gate.wait(controller.signal);
    const outcome = waiting.then(() => 'passed', (error: unknown) => error);
    await vi.advanceTimersByTimeAsync(100);
    controller.abort(new Error('stopping'));
    expect(await outcome).toEqual(new Error('stopping'));
    expect(seen).toEqual([controller.signal]);
  });
});

describe('eachBounded', () => {
  it('visits every item in order, at most `width` at a time', async () => {
    const items = Array.from({ length: 7 }, (_, i) => `p${i}`);
    const gates = new Map(items.map((item) => [item, deferred()]));
    const started: string[] = [];
    let running = 0;
    let most = 0;
    const done = eachBounded(items, 3, async (item, index) => {
      expect(items[index]).toBe(item);
      started.push(item);
      running += 1;
      most = Math.max(most, running);
      await gates.get(item)?.promise;
      running -= 1;
    });
    await settle();
    expect(started).toEqual(['p0', 'p1', 'p2']);
    gates.get('p1')?.resolve();
    await settle();
    expect(started).toEqual(['p0', 'p1', 'p2', 'p3']);
    for (const gate of gates.values()) gate.resolve();
    await done;
    expect(started).toEqual(items);
    expect(most).toBe(3);
  });

  it('starts nothing after a call fails, waits for those under way, and rejects with the first failure', async () => {
    const items = [0, 1, 2, 3, 4, 5];
    const gates = items.map(() => deferred());
    const started: number[] = [];
    const ended: number[] = [];
    const done = eachBounded(items, 2, async (item) => {
      started.push(item);
      try {
        await gates[item]?.promise;
      } finally {
        ended.push(item);
      }
    });
    const outcome = done.then(() => 'resolved', (error: unknown) => error);
    await settle();
    const first = new Error('first');
    gates[0]?.reject(first);
    await settle();
    gates[1]?.reject(new Error('second'));
    await settle();
    expect(started).toEqual([0, 1]);
    expect(await outcome).toBe(first);
    expect(ended).toEqual([0, 1]);
  });

  it('waits for a call still under way before it rejects', async () => {
    const slow = deferred();
    let settled = false;
    const done = eachBounded([0, 1], 2, async (item) => {
      if (item === 0) throw new Error('fails at once');
      await slow.promise;
    });
    void done.catch(() => undefined).then(() => (settled = true));
    await settle();
    expect(settled).toBe(false);
    slow.resolve();
    await expect(done).rejects.toThrow('fails at once');
  });

  it('does nothing for no items, and runs one at a time for a width below one', async () => {
    const seen: number[] = [];
    await eachBounded([], 4, async () => {
      seen.push(-1);
    });
    expect(seen).toEqual([]);
    let running = 0;
    await eachBounded([1, 2, 3], 0, async (item) => {
      running += 1;
      expect(running).toBe(1);
      seen.push(item);
      await Promise.resolve();
      running -= 1;
    });
    expect(seen).toEqual([1, 2, 3]);
  });
});
