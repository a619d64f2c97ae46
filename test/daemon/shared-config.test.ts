// Two daemons over one config dir, each publishing its own token file (and, once, a `token` beside them): when
// one renews, the other must not judge itself fresh by the later expiry in the shared state while the token it
// publishes runs out. With a store that keeps the access token it takes the other's; with the env store, which
// keeps none, it renews its own. In process, on one hand-moved clock shared with the emulator.
import { existsSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDaemon, type DaemonGrant, type DaemonProfile, type RunningDaemon } from '../../src/daemon/index.js';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { renewHoldingLock } from '../../src/sync/renew.js';
import { accessTokenKeeper, accessTokenReader } from '../../src/sync/token-cache.js';
import { captureLog, connectorsNamed, emulator, fakeClock, obtainGrant, profileOf, renewalsOf, seededRandom, tempDir } from './helpers.js';

const LIFETIME_S = 20;
const MARGIN_MS = 8_000;
const SIM_S = 200;
const NAME = 'shared';

async function twoDaemons(options: { keepsAccessToken: boolean }) {
  const clock = fakeClock();
  const emu = await emulator({ tokenLifetimeSeconds: LIFETIME_S, now: clock.now });
  const grant: DaemonGrant = await obtainGrant(emu);
  const dir = tempDir();
  const configDir = path.join(dir, 'config');
  const secrets = openSecretStore({ kind: 'file', configDir, storeKey: randomBytes(24).toString('base64url'), env: {} });
  const keeps = (): Partial<DaemonProfile> =>
    options.keepsAccessToken
      ? {
          storeAccessToken: (tokens, held) => accessTokenKeeper(secrets, NAME, held.appKey, clock.now)?.(tokens) ?? Promise.resolve(),
          readAccessToken: (held) => accessTokenReader(secrets, NAME)?.(held) ?? Promise.resolve(undefined),
        }
      : {};
  const daemons: { name: string; daemon: RunningDaemon; tokenFile: string }[] = [];
  for (const [i, name] of ['a', 'b'].entries()) {
    const tokenFile = path.join(dir, `${name}.token`);
    const daemon = await startDaemon({
      profiles: [{ ...profileOf(emu, { name: NAME, grant, reconcile: true }), readGrant: async () => grant, ...keeps() }],
      // Each process its own handle on the one directory, as two processes have.
      profileStore: openProfileStore(configDir),
      renewMarginMs: MARGIN_MS,
      schedule: false,
      tokenFile,
      logger: captureLog().logger,
      now: clock.now,
      random: seededRandom(7 + i),
      sleep: clock.sleep,
      backoff: { baseMs: 500 },
      serviceRetry: { retries: 0 },
    });
    daemons.push({ name, daemon, tokenFile });
  }
  /** What `token` beside them does: renew under the profile's lock and keep the token in the store. */
  const tokenBeside = (): Promise<unknown> =>
    openProfileStore(configDir).withLock(NAME, () =>
      renewHoldingLock({
        profiles: openProfileStore(configDir),
        name: NAME,
        app: { appKey: grant.appKey, appSecret: grant.appSecret },
        refreshToken: grant.refreshToken,
        tokenUrl: emu.tokenUrl,
        now: clock.now,
        ...(options.keepsAccessToken ? { onNewAccessToken: accessTokenKeeper(secrets, NAME, grant.appKey, clock.now) } : {}),
      }),
    );
  const close = async (): Promise<void> => {
    for (const { daemon } of daemons) await daemon.close();
  };
  return { clock, emu, grant, daemons, tokenBeside, close };
}

/** Sweeps both at once every simulated second; after each, each file must hold a token with more than the margin left. */
async function run(world: Awaited<ReturnType<typeof twoDaemons>>) {
  const { clock, emu, daemons, tokenBeside } = world;
  const short: string[] = [];
  let staleConnector = 0;
  for (let step = 0; step < SIM_S; step++) {
    // Once, a `token --force` renews beside them, in the middle of a lifetime.
    if (step === 57) await tokenBeside();
    await Promise.all(daemons.map(({ daemon }) => daemon.sweep()));
    const now = clock.now();
    for (const { name, tokenFile } of daemons) {
      const issued = existsSync(tokenFile) ? emu.state.accessTokens.get(readFileSync(tokenFile, 'utf8')) : undefined;
      const left = issued ? issued.expiresAt - now : -1;
      if (left <= MARGIN_MS) short.push(`${step} s: daemon ${name} publishes ${issued ? `a token with ${left} ms left` : 'no token'}`);
    }
    const connector = connectorsNamed(emu, `conn-${NAME}`)[0];
    const held = emu.state.accessTokens.get(String(connector?.config.token));
    if (!held || held.expiresAt <= now) staleConnector += 1;
    clock.advance(1_000);
  }
  return { short, staleConnector, renewals: renewalsOf(emu, world.grant.refreshToken) };
}

describe('two daemons over one config dir', () => {
  it('each keeps publishing a token with more than the margin left, taking the one the other renewed', async () => {
    const world = await twoDaemons({ keepsAccessToken: true });
    try {
      const { short, staleConnector, renewals } = await run(world);
      console.log(`shared store: ${renewals} renewals in ${SIM_S} s of ${LIFETIME_S}-s tokens`);
      expect(short).toEqual([]);
      expect(staleConnector).toBe(0);
      // One renewal per lifetime between them (less the margin and jitter), not one each: they share.
      expect(renewals).toBeLessThanOrEqual(2 + SIM_S / ((LIFETIME_S * 1000 - MARGIN_MS * 1.2) / 1000));
    } finally {
      await world.close();
    }
  });

  it('with a store that keeps no access token (env), each renews its own when its token is due', async () => {
    const world = await twoDaemons({ keepsAccessToken: false });
    try {
      const { short, staleConnector } = await run(world);
      expect(short).toEqual([]);
      expect(staleConnector).toBe(0);
    } finally {
      await world.close();
    }
  });
});
