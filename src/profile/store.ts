// Per-profile state files. Readers never lock: every write is an atomic rename, so a read sees a whole file.
// Writers take a short per-profile lock around read-modify-write, so two processes never lose each other's
// changes; renewals take a second, longer lock of their own (withLock) so a slow network call never blocks
// plain state updates such as `status` recording an error.
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { open, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ValidationError, fieldName } from '../errors.js';
import { redactDeep } from '../redact.js';
import { ProfileStoreError } from './errors.js';
import { ensurePrivateDir, writePrivateFile, type FileIdentity } from './files.js';
import { withFileLock } from './lock.js';
import { assertProfileName, isProfileName } from './name.js';
import { ProfileStateSchema, stateVersionOf } from './state.js';
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
  /**
   * Flush the file to disk before it replaces the old one (default true). A record that is only a cache of
   * what can be learnt again (a renewal's expiry and time) skips it: after a machine crash the worst it costs
   * is one early renewal, while every fsync costs the renewal path more than the whole HTTP exchange.
   */
  durable?: boolean;
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

  // What this process last read or wrote, keyed by the file's identity (inode, size, mtime): every write is a
  // new inode through a rename, and an edit in place changes mtime, so a match means the same bytes. A hit
  // costs one stat instead of open, read, close and a parse; the renewal path reads the state twice per renewal.
  const known = new Map<string, { identity: FileIdentity; state: ProfileState }>();
  // The directory is checked (created, tightened) once per store; a write that finds it gone checks again.
  let dirReady: Promise<void> | undefined;
  const ensureDir = (): Promise<void> => {
    dirReady ??= ensurePrivateDir(dir, { tighten: true }).catch((error: unknown) => {
      dirReady = undefined;
      throw error;
    });
    return dirReady;
  };
  const retryingOnMissingDir = async <T>(fn: () => Promise<T>): Promise<T> => {
    await ensureDir();
    try {
      return await fn();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      dirReady = undefined;
      await ensureDir();
      return fn();
    }
  };

  const fileOf = (name: string): string => {
    assertProfileName(name);
    return path.join(dir, `${name}.json`);
  };

  async function readState(name: string): Promise<ProfileState | undefined> {
    const file = fileOf(name);
    const cached = known.get(name);
    if (cached) {
      // Synchronous: one local stat, cheaper than a thread-pool round trip.
      const info = statSync(file, { throwIfNoEntry: false });
      if (!info) {
        known.delete(name);
        return undefined;
      }
      if (sameIdentity(info, cached.identity)) return cached.state;
    }
    let text: string;
    let identity: FileIdentity;
    try {
      const handle = await open(file, 'r');
      try {
        const info = await handle.stat();
        identity = { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
        text = await handle.readFile('utf8');
      } finally {
        await handle.close();
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        known.delete(name);
        return undefined;
      }
      throw error;
    }
    const state = parseState(name, file, text);
    known.set(name, { identity, state });
    return state;
  }

  function parseState(name: string, file: string, text: string): ProfileState {
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
    // Shared with every later reader of the cache: nobody may change it in place.
    return deepFreeze(parsed.data);
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
      // A process killed mid-write (kill -9, the OOM killer) must not hold up the next one's write of this
      // profile, and with it a renewal's token, for the stale time: the waiter takes the lock over at once.
      recordOwner: true,
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
      return retryingOnMissingDir(() => writeLocked(name, async () => {
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
          known.delete(name);
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
          version: stateVersionOf(draft),
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
        known.delete(name);
        const identity = await writePrivateFile(file, `${JSON.stringify(parsed.data, null, 2)}\n`, undefined, {
          durable: updateOptions.durable ?? true,
          followLinks: false,
        });
        const state = deepFreeze(parsed.data);
        known.set(name, { identity, state });
        return state;
      }));
    },

    async delete(name) {
      const file = fileOf(name);
      try {
        known.delete(name);
        await writeLocked(name, () => rm(file, { force: true }));
      } catch (error) {
        // No directory means no state and nowhere to put a lock: already deleted.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw error;
      }
    },

    async withLock(name, fn, lockOptions = {}) {
      assertProfileName(name);
      await ensureDir();
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

function sameIdentity(info: { ino: number; size: number; mtimeMs: number }, identity: FileIdentity): boolean {
  return info.ino === identity.ino && info.size === identity.size && info.mtimeMs === identity.mtimeMs;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
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
