// Per-profile state files. Readers never lock: every write is an atomic rename, so a read sees a whole file.
// Writers take a short per-profile lock around read-modify-write, so two processes never lose each other's
// changes; renewals take a second, longer lock of their own (withLock) so a slow network call never blocks
// plain state updates such as `status` recording an error.
import { randomUUID } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ValidationError, fieldName } from '../errors.js';
import { redactDeep } from '../redact.js';
import { ProfileStoreError } from './errors.js';
import { ensurePrivateDir, readTextIfExists, writePrivateFile } from './files.js';
import { withFileLock } from './lock.js';
import { assertProfileName, isProfileName } from './name.js';
import { ProfileStateSchema } from './state.js';
import type { ProfileState, ProfileStateDraft } from './state.js';
import { reauthorizeCommand } from './name.js';

export interface ProfileStoreOptions {
  /** How long update() and delete() wait for another process's write to finish. Default 15 s. */
  writeLockWaitMs?: number;
  /** How long withLock() waits for another process's renewal by default. Default 60 s. */
  lockWaitMs?: number;
  /** A lock its holder stopped refreshing this long ago is taken over. Default 10 s (minimum 2 s). */
  staleMs?: number;
}

export interface UpdateOptions {
  /**
   * Treat a corrupt state file as absent instead of refusing. Off by default: a file that does not parse
   * may still hold the only record of a connector id, so only an explicit reset (e.g. `setup` starting over)
   * may replace it.
   */
  resetCorrupt?: boolean;
}

export interface ProfileStore {
  /** `<configDir>/profiles`. */
  readonly dir: string;
  /** The state file of a profile. */
  fileOf(name: string): string;
  /** The profile's state, or undefined when it has none. Throws PROFILE_CORRUPT for a file that does not validate. */
  read(name: string): Promise<ProfileState | undefined>;
  /** Names of the profiles that have a state file, sorted; no file is parsed, so one corrupt file hides nothing. */
  names(): Promise<string[]>;
  /** Every profile's state, sorted by name. Throws PROFILE_CORRUPT if any file does not validate. */
  list(): Promise<ProfileState[]>;
  /**
   * Lock, re-read, mutate, write atomically, unlock. `mutate` returning undefined deletes the state; returning
   * `current` itself (the same object) writes nothing. `version`, `profile` and the timestamps are filled in.
   */
  update(
    name: string,
    mutate: (current: ProfileState | undefined) => ProfileStateDraft | undefined,
    options?: UpdateOptions,
  ): Promise<ProfileState | undefined>;
  /** Removes the state file, even a corrupt one. */
  delete(name: string): Promise<void>;
  /**
   * Runs `fn` holding the profile's renewal lock, which excludes other processes' renewals of the same profile
   * (not state updates: call update() inside). Re-read the state inside `fn`: another process may have renewed
   * while this one waited. The signal aborts if the lock is lost while `fn` runs.
   */
  withLock<T>(name: string, fn: (signal: AbortSignal) => Promise<T>, options?: { waitMs?: number }): Promise<T>;
}

/** A fresh value for `ProfileState.secretsVersion`, to store whenever the profile's secrets are written. */
export function newSecretsVersion(): string {
  return randomUUID();
}

export function openProfileStore(configDir: string, options: ProfileStoreOptions = {}): ProfileStore {
  const dir = path.join(configDir, 'profiles');
  const staleMs = Math.max(options.staleMs ?? 10_000, 2_000);
  const writeLockWaitMs = options.writeLockWaitMs ?? 15_000;
  const defaultLockWaitMs = options.lockWaitMs ?? 60_000;

  const fileOf = (name: string): string => {
    assertProfileName(name);
    return path.join(dir, `${name}.json`);
  };

  async function readState(name: string): Promise<ProfileState | undefined> {
    const file = fileOf(name);
    const text = await readTextIfExists(file);
    if (text === undefined) return undefined;
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      throw corrupt(name, file, 'it is not JSON', error);
    }
    const parsed = ProfileStateSchema.safeParse(data);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue ? fieldName(issue.path) : '';
      throw corrupt(name, file, `${where ? `${where}: ` : ''}${issue?.message ?? 'invalid'}`);
    }
    if (parsed.data.profile !== name) throw corrupt(name, file, `it names profile "${parsed.data.profile}"`);
    return parsed.data;
  }

  async function listNames(): Promise<string[]> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    // Temporary files of an interrupted atomic write end in a random suffix, lock directories in `.lock`:
    // neither matches `<valid name>.json` as a regular file.
    return entries
      .filter((entry) => entry.isFile() && entry.name.endsWith('.json'))
      .map((entry) => entry.name.slice(0, -'.json'.length))
      .filter(isProfileName)
      .sort();
  }

  function writeLocked<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const lockPath = path.join(dir, `${name}.json.lock`);
    return withFileLock(lockPath, fn, {
      waitMs: writeLockWaitMs,
      staleMs,
      timeoutError: () =>
        new ProfileStoreError(
          'PROFILE_LOCK_TIMEOUT',
          `could not lock the state of profile "${name}" within ${seconds(writeLockWaitMs)}: another syncauth ` +
            `process holds ${lockPath}. Try again in a moment.`,
          { path: lockPath },
        ),
    });
  }

  return {
    dir,
    fileOf,

    read(name) {
      return readState(name);
    },

    names: listNames,

    async list() {
      const states = [];
      for (const name of await listNames()) {
        const state = await readState(name);
        if (state) states.push(state);
      }
      return states;
    },

    async update(name, mutate, updateOptions = {}) {
      const file = fileOf(name);
      await ensurePrivateDir(dir, { tighten: true });
      return writeLocked(name, async () => {
        let current: ProfileState | undefined;
        try {
          current = await readState(name);
        } catch (error) {
          if (!(updateOptions.resetCorrupt && error instanceof ProfileStoreError && error.code === 'PROFILE_CORRUPT')) {
            throw error;
          }
        }
        const draft = mutate(current);
        if (draft === undefined) {
          await rm(file, { force: true });
          return undefined;
        }
        if (current !== undefined && draft === current) return current;
        if (draft.profile !== undefined && draft.profile !== name) {
          throw new ProfileStoreError(
            'PROFILE_MISMATCH',
            `the state written for profile "${name}" names profile "${draft.profile}"`,
            { path: file },
          );
        }
        const now = new Date().toISOString();
        // The file is plaintext: no field may carry a secret, not even inside an error message it records.
        const parsed = ProfileStateSchema.safeParse({
          ...redactDeep(draft),
          version: 1,
          profile: name,
          createdAt: current?.createdAt ?? draft.createdAt ?? now,
          updatedAt: now,
        });
        if (!parsed.success) {
          // zod's messages name the field and the expected type, never the rejected value.
          throw new ValidationError(
            parsed.error.issues.map((issue) => ({ field: fieldName(issue.path, 'profileState'), message: issue.message })),
          );
        }
        await writePrivateFile(file, `${JSON.stringify(parsed.data, null, 2)}\n`);
        return parsed.data;
      });
    },

    async delete(name) {
      const file = fileOf(name);
      try {
        await writeLocked(name, () => rm(file, { force: true }));
      } catch (error) {
        // No directory means no state and nowhere to put a lock: already deleted.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw error;
      }
    },

    async withLock(name, fn, lockOptions = {}) {
      assertProfileName(name);
      await ensurePrivateDir(dir, { tighten: true });
      const lockPath = path.join(dir, `${name}.renewal.lock`);
      const waitMs = lockOptions.waitMs ?? defaultLockWaitMs;
      return withFileLock(lockPath, fn, {
        waitMs,
        staleMs,
        recordOwner: true,
        timeoutError: () =>
          new ProfileStoreError(
            'PROFILE_LOCK_TIMEOUT',
            `profile "${name}" is busy: another syncauth process has held its renewal lock (${lockPath}) for ` +
              `more than ${seconds(waitMs)}. Try again later; a lock left by a process that died is taken over ` +
              `${seconds(staleMs)} after it stopped.`,
            { path: lockPath },
          ),
      });
    },
  };
}

function corrupt(name: string, file: string, reason: string, cause?: unknown): ProfileStoreError {
  return new ProfileStoreError(
    'PROFILE_CORRUPT',
    `the state file of profile "${name}" is not valid (${reason}): ${file}. It holds no secrets: fix it by ` +
      `hand, or delete it and run \`${reauthorizeCommand(name)}\` again.`,
    { path: file, cause },
  );
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}
