// A successful renewal is recorded in the profile's renewal record, which only the renewal lock's holder
// writes, in place and without a flush: the state file (and its write lock) is left alone, every read of the
// state shows the renewal, and a record that a crash left old, zeroed or torn reads as an older renewal or none,
// never as an error and never as a later one than happened.
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { openProfileStore } from '../../src/profile/index.js';
import { RENEWAL_RECORD_SIZE, encodeRenewalRecord } from '../../src/profile/renewal-record.js';
import { recordFailure, renewHoldingLock } from '../../src/sync/renew.js';
import { emulator, obtainGrant } from '../daemon/helpers.js';

let configDir: string;
beforeEach(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-record-'));
});
afterEach(() => rmSync(configDir, { recursive: true, force: true }));

const EARLIER = '2020-01-01T00:00:00.000Z';
const EARLIER_EXPIRY = '2020-01-01T04:00:00.000Z';

describe('a renewal', () => {
  test('writes neither the state file nor its lock, and a read of the state shows it', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({ connectorId: 'conn-1', accessTokenExpiresAt: EARLIER_EXPIRY, lastRenewalAt: EARLIER }));
    const file = store.fileOf('docs');
    const before = { text: readFileSync(file, 'utf8'), ino: statSync(file).ino };
    const tokens = await store.withLock('docs', () =>
      renewHoldingLock({ profiles: store, name: 'docs', app: grant, refreshToken: grant.refreshToken, tokenUrl: emu.tokenUrl }),
    );
    expect({ text: readFileSync(file, 'utf8'), ino: statSync(file).ino }).toEqual(before);
    expect(readdirSync(store.dir).sort()).toEqual(['docs.json', 'docs.renewed']);
    const state = await store.read('docs');
    expect(state?.accessTokenExpiresAt).toBe(new Date(tokens.expiresAt).toISOString());
    expect(Date.parse(state?.lastRenewalAt ?? '')).toBeGreaterThan(Date.parse(EARLIER));
    expect(state?.connectorId).toBe('conn-1');
    // Another process's store (nothing cached) sees the same, and so does a listing.
    expect((await openProfileStore(configDir).list()).map((s) => s.accessTokenExpiresAt)).toEqual([state?.accessTokenExpiresAt]);
    // The record is private and holds no token.
    expect(statSync(store.recordFileOf('docs')).mode & 0o777).toBe(0o600);
    expect(readFileSync(store.recordFileOf('docs'), 'utf8')).not.toContain(tokens.accessToken);
  });

  test('clears a failure recorded before it in the state file', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const store = openProfileStore(configDir);
    await recordFailure(store, 'docs', Object.assign(new Error('the service answered 500'), { code: 'SERVICE_ERROR' }));
    expect((await store.read('docs'))?.lastError?.code).toBe('SERVICE_ERROR');
    await store.withLock('docs', () => renewHoldingLock({ profiles: store, name: 'docs', app: grant, refreshToken: grant.refreshToken, tokenUrl: emu.tokenUrl }));
    const state = JSON.parse(readFileSync(store.fileOf('docs'), 'utf8')) as Record<string, unknown>;
    expect(state.lastError).toBeUndefined();
    expect((await openProfileStore(configDir).read('docs'))?.lastError).toBeUndefined();
  });
});

describe('the renewal record', () => {
  const renewedAt = Date.parse('2030-01-02T00:00:00.000Z');
  const record = { accessTokenExpiresAt: renewedAt + 14_400_000, lastRenewalAt: renewedAt };

  async function storeWithRecord() {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({ connectorId: 'conn-1', accessTokenExpiresAt: EARLIER_EXPIRY, lastRenewalAt: EARLIER }));
    await store.withLock('docs', () => store.recordRenewal('docs', record));
    return store;
  }

  test('a later renewal in the state file (setup, rotate, an earlier release) wins over it', async () => {
    const store = await storeWithRecord();
    expect((await store.read('docs'))?.accessTokenExpiresAt).toBe(new Date(record.accessTokenExpiresAt).toISOString());
    const later = '2030-01-03T00:00:00.000Z';
    await store.update('docs', (current) => ({ ...current, accessTokenExpiresAt: '2030-01-03T04:00:00.000Z', lastRenewalAt: later }));
    expect((await openProfileStore(configDir).read('docs'))?.lastRenewalAt).toBe(later);
    expect((await store.read('docs'))?.accessTokenExpiresAt).toBe('2030-01-03T04:00:00.000Z');
  });

  // What a machine crash can leave of a write made without a flush, and a reader meeting a write half-copied.
  test.each([
    ['zeroed', () => Buffer.alloc(RENEWAL_RECORD_SIZE)],
    ['empty', () => Buffer.alloc(0)],
    ['cut short', () => encodeRenewalRecord('docs', record).subarray(0, 100)],
    [
      'torn between two writes',
      () => {
        const newer = encodeRenewalRecord('docs', { accessTokenExpiresAt: record.accessTokenExpiresAt + 86_400_000, lastRenewalAt: record.lastRenewalAt + 86_400_000 });
        return Buffer.concat([newer.subarray(0, 90), encodeRenewalRecord('docs', record).subarray(90)]);
      },
    ],
    ['of another profile', () => encodeRenewalRecord('other', record)],
    ['of a later format', () => Buffer.from(encodeRenewalRecord('docs', record).toString().replace('"version":1', '"version":2'))],
  ])('%s, reads as no record: the state file decides, and nothing fails', async (_label, bytes) => {
    await storeWithRecord();
    writeFileSync(path.join(configDir, 'profiles', 'docs.renewed'), bytes());
    const state = await openProfileStore(configDir).read('docs');
    expect(state?.accessTokenExpiresAt).toBe(EARLIER_EXPIRY);
    expect(state?.connectorId).toBe('conn-1');
  });

  test('written again at once by another process is read again, never served from a stale cache', async () => {
    const writer = await storeWithRecord();
    const reader = openProfileStore(configDir);
    const file = writer.recordFileOf('docs');
    expect((await reader.read('docs'))?.lastRenewalAt).toBe(new Date(record.lastRenewalAt).toISOString());
    // Writes closer together than the file system's clock tick leave the same size, inode and mtime: the
    // second one's mtime is set back to the first's, as a coarse clock would have left it.
    for (let i = 1; i <= 3; i += 1) {
      const { atime, mtime } = statSync(file);
      const next = { accessTokenExpiresAt: record.accessTokenExpiresAt + i * 1000, lastRenewalAt: record.lastRenewalAt + i * 1000 };
      await writer.withLock('docs', () => writer.recordRenewal('docs', next));
      utimesSync(file, atime, mtime);
      expect((await reader.read('docs'))?.accessTokenExpiresAt).toBe(new Date(next.accessTokenExpiresAt).toISOString());
    }
  });

  test('overwrites a longer file whole, and follows no link nor opens a FIFO at its name', async () => {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({ connectorId: 'conn-1' }));
    writeFileSync(store.recordFileOf('docs'), 'x'.repeat(4096));
    await store.withLock('docs', () => store.recordRenewal('docs', record));
    expect(statSync(store.recordFileOf('docs')).size).toBe(RENEWAL_RECORD_SIZE);
    expect((await openProfileStore(configDir).read('docs'))?.lastRenewalAt).toBe(new Date(record.lastRenewalAt).toISOString());
    // A link planted at the record's name: the write fails rather than write through it.
    const elsewhere = path.join(configDir, 'elsewhere');
    writeFileSync(elsewhere, 'untouched');
    rmSync(store.recordFileOf('docs'));
    symlinkSync(elsewhere, store.recordFileOf('docs'));
    await expect(store.withLock('docs', () => store.recordRenewal('docs', record))).rejects.toThrow();
    expect(readFileSync(elsewhere, 'utf8')).toBe('untouched');
    expect(lstatSync(store.recordFileOf('docs')).isSymbolicLink()).toBe(true);
    // And a read does not follow it either.
    expect((await openProfileStore(configDir).read('docs'))?.lastRenewalAt).toBeUndefined();
    // A FIFO at its name neither holds a write nor a read until a reader or writer comes.
    rmSync(store.recordFileOf('docs'));
    execFileSync('mkfifo', [store.recordFileOf('docs')]);
    await expect(store.withLock('docs', () => store.recordRenewal('docs', record))).rejects.toThrow();
    expect((await openProfileStore(configDir).read('docs'))?.connectorId).toBe('conn-1');
  });

  test('alone (a profile served from the environment) names the profile; delete removes it', async () => {
    const store = openProfileStore(configDir);
    await store.withLock('env', () => store.recordRenewal('env', record));
    expect(await store.names()).toEqual(['env']);
    expect(await openProfileStore(configDir).read('env')).toMatchObject({
      profile: 'env', accessTokenExpiresAt: new Date(record.accessTokenExpiresAt).toISOString(), lastRenewalAt: new Date(record.lastRenewalAt).toISOString(),
    });
    await store.delete('env');
    expect(readdirSync(store.dir)).toEqual([]);
    expect(await store.read('env')).toBeUndefined();
  });
});
