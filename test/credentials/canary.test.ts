// Known secret values go through a setup-like flow and every failure we can provoke; none may surface in an
// error (message, stack, enumerable properties, cause) or in the plaintext profile state.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { openSecretStore, SECRET_NAMES } from '../../src/credentials/index.js';
import type { ProfileSecrets } from '../../src/credentials/index.js';
import { newSecretsVersion, openProfileStore } from '../../src/profile/index.js';
import type { ProfileState } from '../../src/profile/index.js';

const KEY = 'canary test store key';
const SECRETS: Required<ProfileSecrets> = {
  app_key: 'canary-app-key-4c1f0a',
  app_secret: 'canary-app-secret-9e27b3',
  refresh_token: 'canary-refresh-token-d81c55',
  api_key: 'canary-api-key-37aa60',
};
const CANARIES = Object.values(SECRETS);

let configDir: string;

beforeAll(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-canary-'));
});

afterAll(() => {
  rmSync(configDir, { recursive: true, force: true });
});

function renderings(error: unknown): string[] {
  const e = error as Error;
  return [
    e.message,
    e.stack ?? '',
    JSON.stringify(e),
    JSON.stringify(Object.fromEntries(Object.entries(e))),
    inspect(e, { depth: 5 }),
    String(e.cause ?? ''),
  ];
}

function expectClean(texts: string[]): void {
  for (const text of texts) for (const canary of CANARIES) expect(text).not.toContain(canary);
}

async function failure(call: () => Promise<unknown>): Promise<unknown> {
  return call().then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
}

test('secrets stay out of the profile state file and out of every error', async () => {
  const secrets = openSecretStore({ kind: 'file', configDir, storeKey: KEY });
  const profiles = openProfileStore(configDir);
  await secrets.set('docs', SECRETS);
  await profiles.update('docs', () => ({ connectorId: 'c-1', secretsVersion: newSecretsVersion(), remoteUrl: 'dropbox://docs' }));

  const errors: unknown[] = [];
  // Wrong key, missing key, read-only environment, and a dead keychain, each while handling the secrets.
  errors.push(await failure(() => openSecretStore({ kind: 'file', configDir, storeKey: 'wrong' }).set('docs', SECRETS)));
  errors.push(await failure(() => openSecretStore({ kind: 'file', configDir, env: {} }).set('docs', SECRETS)));
  const fromEnv = Object.fromEntries(SECRET_NAMES.map((name) => [`SYNCAUTH_${name.toUpperCase()}`, SECRETS[name]]));
  errors.push(await failure(() => openSecretStore({ kind: 'env', configDir, env: fromEnv }).set('docs', SECRETS)));
  errors.push(
    await failure(() =>
      openSecretStore({
        kind: 'keychain',
        configDir,
        env: { PATH: process.env.PATH, DBUS_SESSION_BUS_ADDRESS: `unix:path=${path.join(configDir, 'no-bus')}` },
      }).set('docs', SECRETS),
    ),
  );
  // A secret handed to the profile state by mistake is refused, by name only.
  errors.push(
    await failure(() =>
      profiles.update('docs', (current) => ({ ...current, refresh_token: SECRETS.refresh_token }) as unknown as ProfileState),
    ),
  );
  // Record the failures as a daemon would, in the state's lastError.
  for (const error of errors) {
    expectClean(renderings(error));
    const { code, message } = error as { code: string; message: string };
    await profiles.update('docs', (current) => ({
      ...current,
      lastError: { code, message, at: new Date().toISOString(), terminal: false },
    }));
    const state = readFileSync(profiles.fileOf('docs'), 'utf8');
    expect(state).toContain(code);
    expectClean([state]);
  }
  expect(errors.map((error) => (error as { code: string }).code)).toEqual([
    'STORE_LOCKED',
    'STORE_KEY_MISSING',
    'STORE_READ_ONLY',
    'KEYCHAIN_UNAVAILABLE',
    'SYNCAUTH_INVALID_INPUT',
  ]);

  // A tampered record of the profile's secrets, read back.
  const file = path.join(configDir, 'secrets', 'docs.enc');
  const envelope = JSON.parse(readFileSync(file, 'utf8')) as { data: string };
  envelope.data = Buffer.from(envelope.data, 'base64').reverse().toString('base64');
  writeFileSync(file, JSON.stringify(envelope));
  expectClean(renderings(await failure(() => secrets.get('docs'))));

  expectClean([readFileSync(profiles.fileOf('docs'), 'utf8')]);
  expect(readdirSync(profiles.dir)).toEqual(['docs.json']);
});
