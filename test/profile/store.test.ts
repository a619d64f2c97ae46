import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { isProfileStoreError, newSecretsVersion, openProfileStore } from '../../src/profile/index.js';
import type { ProfileState, ProfileStoreError, ProfileStoreErrorCode } from '../../src/profile/index.js';
import { expectAllSucceeded, runTogether } from './helpers.js';

const WORKER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/profile-worker.ts');

let configDir: string;

beforeEach(() => {
  configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-profile-'));
});

afterEach(() => {
  rmSync(configDir, { recursive: true, force: true });
});

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
}

async function expectProfileError(promise: Promise<unknown>, code: ProfileStoreErrorCode): Promise<ProfileStoreError> {
  const error = await rejection(promise);
  expect(isProfileStoreError(error, code), String(error)).toBe(true);
  return error as ProfileStoreError;
}

describe('profile state', () => {
  test('update creates a state with its bookkeeping, read returns it, both private on disk', async () => {
    const nested = path.join(configDir, 'not', 'yet');
    const store = openProfileStore(nested);
    expect(await store.read('docs')).toBeUndefined();

    const written = await store.update('docs', () => ({ baseUrl: 'https://service.example', recursive: true, access: 'read' }));
    expect(written).toMatchObject({ version: 1, profile: 'docs', baseUrl: 'https://service.example', recursive: true });
    expect(written?.createdAt).toBe(written?.updatedAt);
    expect(await store.read('docs')).toEqual(written);

    expect(statSync(store.fileOf('docs')).mode & 0o777).toBe(0o600);
    expect(statSync(store.dir).mode & 0o777).toBe(0o700);
    expect(statSync(nested).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(path.join(nested, 'profiles', 'docs.json'), 'utf8'))).toEqual(written);
  });

  test('update hands the current state to mutate, keeps createdAt and moves updatedAt', async () => {
    const store = openProfileStore(configDir);
    const first = await store.update('docs', () => ({ connectorName: 'dropbox-docs' }));
    await new Promise((resolve) => setTimeout(resolve, 5));
    let seen: ProfileState | undefined;
    const second = await store.update('docs', (current) => {
      seen = current;
      return { ...current, connectorId: '3f0e5a4e-0000-4000-8000-000000000001', createdAt: '2000-01-01T00:00:00.000Z' };
    });
    expect(seen).toEqual(first);
    expect(second).toMatchObject({ connectorName: 'dropbox-docs', connectorId: '3f0e5a4e-0000-4000-8000-000000000001' });
    expect(second?.createdAt).toBe(first?.createdAt);
    expect(Date.parse(second?.updatedAt ?? '')).toBeGreaterThan(Date.parse(first?.updatedAt ?? ''));
  });

  test('mutate returning the current object writes nothing; returning undefined deletes', async () => {
    const store = openProfileStore(configDir);
    const first = await store.update('docs', () => ({ workflowId: 'wf-1' }));
    const before = readFileSync(store.fileOf('docs'), 'utf8');
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await store.update('docs', (current) => current)).toEqual(first);
    expect(readFileSync(store.fileOf('docs'), 'utf8')).toBe(before);

    expect(await store.update('docs', () => undefined)).toBeUndefined();
    expect(existsSync(store.fileOf('docs'))).toBe(false);
    expect(await store.read('docs')).toBeUndefined();
  });

  test('names and list show every profile, sorted, ignoring lock directories and temporary files', async () => {
    const store = openProfileStore(configDir);
    expect(await store.names()).toEqual([]);
    expect(await store.list()).toEqual([]);
    await store.update('zeta', () => ({}));
    await store.update('alpha.1', () => ({ schedule: 'daily' }));
    mkdirSync(path.join(store.dir, 'alpha.1.renewal.lock'));
    writeFileSync(path.join(store.dir, 'zeta.json.1234abcd'), '{"half":');
    writeFileSync(path.join(store.dir, 'notes.txt'), 'hello');
    expect(await store.names()).toEqual(['alpha.1', 'zeta']);
    expect((await store.list()).map((state) => state.profile)).toEqual(['alpha.1', 'zeta']);
  });

  test('delete removes the state; deleting what is not there is fine', async () => {
    const store = openProfileStore(configDir);
    await store.delete('docs');
    await store.update('docs', () => ({}));
    await store.delete('docs');
    expect(await store.read('docs')).toBeUndefined();
    expect(await store.names()).toEqual([]);
  });

  test.each(['', '-docs', '.hidden', '../escape', 'a/b', 'a:b', 'x'.repeat(65), 'sp ace'])(
    'refuses the profile name %j before touching the disk',
    async (name) => {
      const store = openProfileStore(configDir);
      for (const call of [
        () => store.read(name),
        () => store.update(name, () => ({})),
        () => store.delete(name),
        () => store.withLock(name, async () => undefined),
      ]) {
        expect(await rejection(call())).toBeInstanceOf(ValidationError);
      }
      expect(readdirSync(configDir)).toEqual([]);
    },
  );

  test('accepts names up to 64 characters of the safe alphabet', async () => {
    const store = openProfileStore(configDir);
    const name = `A${'b.-_9'.repeat(12)}xyz`;
    expect(name).toHaveLength(64);
    expect((await store.update(name, () => ({})))?.profile).toBe(name);
  });

  test('refuses fields the schema does not know, and values of the wrong shape', async () => {
    const store = openProfileStore(configDir);
    const unknownKey = await rejection(
      store.update('docs', () => ({ refresh_token: 'x' }) as unknown as ProfileState),
    );
    expect(unknownKey).toBeInstanceOf(ValidationError);
    expect((unknownKey as Error).message).toContain('refresh_token');

    const badTime = await rejection(store.update('docs', () => ({ accessTokenExpiresAt: 'tomorrow' })));
    expect(badTime).toBeInstanceOf(ValidationError);
    expect((badTime as Error).message).toContain('profileState.accessTokenExpiresAt');
    expect(existsSync(store.fileOf('docs'))).toBe(false);

    await expectProfileError(store.update('docs', () => ({ profile: 'other' })), 'PROFILE_MISMATCH');
  });

  test('records errors, renewal times and the secrets marker', async () => {
    const store = openProfileStore(configDir);
    const first = newSecretsVersion();
    const second = newSecretsVersion();
    expect(first).not.toBe(second);
    const state = await store.update('docs', () => ({
      accessTokenExpiresAt: '2030-01-01T04:00:00.000Z',
      lastRenewalAt: '2030-01-01T00:00:00.000Z',
      lastError: { code: 'invalid_grant', message: 'refresh token is invalid or revoked', at: '2030-01-01T00:00:01Z', terminal: true },
      needsReauthorization: true,
      secretsVersion: first,
    }));
    expect(await store.read('docs')).toEqual(state);
  });
});

describe('a state file that does not validate', () => {
  const cases: [string, (profile: string) => string, RegExp][] = [
    ['is not JSON', () => '{"version": 1, "prof', /not JSON/],
    ['has an unknown field', (p) => JSON.stringify({ version: 1, profile: p, createdAt: now(), updatedAt: now(), token: 'x' }), /token/],
    ['has a newer version', (p) => JSON.stringify({ version: 3, profile: p, createdAt: now(), updatedAt: now() }), /version/],
    ['names another profile', () => JSON.stringify({ version: 1, profile: 'other', createdAt: now(), updatedAt: now() }), /other/],
  ];

  test.each(cases)('that %s is reported with its path, and never overwritten by update', async (_what, content, reason) => {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({}));
    const file = store.fileOf('docs');
    const text = content('docs');
    writeFileSync(file, text);

    const readError = await expectProfileError(store.read('docs'), 'PROFILE_CORRUPT');
    expect(readError.message).toContain(file);
    expect(readError.message).toMatch(reason);
    expect(readError.message).toContain('syncauth setup --profile docs');
    expect(readError.path).toBe(file);

    await expectProfileError(store.update('docs', () => ({ schedule: 'daily' })), 'PROFILE_CORRUPT');
    expect(readFileSync(file, 'utf8')).toBe(text);
    await expectProfileError(store.list(), 'PROFILE_CORRUPT');
    expect(await store.names()).toEqual(['docs']);
  });

  test('update replaces it only when told to reset, and delete always removes it', async () => {
    const store = openProfileStore(configDir);
    await store.update('docs', () => ({}));
    await store.update('other', () => ({}));
    writeFileSync(store.fileOf('docs'), 'garbage');
    writeFileSync(store.fileOf('other'), 'garbage');

    let seen: ProfileState | undefined | 'not called' = 'not called';
    const reset = await store.update(
      'docs',
      (current) => {
        seen = current;
        return { schedule: 'daily' };
      },
      { resetCorrupt: true },
    );
    expect(seen).toBeUndefined();
    expect(reset).toMatchObject({ profile: 'docs', schedule: 'daily' });
    expect(await store.read('docs')).toEqual(reset);

    await store.delete('other');
    expect(existsSync(store.fileOf('other'))).toBe(false);
  });
});

function now(): string {
  return new Date().toISOString();
}

describe('locks', () => {
  test('concurrent updates in one process lose nothing', async () => {
    const store = openProfileStore(configDir);
    await Promise.all(
      Array.from({ length: 25 }, () =>
        store.update('docs', (current) => ({ ...current, connectorName: String(Number(current?.connectorName ?? '0') + 1) })),
      ),
    );
    expect((await store.read('docs'))?.connectorName).toBe('25');
  });

  test('updates from several processes at once lose nothing', async () => {
    const processes = 4;
    const perProcess = 20;
    const results = await runTogether(WORKER, processes, configDir, (barrier) => [
      'increment',
      configDir,
      'shared',
      String(perProcess),
      barrier,
    ]);
    expectAllSucceeded(results);
    const store = openProfileStore(configDir);
    expect((await store.read('shared'))?.connectorName).toBe(String(processes * perProcess));
    // Nothing left behind: no lock directory, no temporary file.
    expect(readdirSync(store.dir)).toEqual(['shared.json']);
  });

  test('withLock excludes other processes: no two critical sections overlap', async () => {
    const log = path.join(configDir, 'lock.log');
    writeFileSync(log, '');
    const processes = 3;
    const iterations = 6;
    const results = await runTogether(WORKER, processes, configDir, (barrier) => [
      'lock',
      configDir,
      'docs',
      String(iterations),
      barrier,
      log,
    ]);
    expectAllSucceeded(results);
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(processes * iterations * 2);
    for (let i = 0; i < lines.length; i += 2) {
      const [startWord, startPid] = (lines[i] ?? '').split(' ');
      const [endWord, endPid] = (lines[i + 1] ?? '').split(' ');
      expect(`${startWord}/${endWord}`).toBe('start/end');
      expect(endPid).toBe(startPid);
    }
    expect(new Set(lines.map((line) => line.split(' ')[1])).size).toBe(processes);
  });

  test('withLock waits for the holder, then runs', async () => {
    const store = openProfileStore(configDir);
    const order: string[] = [];
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstStarted!: () => void;
    const started = new Promise<void>((resolve) => (firstStarted = resolve));
    const first = store.withLock('docs', async () => {
      order.push('first in');
      firstStarted();
      await firstHeld;
      order.push('first out');
    });
    await started;
    const second = store.withLock('docs', async () => {
      order.push('second in');
      return 42;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(order).toEqual(['first in']);
    releaseFirst();
    await first;
    expect(await second).toBe(42);
    expect(order).toEqual(['first in', 'first out', 'second in']);
  });

  test('withLock gives up after its wait with PROFILE_LOCK_TIMEOUT naming the lock', async () => {
    const store = openProfileStore(configDir);
    let release!: () => void;
    const held = store.withLock('docs', () => new Promise<void>((resolve) => (release = resolve)));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const startedAt = Date.now();
    const error = await expectProfileError(store.withLock('docs', async () => 'never', { waitMs: 300 }), 'PROFILE_LOCK_TIMEOUT');
    const waited = Date.now() - startedAt;
    expect(waited).toBeGreaterThanOrEqual(280);
    expect(waited).toBeLessThan(3_000);
    expect(error.message).toContain(path.join(store.dir, 'docs.renewal.lock'));
    expect(error.message).toContain('profile "docs"');
    release();
    await held;
  });

  test('withLock is separate from the write lock, and a throwing holder releases it', async () => {
    const store = openProfileStore(configDir);
    const inside = await store.withLock('docs', async () => store.update('docs', () => ({ schedule: 'weekly' })));
    expect(inside?.schedule).toBe('weekly');
    await expect(store.withLock('docs', async () => {
      throw new Error('renewal failed');
    })).rejects.toThrow('renewal failed');
    expect(await store.withLock('docs', async () => 'again', { waitMs: 200 })).toBe('again');
  });

  test('a lock left by a process that died is taken over once stale', async () => {
    const store = openProfileStore(configDir, { staleMs: 2_000 });
    await store.update('docs', () => ({}));
    const lockDir = path.join(store.dir, 'docs.json.lock');
    mkdirSync(lockDir);
    const longAgo = new Date(Date.now() - 60_000);
    utimesSync(lockDir, longAgo, longAgo);
    const startedAt = Date.now();
    expect((await store.update('docs', () => ({ schedule: 'daily' })))?.schedule).toBe('daily');
    // Well under the write lock's 15 s wait: the lock was judged stale at once, not waited out.
    expect(Date.now() - startedAt).toBeLessThan(2_000);
    expect(existsSync(lockDir)).toBe(false);
  });

  test('a live lock held past the wait fails the update with PROFILE_LOCK_TIMEOUT and changes nothing', async () => {
    const store = openProfileStore(configDir, { writeLockWaitMs: 300 });
    await store.update('docs', () => ({ schedule: 'daily' }));
    const before = readFileSync(store.fileOf('docs'), 'utf8');
    mkdirSync(path.join(store.dir, 'docs.json.lock'));
    const error = await expectProfileError(store.update('docs', () => ({ schedule: 'weekly' })), 'PROFILE_LOCK_TIMEOUT');
    expect(error.message).toContain('docs.json.lock');
    expect(readFileSync(store.fileOf('docs'), 'utf8')).toBe(before);
  });
});
