// The daemon reads every profile's state and secrets at start, on SIGHUP and for --once: a few at a time, each
// once. Ten thousand read at once held every read on the heap together and crashed the daemon at start.
import type * as Session from '../../src/cli/session.js';
import { beforeAll, describe, expect, test, vi } from 'vitest';
import { resolveSettings } from '../../src/config.js';
import { openProfileStore } from '../../src/profile/index.js';
import type { Home } from '../helpers/onboarding.js';
import { fileStoreContext, storedProfilesHome } from './stored-profiles-home.js';
import { waitFor } from '../helpers/wait.js';

const reads = vi.hoisted(() => ({ inFlight: 0, most: 0, names: [] as string[], gate: Promise.resolve() }));

// Each read of a profile's secrets is held at a gate, so every read the loader starts is under way together.
vi.mock('../../src/cli/session.js', async (importOriginal) => {
  const real = await importOriginal<typeof Session>();
  return {
    ...real,
    readSecrets: async (...args: Parameters<typeof real.readSecrets>) => {
      reads.inFlight += 1;
      reads.most = Math.max(reads.most, reads.inFlight);
      reads.names.push(args[0].name);
      try {
        await reads.gate;
        return await real.readSecrets(...args);
      } finally {
        reads.inFlight -= 1;
      }
    },
  };
});

const { daemon, loadProfiles } = await import('../../src/cli/commands/daemon.js');

const PROFILES = 60;
let home: Home;
let names: string[];

beforeAll(async () => {
  ({ home, names } = await storedProfilesHome(PROFILES));
});

describe('loading the stored profiles', () => {
  test('reads at most 16 profiles at once, each once, and loads every one', async () => {
    let open!: () => void;
    reads.gate = new Promise<void>((resolve) => (open = resolve));
    reads.most = 0;
    reads.names = [];
    const loading = loadProfiles(fileStoreContext(home), openProfileStore(home.configDir), undefined);
    // Until the loader has as many reads under way as it may (60 profiles, 16 at a time): held at the gate.
    await waitFor('16 reads of secrets held at once', () => (reads.inFlight >= 16 ? true : undefined));
    const heldAtOnce = reads.inFlight;
    open();
    const loaded = await loading;
    expect(heldAtOnce).toBe(16);
    expect(reads.most).toBeLessThanOrEqual(16);
    expect(loaded.map((entry) => entry.name)).toEqual(names);
    expect(loaded.filter((entry) => 'error' in entry)).toEqual([]);
    expect(reads.names.sort()).toEqual(names);
  });
});

describe('starting the daemon', () => {
  test('reads each profile once: the profiles loaded for the start\'s checks are those it serves', async () => {
    reads.gate = Promise.resolve();
    reads.names = [];
    const base = fileStoreContext(home);
    const inputs = { ...base.inputs, env: { ...base.inputs.env, SYNCAUTH_LOG_LEVEL: 'silent' } };
    // One pass over profiles whose token endpoint no one answers: none gets a token, so the pass fails, but
    // only after the start has loaded them all and the sweep has visited every one.
    await expect(daemon({ ...base, inputs, settings: resolveSettings(inputs) }, { once: true })).rejects.toThrow(/not fresh/);
    expect(reads.names.sort()).toEqual(names);
  });
});
