import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ExitCode, ValidationError } from '../../src/errors.js';
import { isSecretStoreError, openSecretStore } from '../../src/credentials/index.js';
import type { SecretStoreError, SecretStoreErrorCode } from '../../src/credentials/index.js';
import { expectAllSucceeded, runTogether } from '../profile/helpers.js';

const WORKER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/file-store-worker.ts');
/** A store written by syncauth 0.1.0 (format version 1, before the access-token cache), with its key. */
const FORMAT_1_FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/secrets-v1.enc');
const FORMAT_1_KEY = 'fixture-store-key-of-format-1';
const KEY = 'correct horse battery staple, but longer';
const CANARY = 'canary-5d1e8b77-file-store-secret';

let configDir: string;

beforeEach(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-filestore-'));
});

afterEach(() => {
  rmSync(configDir, { recursive: true, force: true });
});

const secretsFile = () => path.join(configDir, 'secrets.enc');
const open = (storeKey: string | null = KEY, dir = configDir) =>
  openSecretStore({ kind: 'file', configDir: dir, env: {}, ...(storeKey === null ? {} : { storeKey }) });

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
  for (const text of [error.message, error.stack ?? '', JSON.stringify(error), inspect(error, { depth: 5 })]) {
    expect(text).not.toContain(CANARY);
  }
}

function envelope(): Record<string, unknown> & { kdf: Record<string, unknown>; cipher: Record<string, string>; data: string } {
  return JSON.parse(readFileSync(secretsFile(), 'utf8')) as ReturnType<typeof envelope>;
}

describe('encrypted file store', () => {
  test('creates a 0700 config dir and a 0600 file, and keeps 0600 on rewrite', async () => {
    const dir = path.join(configDir, 'fresh', 'config');
    const store = open(KEY, dir);
    await store.set('docs', { refresh_token: 'rt' });
    const file = path.join(dir, 'secrets.enc');
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    await store.set('docs', { refresh_token: 'rt-2' });
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  test('writes a versioned AES-256-GCM envelope with scrypt; no secret in clear; a fresh IV per write', async () => {
    const store = open();
    await store.set('docs', { refresh_token: CANARY });
    const raw = readFileSync(secretsFile(), 'utf8');
    expect(raw).not.toContain(CANARY);
    expect(raw).not.toContain('docs');
    const first = envelope();
    expect(first).toMatchObject({ format: 'syncauth-secrets', version: 2, kdf: { name: 'scrypt' }, cipher: { name: 'aes-256-gcm' } });
    expect(Buffer.from(String(first.kdf.salt), 'base64')).toHaveLength(16);
    expect(Buffer.from(first.cipher.iv ?? '', 'base64')).toHaveLength(12);
    expect(Buffer.from(first.cipher.tag ?? '', 'base64')).toHaveLength(16);
    expect(Number(first.kdf.N)).toBeGreaterThanOrEqual(2 ** 15);

    await store.set('docs', { refresh_token: CANARY });
    const second = envelope();
    expect(second.cipher.iv).not.toBe(first.cipher.iv);
    expect(second.data).not.toBe(first.data);
    expect(second.kdf.salt).toBe(first.kdf.salt);

    // Another file, another salt.
    const otherDir = path.join(configDir, 'other');
    await open(KEY, otherDir).set('docs', { refresh_token: CANARY });
    const other = JSON.parse(readFileSync(path.join(otherDir, 'secrets.enc'), 'utf8')) as typeof first;
    expect(other.kdf.salt).not.toBe(first.kdf.salt);
  });

  test('keeps the access-token cache beside the secrets, and delete() removes it with them', async () => {
    const store = open();
    await store.set('docs', { app_key: 'ak', refresh_token: 'rt' });
    await store.set('docs', { access_token: CANARY });
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt', access_token: CANARY });
    expect(readFileSync(secretsFile(), 'utf8')).not.toContain(CANARY);
    await store.set('docs', { access_token: '' });
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt' });
    await store.set('docs', { access_token: CANARY });
    await store.delete('docs');
    expect(await store.get('docs')).toEqual({});
    expect(await store.listProfiles()).toEqual([]);
  });

  test('opens a store in format version 1 as it is, and writes it back as version 2 on the next change', async () => {
    copyFileSync(FORMAT_1_FIXTURE, secretsFile());
    const store = open(FORMAT_1_KEY);
    const docs = { app_key: 'fixture-app-key', app_secret: 'fixture-app-secret', refresh_token: 'fixture-refresh-token', api_key: 'fixture-api-key' };
    expect(await store.get('docs')).toEqual(docs);
    expect(await store.get('other')).toEqual({ api_key: 'fixture-other-api-key' });
    expect(await store.listProfiles()).toEqual(['docs', 'other']);
    expect(envelope().version).toBe(1);

    const salt = envelope().kdf.salt;
    await store.set('docs', { access_token: CANARY });
    expect(envelope()).toMatchObject({ version: 2, kdf: { salt } });
    const reopened = open(FORMAT_1_KEY);
    expect(await reopened.get('docs')).toEqual({ ...docs, access_token: CANARY });
    expect(await reopened.get('other')).toEqual({ api_key: 'fixture-other-api-key' });
  });

  test('the version is authenticated: a version 2 file relabelled as version 1 is STORE_LOCKED', async () => {
    await open().set('docs', { access_token: CANARY });
    const relabelled = { ...envelope(), version: 1 };
    writeFileSync(secretsFile(), JSON.stringify(relabelled));
    expectNoCanary(await expectStoreError(open().get('docs'), 'STORE_LOCKED'));
  });

  test('a wrong key is refused with STORE_LOCKED, for reads and writes, and the file is left as it was', async () => {
    await open().set('docs', { refresh_token: CANARY });
    const before = readFileSync(secretsFile(), 'utf8');
    const wrong = open('not the key');
    for (const call of [() => wrong.get('docs'), () => wrong.listProfiles(), () => wrong.set('docs', { app_key: CANARY }), () => wrong.delete('docs')]) {
      const error = await expectStoreError(call(), 'STORE_LOCKED');
      expect(error.message).toContain(`the store key does not open ${secretsFile()}`);
      expect(error.exitCode).toBe(ExitCode.error);
      expect(error.path).toBe(secretsFile());
      expectNoCanary(error);
    }
    expect(readFileSync(secretsFile(), 'utf8')).toBe(before);
    expect(await open().get('docs')).toEqual({ refresh_token: CANARY });
  });

  test.each([
    ['a flipped ciphertext byte', (e: ReturnType<typeof envelope>) => {
      const data = Buffer.from(e.data, 'base64');
      data[0] = (data[0] ?? 0) ^ 0x01;
      e.data = data.toString('base64');
    }],
    ['a changed tag', (e: ReturnType<typeof envelope>) => {
      const tag = Buffer.from(e.cipher.tag ?? '', 'base64');
      tag[15] = (tag[15] ?? 0) ^ 0x80;
      e.cipher.tag = tag.toString('base64');
    }],
    ['a changed IV', (e: ReturnType<typeof envelope>) => {
      e.cipher.iv = Buffer.alloc(12, 7).toString('base64');
    }],
    ['weakened KDF parameters', (e: ReturnType<typeof envelope>) => {
      e.kdf.N = 2 ** 14;
    }],
  ])('tampering (%s) is detected as STORE_LOCKED', async (_what, tamper) => {
    await open().set('docs', { refresh_token: CANARY });
    const e = envelope();
    tamper(e);
    writeFileSync(secretsFile(), JSON.stringify(e));
    const error = await expectStoreError(open().get('docs'), 'STORE_LOCKED');
    expectNoCanary(error);
  });

  test.each([
    ['not JSON', 'this is not json', /not JSON/],
    ['the wrong shape', JSON.stringify({ format: 'syncauth-secrets', version: 1, data: 'x' }), /header/],
    ['from a newer syncauth', JSON.stringify({ format: 'syncauth-secrets', version: 3 }), /newer syncauth/],
    [
      'asking for absurd scrypt parameters',
      JSON.stringify({
        format: 'syncauth-secrets',
        version: 1,
        kdf: { name: 'scrypt', N: 2 ** 30, r: 8, p: 1, salt: Buffer.alloc(16).toString('base64') },
        cipher: { name: 'aes-256-gcm', iv: Buffer.alloc(12).toString('base64'), tag: Buffer.alloc(16).toString('base64') },
        data: '',
      }),
      /header/,
    ],
  ])('a file that is %s is STORE_CORRUPT, naming the path, and is not overwritten', async (_what, content, reason) => {
    writeFileSync(secretsFile(), content);
    const store = open();
    const startedAt = Date.now();
    const error = await expectStoreError(store.get('docs'), 'STORE_CORRUPT');
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    expect(error.message).toContain(secretsFile());
    expect(error.message).toMatch(reason);
    await expectStoreError(store.set('docs', { refresh_token: 'rt' }), 'STORE_CORRUPT');
    expect(readFileSync(secretsFile(), 'utf8')).toBe(content);
  });

  test('decrypted content that is not a set of profile secrets is STORE_CORRUPT without echoing it', async () => {
    // Content of the wrong shape under a valid envelope and the right key, as a foreign writer could leave it.
    const { createCipheriv, randomBytes, scryptSync } = await import('node:crypto');
    const salt = randomBytes(16).toString('base64');
    const kdf = { name: 'scrypt', N: 2 ** 14, r: 8, p: 1, salt };
    const key = scryptSync(KEY, Buffer.from(salt, 'base64'), 32, { N: kdf.N, r: kdf.r, p: kdf.p });
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(JSON.stringify({ format: 'syncauth-secrets', version: 1, kdf })));
    const data = Buffer.concat([cipher.update(JSON.stringify({ profiles: { docs: { token: CANARY } } })), cipher.final()]);
    writeFileSync(
      secretsFile(),
      JSON.stringify({
        format: 'syncauth-secrets',
        version: 1,
        kdf,
        cipher: { name: 'aes-256-gcm', iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64') },
        data: data.toString('base64'),
      }),
    );
    const error = await expectStoreError(open().get('docs'), 'STORE_CORRUPT');
    expectNoCanary(error);
  });

  test('without a key every call fails with STORE_KEY_MISSING (exit 2) and nothing is created', async () => {
    const store = open(null);
    for (const call of [() => store.get('docs'), () => store.set('docs', { refresh_token: CANARY }), () => store.delete('docs'), () => store.listProfiles()]) {
      const error = await expectStoreError(call(), 'STORE_KEY_MISSING');
      expect(error.message).toContain('SYNCAUTH_STORE_KEY');
      expect(error.message).toContain('SYNCAUTH_STORE=keychain');
      expect(error.exitCode).toBe(ExitCode.usage);
      expectNoCanary(error);
    }
    expect(existsSync(secretsFile())).toBe(false);
    // A blank key is no key.
    await expectStoreError(open('   ').get('docs'), 'STORE_KEY_MISSING');
  });

  test('a new store refuses a key shorter than 16 characters (exit 2, naming SYNCAUTH_STORE_KEY, not the key); 16 will do', async () => {
    const shortKey = 'fifteen-chars-x';
    const error = await open(shortKey).set('docs', { refresh_token: CANARY }).then(
      () => {
        throw new Error('expected the short key to be refused');
      },
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ValidationError);
    const refused = error as ValidationError;
    expect(refused.exitCode).toBe(ExitCode.usage);
    expect(refused.issues).toEqual([
      {
        field: 'SYNCAUTH_STORE_KEY',
        message: `the key for the new store ${secretsFile()} is shorter than 16 characters; use a long random value such as the output of \`openssl rand -base64 32\``,
      },
    ]);
    for (const text of [refused.message, inspect(refused, { depth: 5 })]) expect(text).not.toContain(shortKey);
    expectNoCanary(refused);
    expect(existsSync(secretsFile())).toBe(false);
    // Reading a store that does not exist yet writes nothing, so it is not refused.
    expect(await open(shortKey).get('docs')).toEqual({});
    // Counted after trimming, as the key is used.
    await expect(open('  fifteen-chars-x  ').set('docs', { app_key: 'ak' })).rejects.toBeInstanceOf(ValidationError);
    await open('sixteen-chars-xy').set('docs', { app_key: 'ak' });
    expect(await open('sixteen-chars-xy').get('docs')).toEqual({ app_key: 'ak' });
  });

  test('reads SYNCAUTH_STORE_KEY from the environment at call time; an explicit key wins', async () => {
    const env: NodeJS.ProcessEnv = {};
    const store = openSecretStore({ kind: 'file', configDir, env });
    await expectStoreError(store.get('docs'), 'STORE_KEY_MISSING');
    env.SYNCAUTH_STORE_KEY = KEY;
    await store.set('docs', { app_key: 'ak' });
    expect(await open(KEY).get('docs')).toEqual({ app_key: 'ak' });

    const explicit = openSecretStore({ kind: 'file', configDir, env: { SYNCAUTH_STORE_KEY: 'wrong' }, storeKey: KEY });
    expect(await explicit.get('docs')).toEqual({ app_key: 'ak' });
  });

  test('refuses invalid profile names', async () => {
    const store = open();
    for (const name of ['', '../x', 'a:b', '__profiles__']) {
      await expect(store.set(name, { app_key: 'x' })).rejects.toBeInstanceOf(ValidationError);
      await expect(store.get(name)).rejects.toBeInstanceOf(ValidationError);
    }
    expect(existsSync(secretsFile())).toBe(false);
  });

  test('writers in several processes at once lose nothing', async () => {
    const processes = 3;
    const writes = 5;
    const env = { ...process.env, SYNCAUTH_STORE_KEY: KEY };
    const results = await runTogether(
      WORKER,
      processes,
      configDir,
      (barrier, index) => [configDir, String(index), String(writes), barrier],
      env,
    );
    expectAllSucceeded(results);
    const store = open();
    expect(await store.listProfiles()).toEqual(['shared', 'worker-0', 'worker-1', 'worker-2']);
    for (let index = 0; index < processes; index += 1) {
      expect(await store.get(`worker-${index}`)).toEqual({ refresh_token: `rt-${index}-${writes}` });
    }
    expect(await store.get('shared')).toEqual({ app_key: 'from-0', app_secret: 'from-1', refresh_token: 'from-2' });
    expect(statSync(secretsFile()).mode & 0o777).toBe(0o600);
  });
});
