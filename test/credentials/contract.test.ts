// One contract, the SecretStore interface of src/credentials/types.ts, run case for case against the three
// stores: the keychain on a real Secret Service (gnome-keyring on a private D-Bus session), the encrypted file,
// and the environment. Where a store differs by design the case says so and states that store's expectation:
// the environment is read-only (every write is refused with STORE_READ_ONLY), serves the same four variables to
// every profile, has no access-token cache, lists no profiles and trims what it reads.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ExitCode, SyncauthError } from '../../src/errors.js';
import { SECRET_ENV, SECRET_NAMES, openSecretStore } from '../../src/credentials/index.js';
import type { SecretStore, SecretStoreErrorCode, SecretStoreKind, StoredSecrets } from '../../src/credentials/index.js';
import { STORED_NAMES } from '../../src/credentials/types.js';
import type { StoredName } from '../../src/credentials/types.js';
import { redact } from '../../src/redact.js';
import { isCI, startBareBus, startSecretService } from '../helpers/secret-service.js';
import type { Bus } from '../helpers/secret-service.js';

const FILE_KEY = 'contract test store key, long enough';
// Generous: these cases are about what is stored, not about time limits, so a loaded machine cannot flake them.
const KEYCHAIN_TIMEOUT_MS = 10_000;

const probe = await startSecretService();
if (probe.ok) await probe.bus.stop();
const keychainSkip = !probe.ok && !isCI() ? probe.reason : undefined;
if (keychainSkip !== undefined) console.warn(`keychain contract cases skipped (outside CI): ${keychainSkip}`);

/** A value of `length` characters mixing what a careless encoding would break: quotes, =, %, \, non-ASCII. */
function longValue(seed: string, length = 4096): string {
  const chars = Array.from(`${seed}=%"'\\/+é€ключ🔑`);
  let out = '';
  // Whole characters only: cutting 🔑 in half would leave a lone surrogate, which no store can be asked to keep.
  for (let i = 0; out.length + (chars[i % chars.length] as string).length <= length; i += 1) out += chars[i % chars.length];
  return out.padEnd(length, 'Z');
}

const AWKWARD: Record<StoredName, string> = {
  app_key: 'ключ-鍵-clé-ǅ-🔑-\u200d-end',
  app_secret: 'a=b==&c=%41%2F%zz%%25=',
  refresh_token: `it's "double" \`ticked\` \\back\\slashed\\ {"json": [1, "two"]} $HOME \${X}`,
  api_key: longValue('api'),
  access_token: 'first line\nsecond\tline\r\n"🔑"=%',
};

/** What a case expects a failing call to throw. */
interface Failure {
  what: string;
  code: string;
  /** Makes the call fail, with `canaries` in flight or already stored where the store keeps its values. */
  provoke: (canaries: StoredSecrets) => Promise<unknown>;
}

interface Subject {
  kind: SecretStoreKind;
  /** Why the store's cases cannot run here (outside CI only). */
  skip?: string;
  /** What the store holds per profile: every stored name, or for env the four secrets that have a variable. */
  names: readonly StoredName[];
  /** The error every write is refused with, for a read-only store. */
  readOnly?: SecretStoreErrorCode;
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  /** A new store on the same place (bus and config dir, file, environment), as another command would open it. */
  open(): SecretStore;
  /** Puts values where the store reads them: set() for a writable store; the environment, for any profile, for env. */
  put(profile: string, secrets: StoredSecrets): Promise<void>;
  /** The store's own ways to fail. */
  failures(): Failure[];
}

function keychainSubject(): Subject {
  let bus: Bus | undefined;
  let configDir = '';
  const open = (address: string | undefined = bus?.address) =>
    openSecretStore({
      kind: 'keychain',
      configDir,
      env: { ...process.env, DBUS_SESSION_BUS_ADDRESS: address },
      timeoutMs: KEYCHAIN_TIMEOUT_MS,
    });
  return {
    kind: 'keychain',
    skip: keychainSkip,
    names: STORED_NAMES,
    // A fresh Secret Service per case (it starts in some 70 ms): no case sees another's profiles.
    async setUp() {
      const started = await startSecretService();
      if (!started.ok) throw new Error(`a Secret Service is required in CI and could not be started: ${started.reason}`);
      bus = started.bus;
      configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-contract-keychain-'));
    },
    async tearDown() {
      await bus?.stop();
      bus = undefined;
      rmSync(configDir, { recursive: true, force: true });
    },
    open: () => open(),
    put: (profile, secrets) => open().set(profile, secrets),
    failures: () => [
      {
        what: 'a dead bus socket',
        code: 'KEYCHAIN_UNAVAILABLE',
        provoke: (canaries) => open(`unix:path=${path.join(configDir, 'no-such-bus')}`).set('docs', canaries),
      },
      {
        what: 'a bus without a Secret Service',
        code: 'KEYCHAIN_UNAVAILABLE',
        provoke: async (canaries) => {
          const bare = await startBareBus();
          try {
            return await open(bare.address).set('docs', canaries);
          } finally {
            await bare.stop();
          }
        },
      },
    ],
  };
}

function fileSubject(): Subject {
  let configDir = '';
  const open = (storeKey: string | null = FILE_KEY, dir = configDir) =>
    openSecretStore({ kind: 'file', configDir: dir, env: {}, ...(storeKey === null ? {} : { storeKey }) });
  const freshDir = () => mkdtempSync(path.join(configDir, 'failure-'));
  return {
    kind: 'file',
    names: STORED_NAMES,
    async setUp() {
      configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-contract-file-'));
    },
    async tearDown() {
      rmSync(configDir, { recursive: true, force: true });
    },
    open: () => open(),
    put: (profile, secrets) => open().set(profile, secrets),
    failures: () => [
      {
        what: 'a wrong key reading a file that holds the values',
        code: 'STORE_LOCKED',
        provoke: async (canaries) => {
          const dir = freshDir();
          await open(FILE_KEY, dir).set('docs', canaries);
          return open('a different key, also long', dir).get('docs');
        },
      },
      {
        what: 'a wrong key writing the values',
        code: 'STORE_LOCKED',
        provoke: async (canaries) => {
          const dir = freshDir();
          await open(FILE_KEY, dir).set('docs', { app_key: 'placeholder' });
          return open('a different key, also long', dir).set('docs', canaries);
        },
      },
      {
        what: 'no key',
        code: 'STORE_KEY_MISSING',
        provoke: (canaries) => open(null, freshDir()).set('docs', canaries),
      },
      {
        what: 'a file that is not a store',
        code: 'STORE_CORRUPT',
        provoke: (canaries) => {
          const dir = freshDir();
          writeFileSync(path.join(dir, 'secrets.enc'), '{"format": "syncauth-secrets", "version": 2}');
          return open(FILE_KEY, dir).set('docs', canaries);
        },
      },
      {
        what: 'a key too short for a new store',
        code: 'SYNCAUTH_INVALID_INPUT',
        provoke: (canaries) => open('short key', freshDir()).set('docs', canaries),
      },
    ],
  };
}

function envSubject(): Subject {
  let env: NodeJS.ProcessEnv = {};
  const open = () => openSecretStore({ kind: 'env', configDir: '/nonexistent', env });
  const put = async (_profile: string, secrets: StoredSecrets) => {
    for (const [name, value] of Object.entries(secrets)) {
      const variable = SECRET_ENV[name as keyof typeof SECRET_ENV];
      if (variable === undefined) throw new Error(`the environment has no variable for ${name}`);
      if (value === undefined) continue;
      if (value === '') delete env[variable];
      else env[variable] = value;
    }
  };
  return {
    kind: 'env',
    names: SECRET_NAMES,
    readOnly: 'STORE_READ_ONLY',
    async setUp() {
      env = {};
    },
    async tearDown() {},
    open,
    put,
    failures: () => [
      {
        what: 'a set while the environment holds the values',
        code: 'STORE_READ_ONLY',
        provoke: async (canaries) => {
          await put('docs', only(SECRET_NAMES, canaries));
          return open().set('docs', canaries);
        },
      },
      {
        what: 'a delete while the environment holds the values',
        code: 'STORE_READ_ONLY',
        provoke: async (canaries) => {
          await put('docs', only(SECRET_NAMES, canaries));
          return open().delete('docs');
        },
      },
    ],
  };
}

function only(names: readonly StoredName[], secrets: StoredSecrets): StoredSecrets {
  return Object.fromEntries(names.filter((name) => secrets[name] !== undefined).map((name) => [name, secrets[name]]));
}

/** One value per name, each naming its profile and name, so a value read in the wrong place is recognised. */
function valuesFor(names: readonly StoredName[], tag: string): StoredSecrets {
  return Object.fromEntries(names.map((name) => [name, `${tag}-${name}-value`]));
}

async function rejection(promise: Promise<unknown>, what = 'the call'): Promise<SyncauthError> {
  const error = await promise.then(
    () => {
      throw new Error(`expected ${what} to fail, but it succeeded`);
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(SyncauthError);
  return error as SyncauthError;
}

async function expectRefused(subject: Subject, promise: Promise<unknown>): Promise<void> {
  const error = await rejection(promise);
  expect(error.code, String(error)).toBe(subject.readOnly);
  expect(error.exitCode).toBe(ExitCode.usage);
}

/** Every way an error gets printed or logged, its causes included. */
function renderings(error: unknown): string[] {
  const texts: string[] = [inspect(error, { depth: 8 })];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 8; depth += 1) {
    const current = e as Error & { hint?: unknown };
    texts.push(
      String(current),
      current.message ?? '',
      current.stack ?? '',
      JSON.stringify(current) ?? '',
      JSON.stringify(Object.fromEntries(Object.entries(current))) ?? '',
      String(current.hint ?? ''),
    );
    e = current.cause;
  }
  return texts;
}

const SUBJECTS: Subject[] = [keychainSubject(), fileSubject(), envSubject()];

describe.each(SUBJECTS)('$kind store', (subject) => {
  const writable = subject.readOnly === undefined;
  const title = `SecretStore contract${subject.skip === undefined ? '' : ` (skipped: ${subject.skip})`}`;

  describe.skipIf(subject.skip !== undefined)(title, () => {
    beforeEach(() => subject.setUp());
    afterEach(() => subject.tearDown());

    test(`is a ${subject.kind} store that is ${writable ? '' : 'not '}writable`, () => {
      const store = subject.open();
      expect(store.kind).toBe(subject.kind);
      expect(store.writable).toBe(writable);
    });

    test('get of a profile with nothing stored is {}', async () => {
      const store = subject.open();
      expect(await store.get('docs')).toEqual({});
      if (writable) {
        // Nor after another profile got values, nor after writes that stored nothing.
        await store.set('photos', valuesFor(subject.names, 'photos'));
        await store.set('docs', {});
        await store.set('docs', { app_key: undefined, refresh_token: '' });
        expect(await store.get('docs')).toEqual({});
        expect(await subject.open().get('docs')).toEqual({});
      } else {
        // env: what the environment holds is every profile's, and blank variables hold nothing.
        for (const name of subject.names) await subject.put('docs', { [name]: ' \t ' });
        expect(await store.get('docs')).toEqual({});
      }
    });

    test(`round-trips every name it holds (${subject.names.join(', ')}) exactly: unicode, =, %, quotes, newlines, 4 KB`, async () => {
      for (const values of [only(subject.names, AWKWARD), Object.fromEntries(subject.names.map((name) => [name, longValue(name)]))]) {
        await subject.put('docs', values);
        expect(await subject.open().get('docs')).toStrictEqual(values);
      }
      expect((await subject.open().get('docs')).app_secret).toHaveLength(4096);
    });

    test('set merges: undefined leaves a name as it is, an empty string removes that one name, a string replaces it', async () => {
      const store = subject.open();
      const initial = valuesFor(subject.names, 'v1');
      await subject.put('docs', initial);
      const changes: StoredSecrets[] = [
        { app_key: undefined, app_secret: '', refresh_token: 'v2-refresh_token-value' },
        { api_key: '' },
        {},
        { access_token: 'v2-access_token-value', app_secret: 'v3-app_secret-value' },
      ];
      if (!writable) {
        for (const change of changes) await expectRefused(subject, store.set('docs', change));
        expect(await store.get('docs')).toStrictEqual(initial);
        return;
      }
      await store.set('docs', changes[0] as StoredSecrets);
      expect(await store.get('docs')).toStrictEqual({
        app_key: 'v1-app_key-value',
        refresh_token: 'v2-refresh_token-value',
        api_key: 'v1-api_key-value',
        access_token: 'v1-access_token-value',
      });
      await store.set('docs', changes[1] as StoredSecrets);
      await store.set('docs', changes[2] as StoredSecrets);
      // Removing a name that is not there is not an error and changes nothing else.
      await store.set('docs', { api_key: '' });
      expect(await store.get('docs')).toStrictEqual({
        app_key: 'v1-app_key-value',
        refresh_token: 'v2-refresh_token-value',
        access_token: 'v1-access_token-value',
      });
      await store.set('docs', changes[3] as StoredSecrets);
      expect(await subject.open().get('docs')).toStrictEqual({
        app_key: 'v1-app_key-value',
        app_secret: 'v3-app_secret-value',
        refresh_token: 'v2-refresh_token-value',
        access_token: 'v2-access_token-value',
      });
    });

    test('delete removes every value, access_token included; deleting a profile with nothing is not an error', async () => {
      const store = subject.open();
      const values = valuesFor(subject.names, 'docs');
      await subject.put('docs', values);
      if (!writable) {
        // env: refused whether or not the environment holds anything; a change belongs where it is defined.
        await expectRefused(subject, store.delete('docs'));
        await expectRefused(subject, store.delete('never-stored'));
        expect(await store.get('docs')).toStrictEqual(values);
        return;
      }
      expect(Object.keys(await store.get('docs'))).toContain('access_token');
      await store.delete('docs');
      expect(await store.get('docs')).toEqual({});
      expect(await subject.open().get('docs')).toEqual({});
      expect(await store.listProfiles()).toEqual([]);
      await store.delete('docs');
      await store.delete('never-stored');
      // A profile holding only the access token is deleted whole too.
      await store.set('docs', { access_token: 'only-access_token-value' });
      await store.delete('docs');
      expect(await store.get('docs')).toEqual({});
    });

    test('listProfiles: sorted, and only the profiles that hold something', async () => {
      const store = subject.open();
      const names = ['zeta', 'Alpha', 'mid.1', 'beta_2', '0-first'];
      for (const name of names) await subject.put(name, { app_key: `${name}-app_key-value` });
      if (!writable) {
        // env: the variables belong to no profile, so there is nothing to list (callers list their state).
        expect(await store.listProfiles()).toEqual([]);
        return;
      }
      expect(await store.listProfiles()).toEqual(['0-first', 'Alpha', 'beta_2', 'mid.1', 'zeta']);
      // The access token alone counts; a set that stores nothing does not make a profile.
      await store.set('cached', { access_token: 'cached-access_token-value' });
      await store.set('nothing', { app_key: '' });
      await store.set('nothing-either', {});
      expect(await subject.open().listProfiles()).toEqual(['0-first', 'Alpha', 'beta_2', 'cached', 'mid.1', 'zeta']);
      // Gone once deleted, or once its last value is removed.
      await store.delete('mid.1');
      await store.set('zeta', { app_key: '' });
      await store.set('cached', { access_token: '' });
      expect(await store.listProfiles()).toEqual(['0-first', 'Alpha', 'beta_2']);
    });

    test("two profiles never see each other's values", async () => {
      const store = subject.open();
      // One name the prefix of the other: nothing keyed by the name may run into its neighbour.
      const docs = valuesFor(subject.names, 'docs');
      const docs2 = valuesFor(subject.names, 'docs2');
      await subject.put('docs', docs);
      await subject.put('docs2', docs2);
      if (!writable) {
        // env: one set of variables serves every profile, so both read exactly what it holds now.
        expect(await store.get('docs')).toStrictEqual(docs2);
        expect(await store.get('docs2')).toStrictEqual(docs2);
        return;
      }
      expect(await store.get('docs')).toStrictEqual(docs);
      expect(await store.get('docs2')).toStrictEqual(docs2);
      await store.set('docs', { app_key: '', refresh_token: 'docs-new-refresh_token' });
      expect(await store.get('docs2')).toStrictEqual(docs2);
      await store.delete('docs');
      expect(await subject.open().get('docs2')).toStrictEqual(docs2);
      expect(await store.listProfiles()).toEqual(['docs2']);
    });

    test('concurrent set() calls lose nothing: ten on one profile, and one each on ten profiles', async () => {
      const store = subject.open();
      const writes = Array.from({ length: 10 }, (_, i) => {
        const name = subject.names[i % subject.names.length] as StoredName;
        return { name, value: `${name}-writer-${i}` };
      });
      const results = await Promise.allSettled(writes.map(({ name, value }) => store.set('docs', { [name]: value })));
      if (!writable) {
        for (const result of results) {
          expect(result.status).toBe('rejected');
          await expectRefused(subject, Promise.reject((result as PromiseRejectedResult).reason));
        }
        expect(await store.get('docs')).toEqual({});
        return;
      }
      for (const result of results) expect(result).toEqual({ status: 'fulfilled', value: undefined });
      const stored = await subject.open().get('docs');
      expect(Object.keys(stored).sort()).toEqual([...subject.names].sort());
      // Two writers per name: whichever came last, the value is one of theirs.
      for (const name of subject.names) {
        expect(writes.filter((write) => write.name === name).map((write) => write.value)).toContain(stored[name]);
      }

      const profiles = Array.from({ length: 10 }, (_, i) => `race-${i}`);
      await Promise.all(profiles.map((profile) => store.set(profile, { refresh_token: `${profile}-refresh_token` })));
      expect(await store.listProfiles()).toEqual(['docs', ...profiles]);
      for (const profile of profiles) expect(await store.get(profile)).toStrictEqual({ refresh_token: `${profile}-refresh_token` });
      await Promise.all(profiles.map((profile) => store.delete(profile)));
      expect(await store.listProfiles()).toEqual(['docs']);
    });

    test("a second store opened on the same place sees the first one's writes, and the other way round", async () => {
      const first = subject.open();
      const second = subject.open();
      expect(await second.get('docs')).toEqual({});
      await subject.put('docs', { app_key: 'from-first-app_key', refresh_token: 'from-first-refresh_token' });
      expect(await second.get('docs')).toStrictEqual({ app_key: 'from-first-app_key', refresh_token: 'from-first-refresh_token' });
      if (!writable) {
        // env: both read the environment at each call, so a change after they were opened shows in both.
        await subject.put('docs', { refresh_token: '' });
        expect(await first.get('docs')).toStrictEqual({ app_key: 'from-first-app_key' });
        expect(await second.get('docs')).toStrictEqual({ app_key: 'from-first-app_key' });
        return;
      }
      await second.set('docs', { refresh_token: 'from-second-refresh_token', api_key: 'from-second-api_key' });
      expect(await first.get('docs')).toStrictEqual({
        app_key: 'from-first-app_key',
        refresh_token: 'from-second-refresh_token',
        api_key: 'from-second-api_key',
      });
      expect(await first.listProfiles()).toEqual(['docs']);
      await second.delete('docs');
      expect(await first.get('docs')).toEqual({});
      expect(await first.listProfiles()).toEqual([]);
    });

    test('get returns a copy: changing it changes nothing stored', async () => {
      const values = valuesFor(subject.names, 'docs');
      await subject.put('docs', values);
      const store = subject.open();
      const read = await store.get('docs');
      read.app_key = 'changed by the caller';
      delete read.refresh_token;
      expect(await store.get('docs')).toStrictEqual(values);
    });

    test(`surrounding whitespace is ${writable ? 'kept: a value is stored as it is given' : 'trimmed, and a blank variable is no value'}`, async () => {
      const store = subject.open();
      await subject.put('docs', { app_key: '  padded app_key\n', refresh_token: ' \t ' });
      // Writable stores treat values as opaque; the environment is read the way shells and .env files leave it.
      expect(await store.get('docs')).toStrictEqual(
        writable ? { app_key: '  padded app_key\n', refresh_token: ' \t ' } : { app_key: 'padded app_key' },
      );
    });

    test('an invalid profile name is refused before anything is read or written', async () => {
      const store = subject.open();
      for (const name of ['', '../etc', 'a:b', '__profiles__', '.hidden', 'x'.repeat(65)]) {
        for (const call of [() => store.get(name), () => store.set(name, { app_key: 'a-value-here' }), () => store.delete(name)]) {
          const error = await rejection(call());
          expect(error.code, `${JSON.stringify(name)}: ${String(error)}`).toBe('SYNCAUTH_INVALID_INPUT');
          expect(error.exitCode).toBe(ExitCode.usage);
        }
      }
      expect(await store.listProfiles()).toEqual([]);
    });

    test('no value ever appears in an error, whichever way the call fails', async () => {
      const failures: Failure[] = [
        { what: 'an invalid profile name', code: 'SYNCAUTH_INVALID_INPUT', provoke: (canaries) => subject.open().set('../docs', canaries) },
        ...subject.failures(),
      ];
      for (const failure of failures) {
        // Fresh values per call, never read through the env store: that registers what it reads for redaction,
        // which would hide a leak from this test.
        const canaries = only(
          subject.names,
          Object.fromEntries(STORED_NAMES.map((name) => [name, `canary-${name}-${randomBytes(8).toString('hex')}`])),
        );
        for (const value of Object.values(canaries)) expect(redact(value as string)).toBe(value);
        const error = await rejection(failure.provoke(canaries), failure.what);
        expect(error.code, `${failure.what}: ${String(error)}`).toBe(failure.code);
        for (const text of renderings(error)) {
          for (const value of Object.values(canaries)) expect(text, failure.what).not.toContain(value);
        }
      }
    });
  });
});
