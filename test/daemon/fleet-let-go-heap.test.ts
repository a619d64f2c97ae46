// What a fleet replica lets go of leaves its heap: a stored profile another replica serves is loaded for the
// start's checks and then held by nothing, not even through the profiles this replica keeps (each kept profile's
// grant store once held, through a closure of the load, the array of every profile loaded with it, their grants
// included). Profiles made through the package's own stores (as setup makes them), a daemon that sees two other
// live members; the loaded profiles watched through weak references across full collections.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { ProfileEntry } from '../../src/daemon/types.js';
import { startDaemon } from '../../src/index.js';
import { captureLog } from './helpers.js';
import { storedFleet } from './stored-fleet.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Full collections, each after the job that made or read a weak reference has ended (which keeps its target). */
async function collect(): Promise<void> {
  for (let i = 0; i < 3; i += 1) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
}

describe('a fleet replica holds nothing of a profile it lets go', () => {
  it('leaves no loaded profile of another replica reachable, at start and after a reload, while it keeps those it serves', async () => {
    const t = Date.parse('2030-01-01T00:00:00Z');
    const { names, stored, options } = await storedFleet('h', () => t);
    // Each profile the daemon is handed, watched without being held.
    const loaded = new Map<string, WeakRef<ProfileEntry>>();
    const profiles = async (): Promise<ProfileEntry[]> => {
      const entries = await stored.profiles();
      for (const entry of entries) loaded.set(entry.name, new WeakRef(entry));
      return entries;
    };
    const daemon = await startDaemon({
      ...options,
      profiles,
      logger: captureLog('info').logger,
      monotonicNow: () => 0,
      // This replica's part of the fleet's cap on token requests would space the sweep's renewals: they wait for nothing.
      sleep: async () => {},
    });
    try {
      const served = new Set(daemon.status().profiles.map((p) => p.name));
      expect(daemon.status().fleet).toMatchObject({ members: 3, shared: 24 });
      expect(served.size).toBeGreaterThan(2);
      expect(served.size).toBeLessThan(20);
      expect(loaded.size).toBe(24);
      await collect();
      const reachable = names.filter((name) => loaded.get(name)?.deref() !== undefined);
      expect(reachable).toEqual(names.filter((name) => served.has(name)));
      // A reload (SIGHUP) loads every profile again, and lets go of the same ones.
      loaded.clear();
      await daemon.reload();
      expect(new Set(daemon.status().profiles.map((p) => p.name))).toEqual(served);
      expect(loaded.size).toBe(24);
      await collect();
      expect(names.filter((name) => loaded.get(name)?.deref() !== undefined)).toEqual(names.filter((name) => served.has(name)));
      // Nor a series of the metrics: a sweep renews (or fails to renew) what it serves, and only that is labelled.
      await daemon.sweep();
      const exposition = await daemon.registry.metrics();
      const labelled = names.filter((name) => exposition.includes(`profile="${name}"`));
      expect(labelled).toEqual(names.filter((name) => served.has(name)));
    } finally {
      await daemon.close();
    }
  }, 60_000);
});
