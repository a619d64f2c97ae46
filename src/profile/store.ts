// Per-profile state files. Readers never lock: every write is an atomic rename, so a read sees a whole file.
// Writers take a short per-profile lock around read-modify-write, so two processes never lose each other's
// changes; renewals take a second, longer lock of their own (withLock) so a slow network call never blocks
// plain state updates such as `status` recording an error. A successful renewal writes neither the state file
// nor its lock: it overwrites the profile's renewal record (renewal-record.ts), which only the renewal lock's
// holder writes, and every read of the state overlays the record's expiry and renewal time on the file's.
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { open, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ValidationError, fieldName } from '../errors.js';
import { redactDeep } from '../redact.js';
import { ProfileStoreError } from './errors.js';
import { assertFileTrusted } from '../config-dir.js';
import { ensurePrivateDir, writePrivateFile, type FileIdentity } from './files.js';
import { withFileLock } from './lock.js';
import { readRenewalRecord, writeRenewalRecord, type RenewalRecord } from './renewal-record.js';
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
  /** The renewal record of a profile (renewal-record.ts). */
  recordFileOf(name: string): string;
  /**
   * The profile's state, the renewal record overlaid (its expiry and renewal time, when later than the state
   * file's), or undefined when it has neither. Throws PROFILE_CORRUPT for a state file that does not validate.
   */
  read(name: string): Promise<ProfileState | undefined>;
  /**
   * Names of the profiles that have a state file or a renewal record, sorted; no file is parsed, so one corrupt
   * file hides nothing.
   */
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
  /** Removes the state file, even a corrupt one, and the renewal record. */
  delete(name: string): Promise<void>;
  /**
   * Records a successful renewal (the token's expiry and when it was renewed) in the profile's renewal record,
   * without the state file's write lock and without a flush. Only the holder of the profile's renewal lock
   * (withLock) may call it: that lock is what keeps two writers of the record apart.
   */
  recordRenewal(name: string, record: RenewalRecord): Promise<void>;
  /**
   * Runs `fn` holding the profile's renewal lock, which excludes other processes' renewals of the same profile
   * (not state updates: call update() inside). Re-read the state inside `fn`: another process may have renewed
   * while this one waited. The signal aborts if the lock is lost while `fn` runs.
   */
  withLock<T>(name: string, fn: (signal: AbortSignal) => Promise<T>, options?: { waitMs?: number }): Promise<T>;
  /**
   * Lets go of what this process keeps of the profile between reads (its last state and renewal record): a
   * process that stops serving it (a fleet replica) holds nothing of it. The next read reads the files. Optional.
   */
  forget?(name: string): void;
}

/** A fresh value for `ProfileState.secretsVersion`, to store whenever the profile's secrets are written. */
export function newSecretsVersion(): string {
  return randomUUID();
}

export function openProfileStore(configDir: string, options: ProfileStoreOptions = {}): ProfileStore {
  return new FileProfileStore(configDir, options);
}

/** A renewal record as this process last read or wrote it (see `#knownRecords`). */
interface KnownRecord {
  identity: FileIdentity;
  record: RenewalRecord | undefined;
  trusted: (mtimeMs: number) => boolean;
  overlaid?: { base: ProfileState | undefined; state: ProfileState | undefined };
}

/**
 * One store per config dir, shared by every profile a process serves (the daemon's thousands): its methods live
 * on the prototype and its caches are keyed by name, so no profile and no call costs an object of its own here.
 */
class FileProfileStore implements ProfileStore {
  readonly dir: string;
  readonly #staleMs: number;
  readonly #writeLockWaitMs: number;
  readonly #defaultLockWaitMs: number;

  // What this process last read or wrote, keyed by the file's identity (inode, size, mtime): every write is a
  // new inode through a rename, and an edit in place changes mtime, so a match means the same bytes. A hit
  // costs one stat instead of open, read, close and a parse; the renewal path reads the state twice per renewal.
  readonly #known = new Map<string, { identity: FileIdentity; state: ProfileState }>();
  // The same for renewal records, which are overwritten in place: the inode stays, and two writes within one
  // tick of the file system's clock may leave the same mtime. So an entry read is trusted only once its mtime
  // is older than the time it was read by more than that tick (as git treats a racily clean index entry); until
  // then it is read again. A record this process wrote is trusted while unchanged: it wrote it holding the
  // renewal lock, and another holder's write in the same tick could only make it look older than it is, which
  // costs at most an early renewal (whose re-read under the lock, after the tick, sees the other one).
  // `overlaid` is the last state the record was laid over, and the result.
  readonly #knownRecords = new Map<string, KnownRecord>();
  // The directory is checked (created, tightened) once per store; a write that finds it gone checks again.
  #dirReady: Promise<void> | undefined;

  constructor(configDir: string, options: ProfileStoreOptions) {
    this.dir = path.join(configDir, 'profiles');
    this.#staleMs = Math.max(options.staleMs ?? 10_000, 2_000);
    this.#writeLockWaitMs = options.writeLockWaitMs ?? 15_000;
    this.#defaultLockWaitMs = options.lockWaitMs ?? 60_000;
  }

  fileOf(name: string): string {
    assertProfileName(name);
    return path.join(this.dir, `${name}.json`);
  }

  recordFileOf(name: string): string {
    assertProfileName(name);
    return path.join(this.dir, `${name}${RECORD_SUFFIX}`);
  }

  read(name: string): Promise<ProfileState | undefined> {
    return this.#readMerged(name);
  }

  names(): Promise<string[]> {
    return this.#listNames();
  }

  async list(): Promise<ProfileState[]> {
    const states = [];
    for (const name of await this.#listNames()) {
      const state = await this.#readMerged(name);
      if (state) states.push(state);
    }
    return states;
  }

  async update(
    name: string,
    mutate: (current: ProfileState | undefined) => ProfileStateDraft | undefined,
    updateOptions: UpdateOptions = {},
  ): Promise<ProfileState | undefined> {
    const file = this.fileOf(name);
    return this.#retryingOnMissingDir(() => this.#writeLocked(name, async () => {
      let current: ProfileState | undefined;
      try {
        // With the renewal record laid over: a write keeps the latest renewal's fields in the state file too.
        current = await this.#readMerged(name);
      } catch (error) {
        if (!(updateOptions.resetCorrupt && error instanceof ProfileStoreError && error.code === 'PROFILE_CORRUPT')) {
          throw error;
        }
      }
      const draft = mutate(current);
      if (draft === undefined) {
        this.#known.delete(name);
        this.#knownRecords.delete(name);
        await rm(file, { force: true });
        await rm(this.recordFileOf(name), { force: true });
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
      this.#known.delete(name);
      const identity = await writePrivateFile(file, `${JSON.stringify(parsed.data, null, 2)}\n`, undefined, {
        durable: updateOptions.durable ?? true,
        followLinks: false,
      });
      const state = deepFreeze(parsed.data);
      this.#known.set(name, { identity, state });
      return this.#readMerged(name);
    }));
  }

  forget(name: string): void {
    this.#known.delete(name);
    this.#knownRecords.delete(name);
  }

  async delete(name: string): Promise<void> {
    const file = this.fileOf(name);
    try {
      this.#known.delete(name);
      this.#knownRecords.delete(name);
      await this.#writeLocked(name, async () => {
        await rm(file, { force: true });
        await rm(this.recordFileOf(name), { force: true });
      });
    } catch (error) {
      // No directory means no state and nowhere to put a lock: already deleted.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
  }

  async recordRenewal(name: string, record: RenewalRecord): Promise<void> {
    const file = this.recordFileOf(name);
    await this.#retryingOnMissingDir(async () => {
      this.#knownRecords.delete(name);
      const identity = writeRenewalRecord(file, name, record);
      this.#knownRecords.set(name, { identity, record, trusted: () => true });
    });
  }

  async withLock<T>(name: string, fn: (signal: AbortSignal) => Promise<T>, lockOptions: { waitMs?: number } = {}): Promise<T> {
    assertProfileName(name);
    await this.#ensureDir();
    const lockPath = path.join(this.dir, `${name}.renewal.lock`);
    const waitMs = lockOptions.waitMs ?? this.#defaultLockWaitMs;
    const staleMs = this.#staleMs;
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
  }

  #ensureDir(): Promise<void> {
    this.#dirReady ??= ensurePrivateDir(this.dir, { tighten: true }).catch((error: unknown) => {
      this.#dirReady = undefined;
      throw error;
    });
    return this.#dirReady;
  }

  async #retryingOnMissingDir<T>(fn: () => Promise<T>): Promise<T> {
    await this.#ensureDir();
    try {
      return await fn();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      this.#dirReady = undefined;
      await this.#ensureDir();
      return fn();
    }
  }

  /** The state file alone. */
  async #readState(name: string): Promise<ProfileState | undefined> {
    const file = this.fileOf(name);
    const cached = this.#known.get(name);
    // Synchronous: one local stat, cheaper than a thread-pool round trip (and than the error of an open that
    // finds no file, as a profile without a state file would at every read).
    const info = statSync(file, { throwIfNoEntry: false });
    if (!info) {
      this.#known.delete(name);
      return undefined;
    }
    if (cached && sameIdentity(info, cached.identity)) return cached.state;
    let text: string;
    let identity: FileIdentity;
    try {
      const handle = await open(file, 'r');
      try {
        const info = await handle.stat();
        assertFileTrusted(file, info);
        identity = { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
        text = await handle.readFile('utf8');
      } finally {
        await handle.close();
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        this.#known.delete(name);
        return undefined;
      }
      throw error;
    }
    const state = parseState(name, file, text);
    this.#known.set(name, { identity, state });
    return state;
  }

  /** The renewal record's entry, read again unless the cached one is known to be current. */
  #readRecord(name: string): KnownRecord | undefined {
    const file = this.recordFileOf(name);
    const cached = this.#knownRecords.get(name);
    // One stat, which (unlike an open) costs no error object when there is no record, as for most profiles
    // of an earlier release until their first renewal here.
    const info = statSync(file, { throwIfNoEntry: false });
    if (!info) {
      this.#knownRecords.delete(name);
      return undefined;
    }
    if (cached && sameIdentity(info, cached.identity) && cached.trusted(info.mtimeMs)) return cached;
    const readAt = Date.now();
    const read = readRenewalRecord(file, name);
    if (!read) {
      this.#knownRecords.delete(name);
      return undefined;
    }
    const entry = { identity: read.identity, record: read.record, trusted: (mtimeMs: number) => mtimeMs < readAt - RACY_MS };
    this.#knownRecords.set(name, entry);
    return entry;
  }

  /** The state file with the renewal record laid over it. */
  async #readMerged(name: string): Promise<ProfileState | undefined> {
    const base = await this.#readState(name);
    const entry = this.#readRecord(name);
    if (!entry?.record) return base;
    if (entry.overlaid && entry.overlaid.base === base) return entry.overlaid.state;
    const state = overlay(name, base, entry.record);
    entry.overlaid = { base, state };
    return state;
  }

  async #listNames(): Promise<string[]> {
    let entries;
    try {
      entries = await readdir(this.dir, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    // Temporary files of an interrupted atomic write end in a random suffix, lock directories in `.lock`:
    // neither matches `<valid name>.json` or `<valid name>.renewed` as a regular file.
    const names = new Set<string>();
    for (const entry of entries) {
      if (!entry.isFile()) continue;
      const suffix = entry.name.endsWith('.json') ? '.json' : entry.name.endsWith(RECORD_SUFFIX) ? RECORD_SUFFIX : undefined;
      const name = suffix ? entry.name.slice(0, -suffix.length) : '';
      if (isProfileName(name)) names.add(name);
    }
    return [...names].sort();
  }

  #writeLocked<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const lockPath = path.join(this.dir, `${name}.json.lock`);
    const writeLockWaitMs = this.#writeLockWaitMs;
    return withFileLock(lockPath, fn, {
      waitMs: writeLockWaitMs,
      staleMs: this.#staleMs,
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
}

/** The renewal record's file name after the profile's name. */
const RECORD_SUFFIX = '.renewed';
/** More than a file system's timestamp tick (a jiffy, a few ms, on Linux; 2 s on FAT). */
const RACY_MS = 2_500;

/**
 * The state with the record's renewal laid over it, when the record's is the later one (the state file holds
 * an earlier release's renewals, and those `setup` and `profile rotate` record). A profile with a record and no
 * state file (one served from the environment) reads as a state of the record alone.
 */
function overlay(name: string, base: ProfileState | undefined, record: RenewalRecord): ProfileState | undefined {
  const recorded = base?.lastRenewalAt === undefined ? undefined : Date.parse(base.lastRenewalAt);
  if (base && recorded !== undefined && recorded >= record.lastRenewalAt) return base;
  const lastRenewalAt = new Date(record.lastRenewalAt).toISOString();
  return deepFreeze({
    ...(base ?? { version: 1 as const, profile: name, createdAt: lastRenewalAt }),
    accessTokenExpiresAt: new Date(record.accessTokenExpiresAt).toISOString(),
    lastRenewalAt,
    updatedAt: base && Date.parse(base.updatedAt) > record.lastRenewalAt ? base.updatedAt : lastRenewalAt,
  });
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
