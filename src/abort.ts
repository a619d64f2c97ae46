// A signal that aborts when any of several does, and lets go of them when the work is done.
//
// AbortSignal.any would do the first half, but on Node 20 each signal it makes leaves an entry (a WeakRef) on
// every source signal that is never removed while the source lives. The daemon's shutdown signal lives as
// long as the process and joins every renewal, so that was one entry per renewal for ever: the year soak
// (soak/virtual.mjs) saw the heap grow by one WeakRef per renewal.
//
// Each link holds one listener on each source until it is released, so a source shared by the work in flight
// (the shutdown signal, one link per renewal running) has as many listeners as renewals run at once. That is
// the design, not a leak: Node's warning past ten listeners is turned off for the sources linked here.
import { setMaxListeners } from 'node:events';

export interface LinkedSignal {
  readonly signal: AbortSignal;
  /** Stops listening to the sources; the linked signal keeps whatever state it has. */
  release(): void;
}

export function linkSignals(...sources: AbortSignal[]): LinkedSignal {
  const controller = new AbortController();
  const listeners: [AbortSignal, () => void][] = [];
  const release = (): void => {
    for (const [source, listener] of listeners.splice(0)) source.removeEventListener('abort', listener);
  };
  for (const source of sources) {
    if (source.aborted) {
      controller.abort(source.reason);
      release();
      break;
    }
    const listener = (): void => {
      controller.abort(source.reason);
      release();
    };
    setMaxListeners(0, source);
    source.addEventListener('abort', listener, { once: true });
    listeners.push([source, listener]);
  }
  return { signal: controller.signal, release };
}
