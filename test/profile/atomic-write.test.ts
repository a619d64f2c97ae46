// A write that dies half-way must leave the previous file whole and no temporary file behind. The crash is
// simulated at the rename that would commit it, after its temporary file exists and holds part of the new content.
import type * as Fs from 'node:fs';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';

const crash = vi.hoisted(() => ({ armed: false, tmpfiles: [] as string[] }));

// The rename is where an atomic write commits: failing it, after the temporary file was created and written,
// is the crash to survive. The temporary file is cut to part of its content first, as a killed writer leaves it.
vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof Fs>();
  const renameSync = (from: string, to: string): void => {
    if (!crash.armed || !/\.\d+$/.test(String(from))) return real.renameSync(from, to);
    crash.armed = false;
    crash.tmpfiles.push(String(from));
    real.truncateSync(from, 20);
    throw new Error('simulated crash during write');
  };
  return { ...real, default: { ...real, renameSync }, renameSync };
});

let configDir: string;

beforeEach(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-atomic-'));
  crash.armed = false;
  crash.tmpfiles = [];
});

afterEach(() => {
  rmSync(configDir, { recursive: true, force: true });
});

describe('atomic writes', () => {
  test('profile state: a failed write keeps the old state and leaves no temporary file', async () => {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({ schedule: 'daily' }));
    const before = readFileSync(store.fileOf('docs'), 'utf8');

    crash.armed = true;
    await expect(store.update('docs', (current) => ({ ...current, schedule: 'weekly' }))).rejects.toThrow(
      'simulated crash during write',
    );
    expect(crash.tmpfiles).toHaveLength(1);
    expect(path.dirname(crash.tmpfiles[0] ?? '')).toBe(store.dir);
    expect(readFileSync(store.fileOf('docs'), 'utf8')).toBe(before);
    expect(readdirSync(store.dir)).toEqual(['docs.json']);
    expect((await store.read('docs'))?.schedule).toBe('daily');

    // The lock was released: the next update goes through.
    expect((await store.update('docs', () => ({ schedule: 'weekly' })))?.schedule).toBe('weekly');
  });

  test('encrypted secret file: a failed write keeps the old secrets and leaves no temporary file', async () => {
    const store = openSecretStore({ kind: 'file', configDir, storeKey: 'atomic test key, long enough' });
    await store.set('docs', { refresh_token: 'rt-old' });
    // The profile's record in the store's format 3 (the keyring, secrets.enc, is written once, with the store).
    const file = path.join(configDir, 'secrets', 'docs.enc');
    const before = readFileSync(file, 'utf8');

    crash.armed = true;
    await expect(store.set('docs', { refresh_token: 'rt-new' })).rejects.toThrow('simulated crash during write');
    expect(crash.tmpfiles).toHaveLength(1);
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect(readdirSync(path.dirname(file))).toEqual(['docs.enc']);
    expect(await store.get('docs')).toEqual({ refresh_token: 'rt-old' });
  });
});
