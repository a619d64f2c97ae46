// The daemon opens the file store once per profile. Each store deriving the same key at start cost 32 MiB and
// 0.1 s of scrypt per profile, four at once on the thread pool: the real-process soak saw a restarted daemon
// with three profiles reach 185 MiB RSS for a moment, twice its steady size. One derivation per key and salt
// in a process is enough, shared by every store, even while it is under way.
import type * as Crypto from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

const calls = vi.hoisted(() => ({ scrypt: 0 }));
vi.mock('node:crypto', async (importOriginal) => {
  const real = await importOriginal<typeof Crypto>();
  return {
    ...real,
    scrypt: (...args: Parameters<typeof real.scrypt>) => {
      calls.scrypt += 1;
      return (real.scrypt as (...a: unknown[]) => void)(...args);
    },
  };
});

const { openSecretStore, isSecretStoreError } = await import('../../src/credentials/index.js');

const KEY = 'a store key long enough for a new store';
let configDir: string;
beforeEach(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-kdf-'));
  calls.scrypt = 0;
});
afterEach(() => rmSync(configDir, { recursive: true, force: true }));

const open = (storeKey = KEY) => openSecretStore({ kind: 'file', configDir, env: {}, storeKey });

describe('the file store’s key derivation', () => {
  it('derives a key once for every store of the process, even when they read at the same moment', async () => {
    await open().set('p1', { app_key: 'k1', app_secret: 's1', refresh_token: 'r1' });
    await open().set('p2', { app_key: 'k2', app_secret: 's2', refresh_token: 'r2' });
    const before = calls.scrypt;
    const stores = Array.from({ length: 6 }, () => open());
    const read = await Promise.all(stores.map((store, i) => store.get(i % 2 === 0 ? 'p1' : 'p2')));
    expect(read.map((r) => r.app_key)).toEqual(['k1', 'k2', 'k1', 'k2', 'k1', 'k2']);
    expect(calls.scrypt - before).toBeLessThanOrEqual(1);
    // Writing the first profile of a new store drew the salt; every write after it reused that key too.
    expect(calls.scrypt).toBe(1);
  });

  it('still refuses a wrong key, and the right one opens the store after it', async () => {
    await open().set('p1', { app_key: 'k1', app_secret: 's1', refresh_token: 'r1' });
    const wrong = await open('not the key that wrote this store').get('p1').catch((error: unknown) => error);
    expect(isSecretStoreError(wrong, 'STORE_LOCKED')).toBe(true);
    expect((await open().get('p1')).app_key).toBe('k1');
  });
});
