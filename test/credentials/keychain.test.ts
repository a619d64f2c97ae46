// The keychain store against a real Secret Service (gnome-keyring on a private D-Bus session), and against
// the ways a keychain is out of reach: no bus, a bus without a Secret Service, a bus that never answers.
// What every store promises (merging, deleting, listing, concurrency) is in contract.test.ts; here, what only
// the keychain does: where the entries live, and how an unreachable keychain fails.
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { AsyncEntry } from '@napi-rs/keyring';
import { DEFAULT_KEYCHAIN_TIMEOUT_MS, isSecretStoreError, openSecretStore } from '../../src/credentials/index.js';
import type { SecretStoreError, SecretStoreErrorCode } from '../../src/credentials/index.js';
import { isCI, startBareBus, startSecretService } from '../helpers/secret-service.js';

const CANARY = 'canary-7f3a9c2e-keychain-secret';
const ALTERNATIVES = ['SYNCAUTH_STORE=file', 'SYNCAUTH_STORE_KEY', 'SYNCAUTH_STORE=env'];
// Generous for the tests that are about storage, not time limits, so a loaded CI machine cannot flake them.
const FUNCTIONAL_TIMEOUT_MS = 10_000;

const started = await startSecretService();
const unavailableReason = started.ok ? undefined : started.reason;
const skip = unavailableReason !== undefined && !isCI();
if (skip) console.warn(`keychain tests on a real Secret Service skipped (outside CI): ${unavailableReason}`);

let configDir: string;
const savedAddress = process.env.DBUS_SESSION_BUS_ADDRESS;

beforeAll(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-keychain-'));
});

afterAll(async () => {
  if (savedAddress === undefined) delete process.env.DBUS_SESSION_BUS_ADDRESS;
  else process.env.DBUS_SESSION_BUS_ADDRESS = savedAddress;
  if (started.ok) await started.bus.stop();
  rmSync(configDir, { recursive: true, force: true });
});

async function expectStoreError(promise: Promise<unknown>, code: SecretStoreErrorCode): Promise<SecretStoreError> {
  const error = await promise.then(
    () => {
      throw new Error(`expected ${code}, but the call succeeded`);
    },
    (caught: unknown) => caught,
  );
  expect(isSecretStoreError(error, code), String(error)).toBe(true);
  return error as SecretStoreError;
}

function expectNoCanary(error: Error): void {
  for (const text of [error.message, error.stack ?? '', JSON.stringify(error), String(error.cause ?? '')]) {
    expect(text).not.toContain(CANARY);
  }
}

describe.skipIf(skip)(
  `keychain store on a real Secret Service${skip ? ` (skipped: ${unavailableReason})` : ''}`,
  () => {
    beforeAll(() => {
      if (!started.ok) throw new Error(`a Secret Service is required in CI and could not be started: ${started.reason}`);
      // The store reads the bus address from process.env at each call.
      process.env.DBUS_SESSION_BUS_ADDRESS = started.bus.address;
    });

    afterEach(() => {
      if (started.ok) process.env.DBUS_SESSION_BUS_ADDRESS = started.bus.address;
    });

    test('keeps each secret in the Secret Service under service "syncauth", account "<profile>:<name>"', async () => {
      const store = openSecretStore({ kind: 'keychain', configDir, timeoutMs: FUNCTIONAL_TIMEOUT_MS });
      await store.set('kc-where', { refresh_token: 'rt-where' });
      const entry = new AsyncEntry('syncauth', 'kc-where:refresh_token', { linux: { store: 'secret-service' } });
      expect(await entry.getPassword()).toBe('rt-where');
      await store.delete('kc-where');
      expect(await entry.getPassword()).toBeNull();
    });

    test('keeps the access-token cache in a sealed file of the config dir, not in the keychain; delete() removes it with the secrets', async () => {
      const store = openSecretStore({ kind: 'keychain', configDir, timeoutMs: FUNCTIONAL_TIMEOUT_MS });
      // A profile stored before the cache existed reads as it did.
      await store.set('kc-cache', { app_key: 'ak', refresh_token: 'rt' });
      expect(await store.get('kc-cache')).toEqual({ app_key: 'ak', refresh_token: 'rt' });
      await store.set('kc-cache', { access_token: CANARY });
      expect(await store.get('kc-cache')).toEqual({ app_key: 'ak', refresh_token: 'rt', access_token: CANARY });
      expect(await store.readAccessToken?.('kc-cache')).toBe(CANARY);
      const entry = new AsyncEntry('syncauth', 'kc-cache:access_token', { linux: { store: 'secret-service' } });
      expect(await entry.getPassword()).toBeNull();
      const file = path.join(configDir, 'keychain-tokens', 'kc-cache.token');
      expect(readFileSync(file, 'utf8')).not.toContain(CANARY);
      expect(readFileSync(file, 'utf8')).not.toContain(Buffer.from(CANARY).toString('base64'));
      await store.delete('kc-cache');
      expect(existsSync(file)).toBe(false);
      expect(await store.get('kc-cache')).toEqual({});
      expect(await store.listProfiles()).not.toContain('kc-cache');
    });

    test('a bus without a Secret Service fails with KEYCHAIN_UNAVAILABLE naming the alternatives', async () => {
      const bare = await startBareBus();
      try {
        process.env.DBUS_SESSION_BUS_ADDRESS = bare.address;
        const store = openSecretStore({ kind: 'keychain', configDir, timeoutMs: 3_000 });
        const error = await expectStoreError(store.set('kc-bare', { refresh_token: CANARY }), 'KEYCHAIN_UNAVAILABLE');
        for (const alternative of ALTERNATIVES) expect(error.message).toContain(alternative);
        expectNoCanary(error);
      } finally {
        await bare.stop();
      }
    });
  },
);

describe('keychain store without a usable D-Bus session', () => {
  const saved = process.env.DBUS_SESSION_BUS_ADDRESS;
  afterEach(() => {
    if (saved === undefined) delete process.env.DBUS_SESSION_BUS_ADDRESS;
    else process.env.DBUS_SESSION_BUS_ADDRESS = saved;
  });

  test('a dead bus socket fails fast with KEYCHAIN_UNAVAILABLE naming both alternatives', async () => {
    const timeoutMs = DEFAULT_KEYCHAIN_TIMEOUT_MS;
    expect(timeoutMs).toBe(3_000);
    process.env.DBUS_SESSION_BUS_ADDRESS = `unix:path=${path.join(configDir, 'no-such-bus')}`;
    const store = openSecretStore({ kind: 'keychain', configDir });
    for (const call of [() => store.get('kc-dead'), () => store.set('kc-dead', { refresh_token: CANARY }), () => store.listProfiles()]) {
      const startedAt = Date.now();
      const error = await expectStoreError(call(), 'KEYCHAIN_UNAVAILABLE');
      expect(Date.now() - startedAt).toBeLessThan(timeoutMs + 1_000);
      for (const alternative of ALTERNATIVES) expect(error.message).toContain(alternative);
      expect(error.message).toMatch(/Failed to connect|No such file/);
      expectNoCanary(error);
    }
  });

  test('no session bus at all (nothing in the environment) fails with KEYCHAIN_UNAVAILABLE', async () => {
    const store = openSecretStore({ kind: 'keychain', configDir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    const error = await expectStoreError(store.get('kc-nobus'), 'KEYCHAIN_UNAVAILABLE');
    expect(error.message).toContain('SYNCAUTH_STORE=env');
  });

  test('a bus that never answers is cut off at the timeout with KEYCHAIN_TIMEOUT', async () => {
    // Accepts the connection and stays silent, as a wedged bus or Secret Service would.
    const socketPath = path.join(configDir, 'silent-bus');
    const held: net.Socket[] = [];
    const server = net.createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      process.env.DBUS_SESSION_BUS_ADDRESS = `unix:path=${socketPath}`;
      const timeoutMs = 1_000;
      const store = openSecretStore({ kind: 'keychain', configDir, timeoutMs });
      const startedAt = Date.now();
      const error = await expectStoreError(store.set('kc-silent', { app_secret: CANARY }), 'KEYCHAIN_TIMEOUT');
      const elapsed = Date.now() - startedAt;
      expect(elapsed).toBeGreaterThanOrEqual(timeoutMs - 50);
      expect(elapsed).toBeLessThan(timeoutMs + 1_000);
      for (const alternative of ALTERNATIVES) expect(error.message).toContain(alternative);
      expectNoCanary(error);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      try {
        unlinkSync(socketPath);
      } catch {
        // already gone with the server
      }
    }
  });
});
