// The daemon reads every profile's state and secrets at start, on SIGHUP and for --once: a few at a time, each
// once. Ten thousand read at once held every read on the heap together and crashed the daemon at start.
import { PassThrough } from 'node:stream';
import type * as Session from '../../src/cli/session.js';
import { beforeAll, describe, expect, test, vi } from 'vitest';
import { createFactory } from '../../src/cli/factory.js';
import type { CommandContext } from '../../src/cli/context.js';
import { resolveSettings, type SettingInputs } from '../../src/config.js';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { newHome, type Home } from '../helpers/onboarding.js';

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

const { loadProfiles } = await import('../../src/cli/commands/daemon.js');

const PROFILES = 60;
let home: Home;
const names = Array.from({ length: PROFILES }, (_, i) => `p${String(i).padStart(3, '0')}`);

beforeAll(async () => {
  home = newHome();
  const secrets = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
  const state = openProfileStore(home.configDir);
  for (const name of names) {
    await secrets.set(name, { app_key: `ak-${name}`, app_secret: `as-${name}`, refresh_token: `rt-${name}` });
    await state.update(name, () => ({ tokenUrl: 'http://127.0.0.1:9/oauth2/token' }));
  }
});

function context(): CommandContext {
  const inputs: SettingInputs = {
    flags: {},
    env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey },
    dotenv: {},
  };
  const io = { stdout: new PassThrough(), stderr: new PassThrough() };
  return { settings: resolveSettings(inputs), inputs, json: false, io, stdin: new PassThrough(), factory: createFactory({ env: () => ({ ...inputs.env }), io }) };
}

describe('loading the stored profiles', () => {
  test('reads at most 16 profiles at once, each once, and loads every one', async () => {
    let open!: () => void;
    reads.gate = new Promise<void>((resolve) => (open = resolve));
    reads.most = 0;
    reads.names = [];
    const loading = loadProfiles(context(), openProfileStore(home.configDir), undefined);
    // Long enough for every load the loader started to reach its read of the secrets.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const heldAtOnce = reads.inFlight;
    open();
    const loaded = await loading;
    expect(heldAtOnce).toBeGreaterThan(0);
    expect(reads.most).toBeLessThanOrEqual(16);
    expect(loaded.map((entry) => entry.name)).toEqual(names);
    expect(loaded.filter((entry) => 'error' in entry)).toEqual([]);
    expect(reads.names.sort()).toEqual(names);
  });
});
