// A daemon that restarts and keeps the token its file still holds must not forget what it owed the connector.
// Found by the real-process soak (soak/real.mjs, seed 1): replica a reconciled and was then stopped; replica b,
// which was watching for a to renew, was killed and restarted; the restarted b kept its still-valid token but
// had lost the watch with its memory, so the connector held an expired token until b's own renewal came round.
// In production that gap is up to a lifetime less the margin. The same loss, without replicas: a reconcile that
// failed (the service down) and was to be retried is forgotten by a restart, and `--once` run again by cron
// reports the profile fresh while the connector never got the token.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { startDaemon, type DaemonGrant, type DaemonOptions, type RunningDaemon } from '../../src/daemon/index.js';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { memoryCoordinator, type MemoryRedis } from '../helpers/replicas.mjs';
import { captureLog, connectorsNamed, emulator, fakeClock, obtainGrant, profileOf, seededRandom, tempDir } from '../daemon/helpers.js';

const LIFETIME_S = 600;
const MARGIN_MS = 60_000;

/** The access token the connector `conn-p1` holds, and its expiry (0 when none). */
function connectorToken(emu: RunningEmulator): { token: string | undefined; expiresAt: number } {
  const token = connectorsNamed(emu, 'conn-p1')[0]?.config.token as string | undefined;
  return { token, expiresAt: (token && emu.state.accessTokens.get(token)?.expiresAt) || 0 };
}

describe('a daemon restarted with a still-valid token file', () => {
  async function setup() {
    const clock = fakeClock();
    const emu = await emulator({ tokenLifetimeSeconds: LIFETIME_S, now: clock.now });
    const grant: DaemonGrant = await obtainGrant(emu);
    const running: RunningDaemon[] = [];
    /** One replica's daemon: its own config dir and token file, kept across its restarts. */
    const replica = (id: string, extra: Partial<DaemonOptions> = {}) => {
      const configDir = tempDir();
      const tokenFile = path.join(tempDir(), '{profile}.token');
      return {
        tokenFile: tokenFile.replace('{profile}', 'p1'),
        start: async (): Promise<RunningDaemon> => {
          const daemon = await startDaemon({
            profiles: [profileOf(emu, { name: 'p1', grant, reconcile: true })],
            profileStore: openProfileStore(configDir),
            tokenFile,
            renewMarginMs: MARGIN_MS,
            schedule: false,
            logger: captureLog().logger,
            now: clock.now,
            monotonicNow: clock.now,
            random: seededRandom(id.charCodeAt(0)),
            backoff: { baseMs: 500 },
            serviceRetry: { retries: 0 },
            ...extra,
          });
          running.push(daemon);
          return daemon;
        },
      };
    };
    return { clock, emu, replica, close: () => Promise.all(running.map((d) => d.close())) };
  }

  it('gives the connector the token whose reconcile the previous run had not finished', async () => {
    const w = await setup();
    try {
      const only = w.replica('a');
      let daemon = await only.start();
      await daemon.sweep();
      const first = connectorToken(w.emu).token;
      // Compared, never printed: a failure message must not carry a token.
      expect(first === readFileSync(only.tokenFile, 'utf8')).toBe(true);

      // Inside the margin the token is renewed, but the service refuses the reconcile; the daemon stops before
      // its retry.
      w.clock.advance(LIFETIME_S * 1000 - MARGIN_MS + 10_000);
      w.emu.setFaults([{ route: 'sources', status: 503 }]);
      await daemon.sweep();
      const renewed = readFileSync(only.tokenFile, 'utf8');
      expect(renewed === first).toBe(false);
      expect(connectorToken(w.emu).token === first, 'the connector was given the token the service refused').toBe(true);
      await daemon.close();

      // Started again with the service back: the token in the file is kept, and the connector is given it.
      w.emu.setFaults([]);
      daemon = await only.start();
      w.clock.advance(1_000);
      await daemon.sweep();
      expect(readFileSync(only.tokenFile, 'utf8') === renewed, 'the restarted daemon did not keep the token in its file').toBe(true);
      expect(connectorToken(w.emu).token === renewed, 'the connector was left with the token that expires first').toBe(true);
      expect(connectorsNamed(w.emu, 'conn-p1')).toHaveLength(1);
    } finally {
      await w.close();
    }
  });

  it('with replicas, still takes over the connector from a replica that stopped', async () => {
    const w = await setup();
    const shared: MemoryRedis = { now: w.clock.now, records: new Map(), leases: new Map() };
    const coordinated = (id: string) => w.replica(id, { coordinator: memoryCoordinator(shared, id, CoordinatorUnavailableError, w.clock.now) });
    try {
      const a = coordinated('a');
      const b = coordinated('b');
      await (await a.start()).sweep();
      const fromA = connectorToken(w.emu);
      w.clock.advance(120_000);
      const firstB = await b.start();
      await firstB.sweep();
      // b renewed its own token and found the connector's fresh: it watches for a to give it the next one.
      expect(connectorToken(w.emu).token === fromA.token).toBe(true);
      const ownB = readFileSync(b.tokenFile, 'utf8');

      // Now a stops for good, and b is restarted: it keeps its token file and must still take over.
      await firstB.close();
      w.clock.advance(10_000);
      const restarted = await b.start();
      for (let step = 0; step < (2 * LIFETIME_S) / 10; step++) {
        await restarted.sweep();
        expect(connectorToken(w.emu).expiresAt, `the connector's token expired at +${step * 10} s after the restart`).toBeGreaterThan(w.clock.now());
        w.clock.advance(10_000);
      }
      expect(readFileSync(b.tokenFile, 'utf8') === ownB, 'b never renewed after its restart').toBe(false);
      expect(connectorsNamed(w.emu, 'conn-p1')).toHaveLength(1);
    } finally {
      await w.close();
    }
  });
});
