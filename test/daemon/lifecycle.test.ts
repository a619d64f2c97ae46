// Reloading the profiles (SIGHUP) and a bounded shutdown while a renewal is still in flight.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SecretStoreError } from '../../src/credentials/index.js';
import { startDaemon, type DaemonProfile } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, obtainGrant, profileOf, renewalsOf, tempDir } from './helpers.js';

describe('the daemon lifecycle', () => {
  it('reload() adds new profiles, drops removed ones with their token file and series, keeps what it knows of the rest', async () => {
    const emu = await emulator();
    const grants = { a: await obtainGrant(emu), b: await obtainGrant(emu), c: await obtainGrant(emu) };
    let served: (keyof typeof grants)[] = ['a', 'b'];
    const dir = tempDir();
    const daemon = await startDaemon({
      profiles: async (): Promise<DaemonProfile[]> => served.map((name) => profileOf(emu, { name, grant: grants[name] })),
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      schedule: false,
      tokenFile: path.join(dir, '{profile}.token'),
      logger: captureLog().logger,
    });
    try {
      await daemon.sweep();
      expect(existsSync(path.join(dir, 'b.token'))).toBe(true);
      served = ['a', 'c'];
      await daemon.reload();
      expect(daemon.status().profiles.map((p) => p.name)).toEqual(['a', 'c']);
      expect(existsSync(path.join(dir, 'b.token'))).toBe(false);
      expect(await daemon.registry.getSingleMetricAsString('syncauth_renewals_total')).not.toContain('profile="b"');
      const report = await daemon.sweep();
      // a keeps its token (no second renewal); c is new and renews.
      expect(report.profiles).toEqual([
        { profile: 'a', action: 'idle' },
        { profile: 'c', action: 'renewal', renewal: 'renewed' },
      ]);
      expect(renewalsOf(emu, grants.a.refreshToken)).toBe(1);
    } finally {
      await daemon.close();
    }
  });

  it('serves a profile that could not be loaded as not ready, and picks it up on reload', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    let keychainOpen = false;
    const log = captureLog();
    const daemon = await startDaemon({
      profiles: async () => [
        keychainOpen ? profileOf(emu, { name: 'locked', grant }) : { name: 'locked', error: new SecretStoreError('KEYCHAIN_TIMEOUT', 'the keychain did not answer within 3 s') },
      ],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      schedule: false,
      logger: log.logger,
    });
    try {
      expect((await daemon.sweep()).profiles).toEqual([{ profile: 'locked', action: 'parked' }]);
      expect(daemon.status().profiles[0]).toMatchObject({ ready: false, reason: 'could not be loaded (KEYCHAIN_TIMEOUT): the keychain did not answer within 3 s' });
      keychainOpen = true;
      await daemon.reload();
      expect((await daemon.sweep()).profiles).toEqual([{ profile: 'locked', action: 'renewal', renewal: 'renewed' }]);
      expect(daemon.status()).toMatchObject({ ready: true });
    } finally {
      await daemon.close();
    }
  });

  it('close() waits for in-flight work only so long, then cancels it', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    emu.setFaults([{ route: 'token', latencyMs: 10_000 }]);
    const daemon = await startDaemon({
      profiles: [profileOf(emu, { name: 'slow', grant })],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      schedule: false,
      shutdownTimeoutMs: 300,
      logger: captureLog().logger,
    });
    const sweeping = daemon.sweep();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    await daemon.close();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect((await sweeping).profiles[0]).toMatchObject({ action: 'renewal', renewal: 'failed' });
    // A sweep after close does nothing.
    expect((await daemon.sweep()).profiles).toEqual([]);
  });

  it('node-cron drives the sweeps on its schedule', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const daemon = await startDaemon({
      profiles: [profileOf(emu, { name: 'cron', grant })],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      schedule: '* * * * * *',
      sweepOnStart: false,
      logger: captureLog().logger,
    });
    try {
      expect(daemon.status().profiles[0]?.lastRenewal).toBeUndefined();
      const deadline = Date.now() + 3_000;
      while (daemon.status().profiles[0]?.lastRenewal === undefined && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(daemon.status().profiles[0]?.lastRenewal?.outcome).toBe('renewed');
    } finally {
      await daemon.close();
    }
  });
});
