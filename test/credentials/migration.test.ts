// Migrating a format 1 or 2 store to the keyring and per-profile records: the rename of the keyring over the
// old file is the one commit, so a write that dies anywhere before it leaves the old file whole, and the next
// opening migrates again from it. A config dir that cannot be written keeps being read as it is.
import type * as Fs from 'node:fs';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeEach, describe, expect, test, vi } from 'vitest';
import { isSecretStoreError, openFileSecretStore } from '../../src/credentials/index.js';
import { tempDir } from '../helpers/cli.js';

const crash = vi.hoisted(() => ({ renamesLeft: -1, readOnly: false, renames: [] as string[] }));

// A write that dies at its commit: the rename of its temporary file (`<file>.<digits>`), the nth one from now.
// And a config dir on a read-only file system: taking the store lock (a mkdir beside the file) fails with EROFS.
vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof Fs>();
  const renameSync = (from: string, to: string): void => {
    if (/\.\d+$/.test(String(from))) {
      crash.renames.push(String(to));
      if (crash.renamesLeft === 0) {
        crash.renamesLeft = -1;
        throw new Error('simulated crash during write');
      }
      if (crash.renamesLeft > 0) crash.renamesLeft -= 1;
    }
    return real.renameSync(from, to);
  };
  const mkdirSync = ((dir: string, options?: Fs.MakeDirectoryOptions) => {
    if (crash.readOnly && String(dir).endsWith('.lock')) throw Object.assign(new Error('read-only file system'), { code: 'EROFS' });
    return real.mkdirSync(dir, options);
  }) as typeof real.mkdirSync;
  // A lock is a link made at its path: on a read-only file system that fails as the directory did.
  const symlinkSync = ((target: string, where: string) => {
    if (crash.readOnly && String(where).endsWith('.lock')) throw Object.assign(new Error('read-only file system'), { code: 'EROFS' });
    return real.symlinkSync(target, where);
  }) as typeof real.symlinkSync;
  return { ...real, default: { ...real, renameSync, mkdirSync, symlinkSync }, renameSync, mkdirSync, symlinkSync };
});

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/secrets-v2.enc');
const KEY = 'fixture-store-key-of-format-2';
const PROFILES = {
  docs: {
    app_key: 'fixture-app-key', app_secret: 'fixture-app-secret', refresh_token: 'fixture-refresh-token', api_key: 'fixture-api-key',
    access_token: '{"token":"sl.fixture-cached","expiresAt":"2030-01-01T00:00:00.000Z"}',
  },
  'other.v2': { api_key: 'fixture-other-api-key' },
  photos: { app_key: 'photos-app-key', refresh_token: 'photos-refresh-token' },
};

let configDir: string;
const file = () => path.join(configDir, 'secrets.enc');
const records = () => path.join(configDir, 'secrets');
const open = () => openFileSecretStore({ configDir, storeKey: () => KEY });
const version = () => (JSON.parse(readFileSync(file(), 'utf8')) as { version: number }).version;

async function contents(): Promise<Record<string, unknown>> {
  const store = open();
  const out: Record<string, unknown> = {};
  for (const name of await store.listProfiles()) out[name] = await store.get(name);
  return out;
}

beforeEach(() => {
  configDir = tempDir('syncauth-migrate-');
  copyFileSync(FIXTURE, file());
  crash.renamesLeft = -1;
  crash.readOnly = false;
  crash.renames = [];
});

describe('migrating a format 2 store', () => {
  test.each([
    ['after the first record', 1],
    ['after every record, at the keyring that replaces the old file', 4],
  ])('a write that dies %s leaves the old file as it was; the next opening completes the migration', async (_when, renamesBefore) => {
    const before = readFileSync(file(), 'utf8');
    // Left by an earlier migration that died too: a record of a profile the store does not hold.
    mkdirSync(records(), { recursive: true });
    writeFileSync(path.join(records(), 'ghost.enc'), 'left over');
    crash.renamesLeft = renamesBefore;
    await expect(open().get('docs')).rejects.toThrow('simulated crash during write');
    expect(crash.renames.at(-1)).toEqual(renamesBefore === 4 ? file() : expect.stringMatching(/secrets\/[^/]+\.(enc|token)$/));
    expect(readFileSync(file(), 'utf8')).toBe(before);

    expect(await contents()).toEqual(PROFILES);
    expect(version()).toBe(3);
    expect(readdirSync(records()).sort()).toEqual(['docs.enc', 'docs.token', 'other.v2.enc', 'photos.enc']);
  });

  test('one migration for concurrent openings in a process, and none after it', async () => {
    const store = open();
    const read = await Promise.all(Object.keys(PROFILES).flatMap((name) => [store.get(name), open().get(name)]));
    expect(read).toEqual(Object.values(PROFILES).flatMap((secrets) => [secrets, secrets]));
    // Three records, one access token and one keyring written, once.
    expect(crash.renames.filter((to) => to === file())).toHaveLength(1);
    expect(crash.renames).toHaveLength(5);
    await contents();
    expect(crash.renames).toHaveLength(5);
  });

  test('in a config dir that cannot be written, reads serve the old file as it is; writes fail and change nothing', async () => {
    const before = readFileSync(file(), 'utf8');
    crash.readOnly = true;
    expect(await contents()).toEqual(PROFILES);
    const refused = await open().set('docs', { access_token: 'new' }).then(() => undefined, (error: unknown) => error);
    expect((refused as NodeJS.ErrnoException).code).toBe('EROFS');
    expect(readFileSync(file(), 'utf8')).toBe(before);
    expect(existsSync(records())).toBe(false);
    // A wrong key is still refused there.
    const wrong = await openFileSecretStore({ configDir, storeKey: () => 'not the key of this store' }).get('docs').catch((error: unknown) => error);
    expect(isSecretStoreError(wrong, 'STORE_LOCKED')).toBe(true);
  });
});
