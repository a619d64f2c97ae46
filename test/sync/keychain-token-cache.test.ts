// The access-token cache of a keychain profile, on a real Secret Service (gnome-keyring on a private D-Bus
// session): a renewal stores its token in a file sealed under a key the keychain holds, read once per process,
// so neither the daemon's renewals nor its reads of a token another process kept start a keychain child (each
// one a node start-up and a round of gnome-keyring work). Children are counted by the script they run.
import childProcess, { type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { AsyncEntry } from '@napi-rs/keyring';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { loadProfiles } from '../../src/cli/commands/daemon.js';
import type { CommandContext } from '../../src/cli/context.js';
import { createFactory } from '../../src/cli/factory.js';
import { resolveSettings, type SettingInputs } from '../../src/config.js';
import { openSecretStore, type SecretStore } from '../../src/credentials/index.js';
import { KEYCHAIN_CACHE_KEY_ACCOUNT, keychainTokenFileOf } from '../../src/credentials/keychain.js';
import { startDaemon, type DaemonGrant, type DaemonProfile } from '../../src/daemon/index.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { profileAccessToken } from '../../src/sync/access-token.js';
import { decodeAccessToken, encodeAccessToken } from '../../src/sync/token-cache.js';
import { ROOT, runCli, tempDir } from '../helpers/cli.js';
import { runAsOtherUser, sharedDir } from '../helpers/other-user.js';
import { isCI, startSecretService, type Bus } from '../helpers/secret-service.js';
import { captureLog, latestTokenOf, obtainGrant, renewalsOf } from '../daemon/helpers.js';

const started = await startSecretService();
const skip = !started.ok && !isCI();
if (skip) console.warn(`keychain token cache tests skipped (outside CI): ${started.ok ? '' : started.reason}`);

/** Keychain children started in this process since the test began counting; how many ran at once at most. */
let keychainChildren = 0;
let alive = 0;
let mostAlive = 0;
const original = childProcess.spawn;
childProcess.spawn = function (this: unknown, command: string, ...rest: unknown[]): ChildProcess {
  const args = Array.isArray(rest[0]) ? (rest[0] as unknown[]) : [];
  const child = (original as (...a: unknown[]) => ChildProcess).call(this, command, ...rest);
  if (args.some((arg) => typeof arg === 'string' && arg.endsWith('keychain-child.cjs'))) {
    keychainChildren += 1;
    mostAlive = Math.max(mostAlive, (alive += 1));
    child.once('close', () => (alive -= 1));
  }
  return child;
} as typeof childProcess.spawn;
// keychain.ts's `import { spawn } from 'node:child_process'` sees the counting one.
syncBuiltinESMExports();

const entry = (account: string) => new AsyncEntry('syncauth', account, { linux: { store: 'secret-service' } });

describe.skipIf(skip)('the access-token cache of a keychain profile', () => {
  let bus: Bus;
  let emu: RunningEmulator;
  let configDir: string;
  let grant: DaemonGrant;
  let env: Record<string, string>;
  const store = (): SecretStore => openSecretStore({ kind: 'keychain', configDir, env, timeoutMs: 10_000 });
  const file = (profile: string) => keychainTokenFileOf(configDir, profile);

  /** A profile whose grant is in the keychain (as setup stores it) and whose state names the emulator. */
  async function keychainProfile(name: string, withGrant: DaemonGrant = grant): Promise<void> {
    await store().set(name, { app_key: withGrant.appKey, app_secret: withGrant.appSecret, refresh_token: withGrant.refreshToken });
    await openProfileStore(configDir).update(name, () => ({ tokenUrl: emu.tokenUrl, dropboxApiUrl: emu.apiUrl }));
  }

  beforeAll(async () => {
    if (!started.ok) throw new Error(`a Secret Service is required in CI and could not be started: ${started.reason}`);
    bus = started.bus;
    emu = await startEmulator({ autoApprove: true, tokenLifetimeSeconds: 14_400 });
    configDir = path.join(tempDir('syncauth-keychain-cache-'), 'config');
    grant = await obtainGrant(emu);
    env = { PATH: process.env.PATH ?? '/usr/bin:/bin', SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'keychain', DBUS_SESSION_BUS_ADDRESS: bus.address };
    // The Secret Service the AsyncEntry of these tests talks to.
    process.env.DBUS_SESSION_BUS_ADDRESS = bus.address;
  });

  afterAll(async () => {
    await emu?.close();
    if (started.ok) await started.bus.stop();
  });

  test('renewals of a keychain profile in the daemon start no keychain child: the token goes to a sealed file and is read back from it', async () => {
    await keychainProfile('daemon');
    const inputs: SettingInputs = { flags: {}, env, dotenv: {} };
    const io = { stdout: new PassThrough(), stderr: new PassThrough() };
    const context: CommandContext = {
      settings: resolveSettings(inputs), inputs, json: false, io, stdin: new PassThrough(),
      factory: createFactory({ env: () => ({ ...env }), io }),
    };
    const profileStore = openProfileStore(configDir);
    const loaded = await loadProfiles(context, profileStore, ['daemon']);
    const profile = loaded[0] as DaemonProfile;
    expect(profile.storeAccessToken).toBeDefined();

    // The first token ever stored makes the key, in one child; a keychain that holds one already needs none.
    const keyMade = (await entry(KEYCHAIN_CACHE_KEY_ACCOUNT).getPassword()) === null ? 1 : 0;
    keychainChildren = 0;
    const log = captureLog('info');
    // A margin longer than the tokens live: every sweep renews.
    const daemon = await startDaemon({ profiles: [profile], profileStore, renewMarginMs: 20_000_000, schedule: false, concurrency: 1, logger: log.logger });
    try {
      const before = renewalsOf(emu, grant.refreshToken);
      await daemon.sweep();
      expect(keychainChildren).toBe(keyMade);
      keychainChildren = 0;
      for (let i = 0; i < 3; i += 1) await daemon.sweep();
      expect(renewalsOf(emu, grant.refreshToken) - before).toBe(4);
      // Another process's token, as the daemon reads it before renewing a profile it publishes.
      const kept = await profile.readAccessToken?.(grant);
      expect(kept?.accessToken).toBe(latestTokenOf(emu, grant.refreshToken)?.token);
    } finally {
      await daemon.close();
    }
    expect(log.lines.filter((line) => /token\.unshared/.test(line))).toEqual([]);
    expect(keychainChildren).toBe(0);
    // What it kept is what any process reads: the sealed file, not a keychain entry.
    expect(existsSync(file('daemon'))).toBe(true);
    expect(await entry('daemon:access_token').getPassword()).toBeNull();
    const stored = decodeAccessToken((await store().get('daemon')).access_token, grant);
    expect(stored?.accessToken).toBe(latestTokenOf(emu, grant.refreshToken)?.token);
  });

  test('`token` reuses across processes the token another process renewed, from a 0600 file in a 0700 directory that holds it sealed', async () => {
    const own = await obtainGrant(emu);
    await keychainProfile('cli', own);
    const before = renewalsOf(emu, own.refreshToken);
    const first = await runCli(['token', '--profile', 'cli'], { env });
    expect(first.code, first.stderr).toBe(0);
    expect(renewalsOf(emu, own.refreshToken)).toBe(before + 1);
    const token = first.stdout.trim();
    expect(token).toBe(latestTokenOf(emu, own.refreshToken)?.token);

    const second = await runCli(['token', '--profile', 'cli'], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout.trim()).toBe(token);
    expect(renewalsOf(emu, own.refreshToken)).toBe(before + 1);

    expect(statSync(file('cli')).mode & 0o777).toBe(0o600);
    expect(statSync(path.dirname(file('cli'))).mode & 0o777).toBe(0o700);
    const text = readFileSync(file('cli'), 'utf8');
    for (const form of [token, Buffer.from(token).toString('base64'), Buffer.from(token).toString('hex'), own.refreshToken]) expect(text).not.toContain(form);
    expect(await entry('cli:access_token').getPassword()).toBeNull();
    // The key is in the keychain under its reserved account, and no profile is listed for it.
    expect(Buffer.from((await entry(KEYCHAIN_CACHE_KEY_ACCOUNT).getPassword()) ?? '', 'base64')).toHaveLength(32);
    expect(await store().listProfiles()).not.toContain(KEYCHAIN_CACHE_KEY_ACCOUNT);
  });

  test('another local user cannot read the token file, even in a config dir left open to everyone', async () => {
    const openDir = path.join(sharedDir(), 'config');
    mkdirSync(openDir, { mode: 0o755 });
    const open = openSecretStore({ kind: 'keychain', configDir: openDir, env, timeoutMs: 10_000 });
    await open.writeAccessToken?.('shared', 'canary-token-another-user-must-not-read');
    const tokenFile = keychainTokenFileOf(openDir, 'shared');
    for (const argv of [['cat', tokenFile], ['ls', path.dirname(tokenFile)]]) {
      const other = await runAsOtherUser(argv);
      expect(other.code, argv.join(' ')).not.toBe(0);
      expect(other.stderr).toMatch(/Permission denied/);
      expect(other.stdout).toBe('');
    }
  });

  test('`token` with the key held reads the grant in one keychain child and the kept token from its file', async () => {
    const own = await obtainGrant(emu);
    await keychainProfile('warm', own);
    const inputs: SettingInputs = { flags: { profile: 'warm' }, env, dotenv: {} };
    const renewed = await profileAccessToken({ inputs, reuse: 'margin' });
    keychainChildren = 0;
    const again = await profileAccessToken({ inputs, reuse: 'margin' });
    expect(again.accessToken).toBe(renewed.accessToken);
    // Before, a second child read the whole profile again for its token.
    expect(keychainChildren).toBe(1);
  });

  test('a torn or changed token file reads as no token, and `token` renews and writes it again', async () => {
    const own = await obtainGrant(emu);
    await keychainProfile('torn', own);
    const first = await runCli(['token', '--profile', 'torn'], { env });
    expect(first.code, first.stderr).toBe(0);
    const sealed = readFileSync(file('torn'), 'utf8');

    const record = JSON.parse(sealed) as { data: string };
    const data = Buffer.from(record.data, 'base64');
    data[0] = (data[0] as number) ^ 1;
    writeFileSync(file('torn'), JSON.stringify({ ...record, data: data.toString('base64') }));
    expect(await store().readAccessToken?.('torn')).toBeUndefined();
    expect((await store().get('torn')).access_token).toBeUndefined();

    truncateSync(file('torn'), Math.floor(sealed.length / 2));
    expect(await store().readAccessToken?.('torn')).toBeUndefined();
    expect((await store().get('torn')).access_token).toBeUndefined();

    const before = renewalsOf(emu, own.refreshToken);
    const second = await runCli(['token', '--profile', 'torn'], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(renewalsOf(emu, own.refreshToken)).toBe(before + 1);
    expect(second.stdout.trim()).toBe(latestTokenOf(emu, own.refreshToken)?.token);
    expect(decodeAccessToken(await store().readAccessToken?.('torn'), own)?.accessToken).toBe(second.stdout.trim());
  });

  test("a token file copied to another profile's name does not open there", async () => {
    await store().writeAccessToken?.('mine', 'canary-access-token-of-mine');
    expect(await store().readAccessToken?.('mine')).toBe('canary-access-token-of-mine');
    copyFileSync(file('mine'), file('theirs'));
    expect(await store().readAccessToken?.('theirs')).toBeUndefined();
    expect((await store().get('theirs')).access_token).toBeUndefined();
    expect(readFileSync(file('mine'), 'utf8')).not.toContain('canary-access-token-of-mine');
  });

  test("the previous release's token in the keychain is still read until a file takes its place, and goes with the next grant write", async () => {
    const own = await obtainGrant(emu);
    await keychainProfile('previous', own);
    // What the previous release kept: the entry, in the keychain, with no file.
    const kept = encodeAccessToken({ accessToken: 'sl.kept-by-the-previous-release', expiresAt: Date.now() + 3_600_000, renewedAt: Date.now() }, own);
    await entry('previous:access_token').setPassword(kept);
    expect(existsSync(file('previous'))).toBe(false);
    expect((await store().get('previous')).access_token).toBe(kept);

    const before = renewalsOf(emu, own.refreshToken);
    const token = await runCli(['token', '--profile', 'previous'], { env });
    expect(token.code, token.stderr).toBe(0);
    expect(token.stdout.trim()).toBe('sl.kept-by-the-previous-release');
    expect(renewalsOf(emu, own.refreshToken)).toBe(before);

    // A file, once written, wins over the entry.
    await store().writeAccessToken?.('previous', 'written-to-the-file');
    expect((await store().get('previous')).access_token).toBe('written-to-the-file');
    // The next write of the grant removes the entry.
    await store().set('previous', { api_key: 'an-api-key' });
    expect(await entry('previous:access_token').getPassword()).toBeNull();
    expect((await store().get('previous')).access_token).toBe('written-to-the-file');
  });

  test('a key replaced in the keychain is read again when a token file does not open under the one held, at most once a minute', async () => {
    await store().writeAccessToken?.('rekeyed', 'sealed-under-the-key-held');
    // Another process, started after the key was replaced, seals its token under the new one.
    await entry(KEYCHAIN_CACHE_KEY_ACCOUNT).setPassword(randomBytes(32).toString('base64'));
    const other = childProcess.spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `const { openSecretStore } = await import(${JSON.stringify(path.join(ROOT, 'dist/credentials/index.js'))});
        await openSecretStore({ kind: 'keychain', configDir: process.env.CONFIG_DIR, env: process.env }).writeAccessToken('rekeyed', process.env.TOKEN);`],
      { env: { ...env, CONFIG_DIR: configDir, TOKEN: 'sealed-under-the-new-key' }, encoding: 'utf8' },
    );
    expect(other.status, other.stderr).toBe(0);
    // Within a minute of reading the key, a file that fails its tag is taken for torn: no token, no child.
    keychainChildren = 0;
    expect(await store().readAccessToken?.('rekeyed')).toBeUndefined();
    expect(keychainChildren).toBe(0);
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 61_000);
      expect(await store().readAccessToken?.('rekeyed')).toBe('sealed-under-the-new-key');
      expect(keychainChildren).toBe(1);
      expect(await store().readAccessToken?.('rekeyed')).toBe('sealed-under-the-new-key');
      expect(keychainChildren).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  test('a process runs at most four keychain children at once, however many profiles it reads together', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `many-${i}`);
    for (const name of names) await store().set(name, { refresh_token: `rt-${name}` });
    mostAlive = 0;
    const read = await Promise.all(names.map((name) => store().get(name)));
    expect(read.map((secrets) => secrets.refresh_token)).toEqual(names.map((name) => `rt-${name}`));
    expect(mostAlive).toBeLessThanOrEqual(4);
    expect(mostAlive).toBeGreaterThan(1);
  });

  test('delete() and `logout` remove the token file with the secrets', async () => {
    await keychainProfile('deleted');
    await store().writeAccessToken?.('deleted', 'a-token-to-delete');
    await store().delete('deleted');
    expect(existsSync(file('deleted'))).toBe(false);
    expect(await store().get('deleted')).toEqual({});

    const own = await obtainGrant(emu);
    await keychainProfile('logged-out', own);
    expect((await runCli(['token', '--profile', 'logged-out'], { env })).code).toBe(0);
    expect(existsSync(file('logged-out'))).toBe(true);
    const logout = await runCli(['logout', '--no-revoke', '--profile', 'logged-out'], { env });
    expect(logout.code, logout.stderr).toBe(0);
    expect(existsSync(file('logged-out'))).toBe(false);
    expect(await store().listProfiles()).not.toContain('logged-out');
  });
});
