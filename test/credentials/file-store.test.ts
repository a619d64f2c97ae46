import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
const FORMAT_1_PROFILES = {
  docs: { app_key: 'fixture-app-key', app_secret: 'fixture-app-secret', refresh_token: 'fixture-refresh-token', api_key: 'fixture-api-key' },
  other: { api_key: 'fixture-other-api-key' },
};
/** A store written by the release before the per-profile records (format version 2, one file), with its key. */
const FORMAT_2_FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/secrets-v2.enc');
const FORMAT_2_KEY = 'fixture-store-key-of-format-2';
const FORMAT_2_PROFILES = {
  docs: {
    app_key: 'fixture-app-key', app_secret: 'fixture-app-secret', refresh_token: 'fixture-refresh-token', api_key: 'fixture-api-key',
    access_token: '{"token":"sl.fixture-cached","expiresAt":"2030-01-01T00:00:00.000Z"}',
  },
  photos: { app_key: 'photos-app-key', refresh_token: 'photos-refresh-token' },
  'other.v2': { api_key: 'fixture-other-api-key' },
};
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
const recordFile = (profile: string) => path.join(configDir, 'secrets', `${profile}.enc`);
const tokenFile = (profile: string) => path.join(configDir, 'secrets', `${profile}.token`);
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

function envelope(): Record<string, unknown> & { kdf: Record<string, unknown>; cipher: Record<string, string>; data?: string; key?: string } {
  return JSON.parse(readFileSync(secretsFile(), 'utf8')) as ReturnType<typeof envelope>;
}

function record(profile: string): Record<string, unknown> & { cipher: Record<string, string>; data: string } {
  return JSON.parse(readFileSync(recordFile(profile), 'utf8')) as ReturnType<typeof record>;
}

describe('encrypted file store', () => {
  test('creates a 0700 config dir, a 0700 records dir and 0600 files, and keeps 0600 on rewrite', async () => {
    const dir = path.join(configDir, 'fresh', 'config');
    const store = open(KEY, dir);
    await store.set('docs', { refresh_token: 'rt' });
    const file = path.join(dir, 'secrets.enc');
    const record = path.join(dir, 'secrets', 'docs.enc');
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(path.join(dir, 'secrets')).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(record).mode & 0o777).toBe(0o600);
    await store.set('docs', { refresh_token: 'rt-2' });
    expect(statSync(record).mode & 0o777).toBe(0o600);
  });

  test('writes a versioned keyring (scrypt, AES-256-GCM) and one sealed record per profile; no secret in clear; a fresh IV per write', async () => {
    const store = open();
    await store.set('docs', { refresh_token: CANARY });
    const raw = readFileSync(secretsFile(), 'utf8') + readFileSync(recordFile('docs'), 'utf8');
    expect(raw).not.toContain(CANARY);
    const first = envelope();
    expect(first).toMatchObject({ format: 'syncauth-secrets', version: 3, kdf: { name: 'scrypt' }, cipher: { name: 'aes-256-gcm' } });
    expect(Buffer.from(String(first.kdf.salt), 'base64')).toHaveLength(16);
    expect(Buffer.from(first.cipher.iv ?? '', 'base64')).toHaveLength(12);
    expect(Buffer.from(first.cipher.tag ?? '', 'base64')).toHaveLength(16);
    expect(Buffer.from(String(first.key), 'base64')).toHaveLength(32);
    expect(Number(first.kdf.N)).toBeGreaterThanOrEqual(2 ** 15);
    const firstRecord = record('docs');
    expect(firstRecord).toMatchObject({ format: 'syncauth-secrets', version: 3, cipher: { name: 'aes-256-gcm' } });
    expect(readdirSync(configDir).sort()).toEqual(['secrets', 'secrets.enc']);
    expect(readdirSync(path.join(configDir, 'secrets'))).toEqual(['docs.enc']);

    await store.set('docs', { refresh_token: CANARY });
    const second = record('docs');
    expect(second.cipher.iv).not.toBe(firstRecord.cipher.iv);
    expect(second.data).not.toBe(firstRecord.data);
    // The keyring is written once, when the store is made.
    expect(envelope()).toEqual(first);

    // Another store, another salt and another data key.
    const otherDir = path.join(configDir, 'other');
    await open(KEY, otherDir).set('docs', { refresh_token: CANARY });
    const other = JSON.parse(readFileSync(path.join(otherDir, 'secrets.enc'), 'utf8')) as typeof first;
    expect(other.kdf.salt).not.toBe(first.kdf.salt);
    expect(other.key).not.toBe(first.key);
  });

  test("reading or writing one profile touches that profile's record alone", async () => {
    const store = open();
    await store.set('docs', { app_key: 'ak', refresh_token: 'rt' });
    await store.set('photos', { app_key: 'pk', refresh_token: 'prt' });
    await store.set('music', { app_key: 'mk' });
    const keyring = readFileSync(secretsFile(), 'utf8');
    const photos = readFileSync(recordFile('photos'));
    const photosInode = statSync(recordFile('photos')).ino;
    // A renewal of docs: its access token stored, then read back.
    await store.set('docs', { access_token: CANARY });
    expect(readFileSync(secretsFile(), 'utf8')).toBe(keyring);
    expect(readFileSync(recordFile('photos'))).toEqual(photos);
    expect(statSync(recordFile('photos')).ino).toBe(photosInode);
    // Another profile's record, unreadable now, is never read for docs: get and set of docs go on working.
    writeFileSync(recordFile('music'), 'not a record');
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt', access_token: CANARY });
    await store.set('docs', { access_token: `${CANARY}-2` });
    expect((await store.get('docs')).access_token).toBe(`${CANARY}-2`);
    await expectStoreError(store.get('music'), 'STORE_CORRUPT');
  });

  test("one profile's record lock does not hold up another profile's writer", async () => {
    const store = open();
    await store.set('docs', { app_key: 'ak' });
    await store.set('photos', { app_key: 'pk' });
    // Another process holds docs' record lock (fresh, so it is not taken over as stale).
    mkdirSync(`${recordFile('docs')}.lock`);
    let docsDone = false;
    const docs = store.set('docs', { refresh_token: 'rt' }).then(() => (docsDone = true));
    await store.set('photos', { refresh_token: 'prt' });
    expect(await store.get('photos')).toEqual({ app_key: 'pk', refresh_token: 'prt' });
    expect(docsDone).toBe(false);
    rmSync(`${recordFile('docs')}.lock`, { recursive: true });
    await docs;
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt' });
  });

  test('keeps the access-token cache beside the secrets, and delete() removes it with them', async () => {
    const store = open();
    await store.set('docs', { app_key: 'ak', refresh_token: 'rt' });
    const secrets = readFileSync(recordFile('docs'), 'utf8');
    // A renewal's write: the token file alone, the secrets' record untouched.
    await store.set('docs', { access_token: CANARY });
    expect(readFileSync(recordFile('docs'), 'utf8')).toBe(secrets);
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt', access_token: CANARY });
    expect(readFileSync(tokenFile('docs'), 'utf8')).not.toContain(CANARY);
    expect(statSync(tokenFile('docs')).mode & 0o777).toBe(0o600);
    await store.set('docs', { access_token: '' });
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt' });
    await store.set('docs', { access_token: CANARY });
    await store.delete('docs');
    expect(await store.get('docs')).toEqual({});
    expect(await store.listProfiles()).toEqual([]);
    expect(existsSync(recordFile('docs'))).toBe(false);
    expect(existsSync(tokenFile('docs'))).toBe(false);
  });

  test('a cached access token that does not open (torn by a crash, changed, or moved) reads as none; the secrets are kept', async () => {
    const store = open();
    await store.set('docs', { app_key: 'ak', refresh_token: 'rt', access_token: CANARY });
    await store.set('photos', { app_key: 'pk', access_token: `${CANARY}-photos` });
    // Another profile's token file in its place: the profile name is authenticated.
    copyFileSync(tokenFile('photos'), tokenFile('docs'));
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt' });
    // Cut short, as a write not flushed before a crash can leave it.
    writeFileSync(tokenFile('docs'), readFileSync(tokenFile('photos'), 'utf8').slice(0, 40));
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt' });
    // The next renewal's write replaces it.
    await store.set('docs', { access_token: CANARY });
    expect(await store.get('docs')).toEqual({ app_key: 'ak', refresh_token: 'rt', access_token: CANARY });
    expect(await store.get('photos')).toEqual({ app_key: 'pk', access_token: `${CANARY}-photos` });
  });

  test.each([
    ['1 (syncauth 0.1.0, before the access-token cache)', FORMAT_1_FIXTURE, FORMAT_1_KEY, FORMAT_1_PROFILES],
    ['2 (one file for every profile, with cached access tokens)', FORMAT_2_FIXTURE, FORMAT_2_KEY, FORMAT_2_PROFILES],
  ])('opening a store in format version %s migrates it once to the keyring and records, every secret intact', async (_what, fixture, key, profiles) => {
    copyFileSync(fixture, secretsFile());
    const legacy = envelope();
    const store = open(key);
    expect(await store.listProfiles()).toEqual(Object.keys(profiles).sort());
    for (const [name, secrets] of Object.entries(profiles)) expect(await store.get(name)).toEqual(secrets);
    // Migrated: the old file is gone, replaced by the keyring (same KDF and salt: the same key opens it).
    const keyring = envelope();
    expect(keyring).toMatchObject({ format: 'syncauth-secrets', version: 3, kdf: legacy.kdf });
    expect(keyring.data).toBeUndefined();
    const files = Object.entries(profiles).flatMap(([name, secrets]) => [`${name}.enc`, ...('access_token' in secrets ? [`${name}.token`] : [])]);
    expect(readdirSync(path.join(configDir, 'secrets')).sort()).toEqual(files.sort());
    expect(readdirSync(configDir).sort()).toEqual(['secrets', 'secrets.enc']);
    // Once: a second opening and a write leave the keyring as it is.
    const reopened = open(key);
    await reopened.set('docs', { access_token: CANARY });
    expect(envelope()).toEqual(keyring);
    expect(await reopened.get('docs')).toEqual({ ...profiles.docs, access_token: CANARY });
    // A wrong key still opens nothing.
    await expectStoreError(open('not the key of this store').get('docs'), 'STORE_LOCKED');
  });

  test('a format 1 or 2 file is not migrated with a wrong key: STORE_LOCKED, and the file is left as it was', async () => {
    copyFileSync(FORMAT_2_FIXTURE, secretsFile());
    const before = readFileSync(secretsFile(), 'utf8');
    await expectStoreError(open('not the key of this store').get('docs'), 'STORE_LOCKED');
    await expectStoreError(open('not the key of this store').set('docs', { app_key: 'x' }), 'STORE_LOCKED');
    expect(readFileSync(secretsFile(), 'utf8')).toBe(before);
    expect(existsSync(path.join(configDir, 'secrets'))).toBe(false);
  });

  test('an older syncauth meeting the keyring is told to upgrade, not that the file is corrupt', async () => {
    await open().set('docs', { refresh_token: CANARY });
    // What a format 2 release checks first: a version higher than it reads.
    expect(envelope().version).toBeGreaterThan(2);
    writeFileSync(recordFile('docs'), JSON.stringify({ ...record('docs'), version: 4 }));
    const error = await expectStoreError(open().get('docs'), 'STORE_CORRUPT');
    expect(error.message).toContain(`${recordFile('docs')} is not a readable syncauth secret store: it was written by a newer syncauth (format version 4)`);
  });

  test('the version is authenticated: a version 2 file relabelled as version 1 is STORE_LOCKED', async () => {
    copyFileSync(FORMAT_2_FIXTURE, secretsFile());
    const relabelled = { ...envelope(), version: 1 };
    writeFileSync(secretsFile(), JSON.stringify(relabelled));
    expectNoCanary(await expectStoreError(open(FORMAT_2_KEY).get('docs'), 'STORE_LOCKED'));
  });

  test('a wrong key is refused with STORE_LOCKED, for reads and writes, and the files are left as they were', async () => {
    await open().set('docs', { refresh_token: CANARY });
    const before = readFileSync(secretsFile(), 'utf8');
    const beforeRecord = readFileSync(recordFile('docs'), 'utf8');
    const wrong = open('not the key');
    for (const call of [() => wrong.get('docs'), () => wrong.listProfiles(), () => wrong.set('docs', { app_key: CANARY }), () => wrong.delete('docs')]) {
      const error = await expectStoreError(call(), 'STORE_LOCKED');
      expect(error.message).toContain(`the store key does not open ${secretsFile()}`);
      expect(error.exitCode).toBe(ExitCode.error);
      expect(error.path).toBe(secretsFile());
      expectNoCanary(error);
    }
    expect(readFileSync(secretsFile(), 'utf8')).toBe(before);
    expect(readFileSync(recordFile('docs'), 'utf8')).toBe(beforeRecord);
    expect(await open().get('docs')).toEqual({ refresh_token: CANARY });
  });

  test.each([
    ['a flipped byte of the wrapped key', (e: ReturnType<typeof envelope>) => {
      const key = Buffer.from(String(e.key), 'base64');
      key[0] = (key[0] ?? 0) ^ 0x01;
      e.key = key.toString('base64');
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
  ])('tampering with the keyring (%s) is detected as STORE_LOCKED', async (_what, tamper) => {
    await open().set('docs', { refresh_token: CANARY });
    const e = envelope();
    tamper(e);
    writeFileSync(secretsFile(), JSON.stringify(e));
    const error = await expectStoreError(open().get('docs'), 'STORE_LOCKED');
    expectNoCanary(error);
  });

  test.each([
    ['a flipped ciphertext byte', (e: ReturnType<typeof record>) => {
      const data = Buffer.from(e.data, 'base64');
      data[0] = (data[0] ?? 0) ^ 0x01;
      e.data = data.toString('base64');
    }],
    ['a changed tag', (e: ReturnType<typeof record>) => {
      const tag = Buffer.from(e.cipher.tag ?? '', 'base64');
      tag[15] = (tag[15] ?? 0) ^ 0x80;
      e.cipher.tag = tag.toString('base64');
    }],
  ])("tampering with a profile's record (%s) is detected as STORE_LOCKED, naming the record", async (_what, tamper) => {
    await open().set('docs', { refresh_token: CANARY });
    const e = record('docs');
    tamper(e);
    writeFileSync(recordFile('docs'), JSON.stringify(e));
    const error = await expectStoreError(open().get('docs'), 'STORE_LOCKED');
    expect(error.path).toBe(recordFile('docs'));
    expectNoCanary(error);
  });

  test("a record copied over another profile's does not open: the profile name is authenticated", async () => {
    const store = open();
    await store.set('docs', { refresh_token: CANARY });
    await store.set('photos', { refresh_token: 'photos-rt' });
    copyFileSync(recordFile('docs'), recordFile('photos'));
    expectNoCanary(await expectStoreError(store.get('photos'), 'STORE_LOCKED'));
    expect(await store.get('docs')).toEqual({ refresh_token: CANARY });
  });

  test('a new store clears records a deleted keyring left behind: they belong to no key', async () => {
    await open().set('docs', { refresh_token: CANARY });
    await open().set('photos', { refresh_token: 'photos-rt' });
    rmSync(secretsFile());
    // As the error messages advise when the key is lost: delete the file and store the secrets again.
    const store = open('another key, for a new store');
    expect(await store.listProfiles()).toEqual([]);
    await store.set('docs', { app_key: 'ak' });
    expect(await store.listProfiles()).toEqual(['docs']);
    expect(await store.get('docs')).toEqual({ app_key: 'ak' });
    expect(await store.get('photos')).toEqual({});
  });

  test.each([
    ['not JSON', 'this is not json', /not JSON/],
    ['the wrong shape', JSON.stringify({ format: 'syncauth-secrets', version: 1, data: 'x' }), /header/],
    ['a keyring of the wrong shape', JSON.stringify({ format: 'syncauth-secrets', version: 3, data: 'x' }), /header/],
    ['from a newer syncauth', JSON.stringify({ format: 'syncauth-secrets', version: 4 }), /newer syncauth/],
    [
      'asking for absurd scrypt parameters',
      JSON.stringify({
        format: 'syncauth-secrets',
        version: 3,
        kdf: { name: 'scrypt', N: 2 ** 30, r: 8, p: 1, salt: Buffer.alloc(16).toString('base64') },
        cipher: { name: 'aes-256-gcm', iv: Buffer.alloc(12).toString('base64'), tag: Buffer.alloc(16).toString('base64') },
        key: Buffer.alloc(32).toString('base64'),
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
    for (const name of ['shared', 'worker-0', 'worker-1', 'worker-2']) expect(statSync(recordFile(name)).mode & 0o777).toBe(0o600);
  });
});
