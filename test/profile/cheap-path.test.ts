// The renewal path's file work, made cheap (a cached read recognised by one stat, locks taken with one call,
// the renewal record written without a flush), must stay as safe as before: a read never returns what another
// writer replaced, a holder past the stale time keeps its lock, a holder whose lock vanished learns of it, and
// a record written without a flush is still whole or absent.
import type * as Fs from 'node:fs';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { openProfileStore } from '../../src/profile/index.js';
import { writePrivateFile } from '../../src/profile/files.js';
import { withFileLock } from '../../src/profile/lock.js';

const crash = vi.hoisted(() => ({ armed: false, tmpfiles: [] as string[], noLinks: false }));

// The synchronous rename commits a write made without a flush: failing it is the crash to survive.
vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof Fs>();
  const renameSync = (from: string, to: string): void => {
    if (!crash.armed || !/\.\d+$/.test(String(from))) return real.renameSync(from, to);
    crash.armed = false;
    crash.tmpfiles.push(String(from));
    throw new Error('simulated crash during write');
  };
  // A file system that makes no symbolic links (Windows without the right to, FAT) refuses them so.
  const symlinkSync = ((target: string, where: string) => {
    if (crash.noLinks) throw Object.assign(new Error(`EPERM: operation not permitted, symlink '${target}' -> '${where}'`), { code: 'EPERM' });
    return real.symlinkSync(target, where);
  }) as typeof real.symlinkSync;
  return { ...real, default: { ...real, renameSync, symlinkSync }, renameSync, symlinkSync };
});

let configDir: string;
beforeEach(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-cheap-'));
  crash.armed = false;
  crash.tmpfiles = [];
  crash.noLinks = false;
});
afterEach(() => rmSync(configDir, { recursive: true, force: true }));

describe('the cached read', () => {
  test('sees a replacement by another writer, an edit in place of the same size, and a removal', async () => {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({ connectorName: 'aaaa' }));
    expect((await store.read('docs'))?.connectorName).toBe('aaaa');

    // Another process's atomic write: a new file renamed over the old one.
    const other = JSON.parse(readFileSync(store.fileOf('docs'), 'utf8')) as Record<string, unknown>;
    writeFileSync(`${store.fileOf('docs')}.tmp`, `${JSON.stringify({ ...other, connectorName: 'bbbb' }, null, 2)}\n`);
    renameSync(`${store.fileOf('docs')}.tmp`, store.fileOf('docs'));
    expect((await store.read('docs'))?.connectorName).toBe('bbbb');

    // An edit in place that keeps the size: the inode stays, the mtime moves.
    const before = statSync(store.fileOf('docs'));
    writeFileSync(store.fileOf('docs'), readFileSync(store.fileOf('docs'), 'utf8').replace('bbbb', 'cccc'));
    const later = new Date(before.mtimeMs + 1_000);
    utimesSync(store.fileOf('docs'), later, later);
    expect(statSync(store.fileOf('docs')).size).toBe(before.size);
    expect((await store.read('docs'))?.connectorName).toBe('cccc');

    rmSync(store.fileOf('docs'));
    expect(await store.read('docs')).toBeUndefined();
  });

  test('what it returns cannot be changed in place by one caller under another', async () => {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({ connectorName: 'kept' }));
    const state = (await store.read('docs')) as { connectorName?: string };
    expect(() => {
      state.connectorName = 'changed';
    }).toThrow(TypeError);
    expect((await store.read('docs'))?.connectorName).toBe('kept');
  });
});

describe('the renewal record, written without a flush', () => {
  test('a crash before its rename keeps the previous state whole and leaves no temporary file', async () => {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({ connectorId: 'conn-1' }));
    const before = readFileSync(store.fileOf('docs'), 'utf8');
    crash.armed = true;
    await expect(store.update('docs', (current) => ({ ...current, accessTokenExpiresAt: new Date().toISOString() }), { durable: false })).rejects.toThrow('simulated crash');
    expect(crash.tmpfiles).toHaveLength(1);
    expect(readFileSync(store.fileOf('docs'), 'utf8')).toBe(before);
    expect(readdirSync(store.dir)).toEqual(['docs.json']);
    // And a later one goes through, whole.
    await store.update('docs', (current) => ({ ...current, accessTokenExpiresAt: new Date(0).toISOString() }), { durable: false });
    expect((await store.read('docs'))?.connectorId).toBe('conn-1');
    expect(JSON.parse(readFileSync(store.fileOf('docs'), 'utf8')).accessTokenExpiresAt).toBe(new Date(0).toISOString());
  });

  test('is private (0600) and follows no link left at its temporary name', async () => {
    const file = path.join(configDir, 'f.json');
    await writePrivateFile(file, 'one\n', undefined, { durable: false });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).toBe('one\n');
  });
});

describe('the lock', () => {
  const options = (staleMs: number) => ({ waitMs: 8_000, staleMs, timeoutError: () => new Error('timed out') });

  test('a holder past the stale time keeps it: its refresh stops a waiter from taking it over', async () => {
    const lock = path.join(configDir, 'x.lock');
    const order: string[] = [];
    let heldSignal: AbortSignal | undefined;
    const holder = withFileLock(lock, async (signal) => {
      heldSignal = signal;
      order.push('holder in');
      await sleep(5_000); // 2.5 × the stale time
      order.push('holder out');
    }, options(2_000));
    await sleep(200);
    const waiter = withFileLock(lock, async () => {
      order.push('waiter in');
    }, options(2_000));
    await Promise.all([holder, waiter]);
    expect(order).toEqual(['holder in', 'holder out', 'waiter in']);
    expect(heldSignal?.aborted).toBe(false);
    expect(readdirSync(configDir)).toEqual([]);
  }, 20_000);

  test('where the file system makes no links, is a directory that still excludes, and goes with its holder', async () => {
    crash.noLinks = true;
    const lock = path.join(configDir, 'x.lock');
    const seen = await withFileLock(lock, async () => {
      const inside = statSync(lock).isDirectory();
      const other = await withFileLock(lock, async () => 'taken', { ...options(2_000), waitMs: 300 }).catch((error: Error) => error.message);
      return { inside, other };
    }, options(2_000));
    expect(seen).toEqual({ inside: true, other: 'timed out' });
    expect(readdirSync(configDir)).toEqual([]);
  });

  test('a holder whose lock was removed under it is told through its signal', async () => {
    const lock = path.join(configDir, 'x.lock');
    const reason = await withFileLock(lock, async (signal) => {
      rmSync(lock);
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      return signal.reason as Error;
    }, options(2_000));
    expect(reason.message).toContain('was lost');
  }, 10_000);
});
