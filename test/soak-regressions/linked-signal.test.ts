// The signal a renewal runs under: aborted by the lock's loss or the daemon's shutdown, and leaving nothing on
// either once the renewal is done. The shutdown signal lives as long as the daemon, so anything a renewal
// leaves on it is kept for ever (AbortSignal.any did, on Node 20: one WeakRef per renewal, seen as heap growth
// by the year soak).
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { linkSignals } from '../../src/abort.js';

describe('linkSignals', () => {
  it('aborts with the reason of whichever source aborts first', () => {
    const lock = new AbortController();
    const shutdown = new AbortController();
    const linked = linkSignals(lock.signal, shutdown.signal);
    expect(linked.signal.aborted).toBe(false);
    shutdown.abort(new Error('stopping'));
    expect(linked.signal.aborted).toBe(true);
    expect((linked.signal.reason as Error).message).toBe('stopping');
    lock.abort(new Error('lost'));
    expect((linked.signal.reason as Error).message).toBe('stopping');
    expect(getEventListeners(lock.signal, 'abort')).toHaveLength(0);
  });

  it('is aborted at once by a source that already is', () => {
    const done = AbortSignal.abort('already');
    const live = new AbortController();
    const linked = linkSignals(done, live.signal);
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe('already');
    expect(getEventListeners(live.signal, 'abort')).toHaveLength(0);
  });

  it('leaves no listener on a long-lived source after many released links', () => {
    const shutdown = new AbortController();
    for (let i = 0; i < 10_000; i++) {
      const lock = new AbortController();
      const linked = linkSignals(lock.signal, shutdown.signal);
      linked.release();
      expect(getEventListeners(lock.signal, 'abort')).toHaveLength(0);
    }
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
    // Released: a later abort of the source no longer reaches it.
    const linked = linkSignals(shutdown.signal);
    linked.release();
    shutdown.abort();
    expect(linked.signal.aborted).toBe(false);
  });

  // Seen in `npm run bench` (a sweep at concurrency 32): each renewal in flight holds one listener on the
  // daemon's shutdown signal, and past ten Node printed "MaxListenersExceededWarning: Possible EventTarget
  // memory leak detected" on the daemon's stderr. Many links at once are the design, not a leak.
  it('holds many links at once on one source without a leak warning', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const shutdown = new AbortController();
      const links = Array.from({ length: 64 }, () => linkSignals(new AbortController().signal, shutdown.signal));
      expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(64);
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      for (const link of links) link.release();
      expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
      expect(warnings.filter((name) => name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
