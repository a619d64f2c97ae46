// The record a setup leaves while it writes (src/sync/setup-journal.ts), in-process: what the next command does
// with it when the setup is still running, finished, or left something unreadable.
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { recoverInterruptedSetup, withSetupLock, writeJournal } from '../../src/sync/setup-journal.js';
import { recordProfileChoices } from '../../src/profile/config-file.js';
import { encodeAccessToken } from '../../src/sync/token-cache.js';
import { runCli, tempDir } from '../helpers/cli.js';

function stores() {
  const configDir = path.join(tempDir('syncauth-recover-'), 'config');
  const profiles = openProfileStore(configDir);
  const secrets = openSecretStore({ kind: 'file', configDir, storeKey: 'recover-test-store-key-0123456789', env: {} });
  return { configDir, profiles, secrets };
}

describe('recoverInterruptedSetup', () => {
  it('no record: nothing to do, and nothing read from the secret store', async () => {
    const { profiles } = stores();
    const lines: string[] = [];
    const untouchable = { get: () => Promise.reject(new Error('must not be read')) } as never;
    expect(await recoverInterruptedSetup(profiles, untouchable, 'docs', (l) => lines.push(l))).toBe('none');
    expect(lines).toEqual([]);
  });

  it('a setup still running (its lock held by a live process) is waited for, never undone under its feet', async () => {
    const { profiles, secrets } = stores();
    const lines: string[] = [];
    let recovered: Promise<string> | undefined;
    await withSetupLock(profiles, 'docs', async () => {
      await writeJournal(profiles, 'docs', { accessTokenExpiresAt: Date.now() + 3_600_000, hadState: false, state: { remoteUrl: 'dropbox://data' } });
      recovered = recoverInterruptedSetup(profiles, secrets, 'docs', (l) => lines.push(l));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(lines).toEqual([]);
      // The setup ends its writes: record removed before the lock is released.
      const { rm } = await import('node:fs/promises');
      await rm(path.join(profiles.dir, 'docs.setup-pending'));
    });
    expect(await recovered).toBe('none');
    expect(lines).toEqual([]);
  });

  it('an unreadable record is removed with a line saying so; the profile is left alone', async () => {
    const { profiles, secrets } = stores();
    mkdirSync(profiles.dir, { recursive: true });
    const file = path.join(profiles.dir, 'docs.setup-pending');
    writeFileSync(file, '{"version": 9}');
    const lines: string[] = [];
    expect(await recoverInterruptedSetup(profiles, secrets, 'docs', (l) => lines.push(l))).toBe('none');
    expect(existsSync(file)).toBe(false);
    expect(lines[0]).toContain('removed an unreadable record of an interrupted setup');
  });
});

describe('`syncauth status` recovering interrupted setups', () => {
  it("checks each profile's setup in the store config.json records for it, not one store for all", async () => {
    const cwd = tempDir('syncauth-recover-status-');
    const configDir = path.join(cwd, 'config');
    const storeKey = 'recover-test-store-key-0123456789';
    const profiles = openProfileStore(configDir);
    // "filed" keeps its secrets in the encrypted file; its setup stopped after storing the new grant.
    await recordProfileChoices(configDir, 'filed', { store: 'file' });
    const grant = { appKey: 'app-key-filed', refreshToken: 'refresh-token-filed' };
    const expiresAt = Date.now() + 3_600_000;
    const secrets = openSecretStore({ kind: 'file', configDir, storeKey, env: {} });
    await secrets.set('filed', { app_key: grant.appKey, refresh_token: grant.refreshToken, access_token: encodeAccessToken({ accessToken: 'sl.filed', expiresAt, renewedAt: Date.now() }, grant) });
    await writeJournal(profiles, 'filed', { accessTokenExpiresAt: expiresAt, hadState: false, state: { remoteUrl: 'dropbox://data' } });
    // "enved" reads its secrets from the environment, which holds no grant: its setup stopped before storing one.
    await recordProfileChoices(configDir, 'enved', { store: 'env' });
    await writeJournal(profiles, 'enved', { accessTokenExpiresAt: expiresAt, hadState: true, state: { remoteUrl: 'dropbox://other' } });

    // No SYNCAUTH_STORE: each profile's store is the one recorded for it (the default, the keychain, is out of reach here).
    const run = await runCli(['status'], { cwd, env: { SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE_KEY: storeKey } });
    expect(run.stderr).not.toMatch(/could not be checked/);
    expect(run.stderr).toMatch(/profile "filed": a setup stopped after storing the new grant; the profile is kept as unfinished/);
    expect(run.stderr).toMatch(/profile "enved": a setup stopped before its grant was stored; it was undone and the profile is as it was before/);
    expect(existsSync(path.join(profiles.dir, 'filed.setup-pending'))).toBe(false);
    expect(existsSync(path.join(profiles.dir, 'enved.setup-pending'))).toBe(false);
    expect((await profiles.read('filed'))?.remoteUrl).toBe('dropbox://data');
  }, 30_000);
});
