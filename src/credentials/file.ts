// The encrypted file store, for hosts without a keychain (containers, headless servers), used only when
// chosen with SYNCAUTH_STORE=file.
//
// Layout (format version 3): `<configDir>/secrets.enc` is the keyring: one random data key, wrapped with
// AES-256-GCM under a key derived with scrypt from SYNCAUTH_STORE_KEY. Each profile's secrets are a record of
// their own, `<configDir>/secrets/<profile>.enc`, sealed with AES-256-GCM under the data key, and its cached
// access token beside it in `<profile>.token`, sealed the same way. So reading or writing one profile touches
// that profile's files and the small keyring alone, whatever the number of profiles, and a re-key rewrites only
// the keyring: one atomic replacement, as before. What each ciphertext is bound to travels as associated data,
// so a change is detected like any other tampering: the keyring's header (format, version, KDF parameters and
// salt), and a record's format, version, part and profile name (a record copied to another profile's name does
// not open).
//
// A renewal stores only the access token: its file is replaced whole (no lock, nothing read first) and not
// flushed to disk, as the renewal's other records are not: a crash loses at most that cache, which the next
// renewal fills again. So a token file that does not open (torn by a crash, or changed) reads as no cached
// token. The secrets themselves are written as before: under the profile's lock, flushed before the rename.
//
// Format versions: 1 held the four secrets of every profile in one encrypted file; 2 added each profile's cached
// access token; 3 is the keyring and the records. Opening a version 1 or 2 file migrates it once: under the
// store lock, every profile's record is written under a new data key into a fresh `secrets/`, and then the old
// file is replaced by the keyring in one rename. That rename is the migration's only commit: a crash before it
// leaves the old file, which is still the store (and whatever a half-done migration left in `secrets/` is
// cleared by the next one); a crash after it leaves the new layout whole. No copy of the old file is kept: it
// holds every secret under the store key, and would outlive a re-key. An older syncauth meeting the keyring
// says to upgrade (its version is higher than any it reads), as it does for any newer file. Where the old file
// cannot be rewritten (a read-only config dir), reads go on decrypting it as it is.
//
// Keys: a new store refuses a key shorter than MIN_STORE_KEY_LENGTH characters. A store written before that
// rule keeps opening with its short key (refusing it would lock its owner out of their own secrets), with a
// warning that names `syncauth profile rekey`, which wraps the data key under a new key and salt. The format
// does not change for either: the store key never enters a file.
import { randomBytes, scrypt } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import * as z from 'zod';
import { SyncauthError, ValidationError } from '../errors.js';
import { ensurePrivateDir, readdirIfExists, writePrivateFile } from '../profile/files.js';
import { withFileLock } from '../profile/lock.js';
import { PROFILE_NAME_PATTERN, assertProfileName, isProfileName, syncauthCommand } from '../profile/name.js';
import { remedyHint } from '../remedy.js';
import { SecretStoreError } from './errors.js';
import { keychainTokenFileOf } from './keychain.js';
import {
  CipherSchema, base64Of, decrypt as open, encrypt, parseVersioned as versioned, readSealedFile, recordAad as aadOf, sealRecord, unsealRecord,
} from './sealed-record.js';
import type { Cipher, RecordFormat } from './sealed-record.js';
import { STORED_NAMES, planMerge } from './types.js';
import type { StoredSecrets, SecretStore } from './types.js';

export const SECRET_FILE_NAME = 'secrets.enc';
/** The directory beside SECRET_FILE_NAME that holds one record per profile (format version 3). */
export const SECRET_RECORDS_DIR = 'secrets';
/** The suffix of a profile's record of secrets in SECRET_RECORDS_DIR. */
const RECORD_SUFFIX = '.enc';
/** The suffix of a profile's cached access token in SECRET_RECORDS_DIR. */
const TOKEN_SUFFIX = '.token';
/**
 * A profile's files in the config dir's stores, which need not exist: its secrets and cached access token in
 * this store, and the keychain store's file of its cached access token.
 */
export function secretFilesOf(configDir: string, profile: string): string[] {
  return [
    ...[RECORD_SUFFIX, TOKEN_SUFFIX].map((suffix) => path.join(configDir, SECRET_RECORDS_DIR, `${profile}${suffix}`)),
    keychainTokenFileOf(configDir, profile),
  ];
}

/** The shortest key a new store (or a re-key) accepts, in characters, after trimming. */
export const MIN_STORE_KEY_LENGTH = 16;
const FORMAT = 'syncauth-secrets';
const VERSION = 3;
const LEGACY_VERSIONS = [1, 2] as const;
// 2^15 × 8 × 128 bytes = 32 MiB and about 0.1 s per derivation: OWASP's floor for scrypt, paid once per process
// because the derived key is cached for the keyring's salt.
const DEFAULT_KDF = { N: 2 ** 15, r: 8, p: 1 } as const;
/**
 * Derived keys, by KDF parameters (the salt among them), shared by every store this process opens: the daemon
 * opens one per profile, and each deriving its own key at start took 32 MiB and 0.1 s per profile, four at a
 * time (the thread pool), for the same key. A derivation under way is shared too. A handful of entries at most
 * (a salt changes only when the keyring is written anew under another key).
 */
const derivedKeys = new Map<string, { pass: string; key: Promise<Buffer> }>();
/** Unwrapped data keys, by the keyring's text: a renewal reads the keyring and finds its key here. */
const dataKeys = new Map<string, { pass: string; key: Promise<Buffer> }>();
const KEYS_KEPT = 8;
const SALT_BYTES = 16;
const DATA_KEY_BYTES = 32;
/** Records written at once while migrating: each waits for its flush to disk. */
const MIGRATION_WRITES_AT_ONCE = 16;

// Bounds on the parameters keep a crafted file from making us allocate gigabytes before the tag is checked.
const KdfSchema = z.strictObject({
  name: z.literal('scrypt'),
  N: z.number().int().min(2 ** 14).max(2 ** 17).refine((n) => (n & (n - 1)) === 0, 'must be a power of two'),
  r: z.number().int().min(1).max(8),
  p: z.number().int().min(1).max(4),
  salt: base64Of(SALT_BYTES),
});
type KdfParams = z.infer<typeof KdfSchema>;

/** Formats 1 and 2: every profile's secrets in one envelope. */
const LegacyEnvelopeSchema = z.strictObject({
  format: z.literal(FORMAT),
  version: z.union(LEGACY_VERSIONS.map((version) => z.literal(version))),
  kdf: KdfSchema,
  cipher: CipherSchema,
  data: z.base64(),
});
type LegacyEnvelope = z.infer<typeof LegacyEnvelopeSchema>;

/** Format 3's `secrets.enc`: the data key, wrapped under the key derived from the store key. */
const KeyringSchema = z.strictObject({
  format: z.literal(FORMAT),
  version: z.literal(VERSION),
  kdf: KdfSchema,
  cipher: CipherSchema,
  key: base64Of(DATA_KEY_BYTES),
});
type Keyring = z.infer<typeof KeyringSchema>;

/** Format 3's `secrets/<profile>.enc` and `.token`: one profile's secrets, or its access token, under the data key. */
const RECORD_FORMAT: RecordFormat = { format: FORMAT, version: VERSION };

// One schema for every version: a version 1 file is the same shape without `access_token`.
const SecretsSchema = z.strictObject(
  Object.fromEntries(STORED_NAMES.map((name) => [name, z.string().min(1).optional()])) as Record<
    (typeof STORED_NAMES)[number],
    z.ZodOptional<z.ZodString>
  >,
);
const LegacyPlaintextSchema = z.strictObject({
  profiles: z.record(z.string().regex(PROFILE_NAME_PATTERN), SecretsSchema),
});
type Profiles = Record<string, StoredSecrets>;

export interface FileSecretStoreOptions {
  configDir: string;
  /** Reads the key at call time, so a key set after the store was opened is honoured. */
  storeKey: () => string | undefined;
  /**
   * Told, once per file and process, that a key shorter than MIN_STORE_KEY_LENGTH opened an existing store.
   * Nothing is said without it.
   */
  onWeakKey?: (message: string) => void;
  /** What chose this store, for its errors (default `SYNCAUTH_STORE=file`): the person may never have set that. */
  chosenBy?: string;
}

/** The file store, with what only it can do besides the SecretStore operations. */
export interface FileSecretStore extends SecretStore {
  readonly kind: 'file';
  /** `<configDir>/secrets.enc`: the keyring, whose presence says the store exists. */
  readonly file: string;
  /** `<configDir>/secrets`: one record per profile. */
  readonly dir: string;
  /**
   * Wraps the store's data key under `newKey`, with a fresh salt, as one atomic replacement of the keyring: a
   * crash leaves the old keyring (old key) or the new one (new key), never a mixture; the records stay as they
   * are. Opens the store with the current key first (migrating a format 1 or 2 file); refuses a new key shorter
   * than MIN_STORE_KEY_LENGTH or equal to the current one. Returns the profiles the store holds.
   */
  rekey(newKey: string): Promise<string[]>;
}

// Said once per file in a process: every command opens the store several times.
const weakKeyWarned = new Set<string>();
/** A creation or migration under way in this process, per keyring: the others wait for it, not for the lock. */
const upgrading = new Map<string, Promise<unknown>>();

const keyLength = (key: string): number => Array.from(key.trim()).length;

/** The keyring as read: absent, a format 1 or 2 file still to migrate, or format 3. */
type StoreFile =
  | { kind: 'none' }
  | { kind: 'legacy'; envelope: LegacyEnvelope }
  | { kind: 'keyring'; keyring: Keyring; text: string };

/** What an operation opens the store to: its data key, or the profiles of a format 1 or 2 file it could not migrate. */
type Opened = { dataKey: Buffer } | { legacy: Profiles };

/** Errors of a file system that will not take the migration's writes; a read then serves the old file as it is. */
const READ_ONLY_CODES = new Set(['EROFS', 'EACCES', 'EPERM']);

/**
 * The store's workings for one config dir: its files, how each is read, sealed and written, and the making,
 * migration and locks of the store. What needs no config dir (keys, ciphers, errors) is the module's own.
 */
class FileStoreCore {
  /** `<configDir>/secrets.enc`: the keyring. */
  readonly file: string;
  /** `<configDir>/secrets`: one record per profile. */
  readonly dir: string;
  readonly #configDir: string;

  constructor(configDir: string) {
    this.#configDir = configDir;
    this.file = path.join(configDir, SECRET_FILE_NAME);
    this.dir = path.join(configDir, SECRET_RECORDS_DIR);
  }

  recordPath(profile: string): string {
    return path.join(this.dir, `${profile}${RECORD_SUFFIX}`);
  }

  tokenPath(profile: string): string {
    return path.join(this.dir, `${profile}${TOKEN_SUFFIX}`);
  }

  #pathOf(profile: string, part: Part): string {
    return part === 'record' ? this.recordPath(profile) : this.tokenPath(profile);
  }

  async readStoreFile(): Promise<StoreFile> {
    const { file } = this;
    const text = readSealedFile(file);
    if (text === undefined) return { kind: 'none' };
    const { data, version } = parseVersioned(file, text);
    if (version === VERSION) {
      const parsed = KeyringSchema.safeParse(data);
      if (!parsed.success) throw corrupt(file, 'its header is not valid');
      return { kind: 'keyring', keyring: parsed.data, text };
    }
    const parsed = LegacyEnvelopeSchema.safeParse(data);
    if (!parsed.success) throw corrupt(file, 'its header is not valid');
    return { kind: 'legacy', envelope: parsed.data };
  }

  /** The data key the keyring wraps, unwrapped once per keyring and process. */
  unwrap(state: { keyring: Keyring; text: string }, pass: string): Promise<Buffer> {
    const cached = dataKeys.get(state.text);
    if (cached && cached.pass === pass) return cached.key;
    const key = (async () => {
      const { keyring } = state;
      const derived = await deriveKey(pass, keyring.kdf);
      const dataKey = decrypt(derived, keyring.cipher, Buffer.from(keyring.key, 'base64'), keyringAad(keyring.kdf), this.file);
      return dataKey;
    })();
    remember(dataKeys, state.text, pass, key);
    return key;
  }

  async #openLegacy(envelope: LegacyEnvelope, pass: string): Promise<Profiles> {
    const { file } = this;
    const key = await deriveKey(pass, envelope.kdf);
    const plaintext = decrypt(key, envelope.cipher, Buffer.from(envelope.data, 'base64'), legacyAad(envelope.version, envelope.kdf), file);
    const parsed = LegacyPlaintextSchema.safeParse(parsePlaintext(file, plaintext));
    // Neither zod's issues nor the data go into the message: the data are the secrets.
    if (!parsed.success) throw corrupt(file, 'its content is not a set of profile secrets');
    return parsed.data.profiles;
  }

  /** The profile's secrets, `{}` when it has none. */
  readRecord(profile: string, dataKey: Buffer): StoredSecrets {
    return this.#readSealed(profile, 'record', dataKey);
  }

  /** The profile's cached access token, or undefined when there is none or its file does not open. */
  readToken(profile: string, dataKey: Buffer): string | undefined {
    try {
      const { access_token: token } = this.#readSealed(profile, 'token', dataKey);
      return token;
    } catch (error) {
      if (error instanceof SecretStoreError) return undefined;
      throw error;
    }
  }

  #readSealed(profile: string, part: Part, dataKey: Buffer): StoredSecrets {
    const where = this.#pathOf(profile, part);
    const text = readSealedFile(where);
    if (text === undefined) return {};
    const opened = unsealRecord(RECORD_FORMAT, text, dataKey, recordAad(profile, part));
    if (!opened.ok) {
      if (opened.failure === 'key') throw wrongKey(where);
      if (opened.failure === 'newer') throw newer(where, opened.version);
      throw corrupt(where, { 'not-json': 'it is not JSON', header: 'its header is not valid', content: 'its content is not JSON' }[opened.failure]);
    }
    const checked = SecretsSchema.safeParse(opened.value);
    const names = checked.success ? Object.keys(stripUndefined(checked.data)) : [];
    if (!checked.success || names.some((name) => (name === 'access_token') !== (part === 'token'))) {
      throw corrupt(where, 'its content is not a set of profile secrets');
    }
    return stripUndefined(checked.data);
  }

  /** Replaces the profile's secrets (without the access token), flushed to disk before the rename. */
  async writeRecord(profile: string, secrets: StoredSecrets, dataKey: Buffer): Promise<void> {
    // Only syncauth writes in its records directory, so no link there is followed.
    await writePrivateFile(this.recordPath(profile), seal(profile, 'record', secrets, dataKey), undefined, { followLinks: false });
  }

  /** Replaces the profile's cached access token; `durable: false` for a renewal's write (see the head of this file). */
  async writeToken(profile: string, token: string, dataKey: Buffer, durable: boolean): Promise<void> {
    await writePrivateFile(this.tokenPath(profile), seal(profile, 'token', { access_token: token }, dataKey), undefined, { followLinks: false, durable });
  }

  /** Writes one profile's secrets and access token as the migration found them. */
  async #writeProfile(profile: string, stored: StoredSecrets, dataKey: Buffer): Promise<void> {
    const { access_token: token, ...secrets } = stripUndefined(stored);
    if (Object.keys(secrets).length > 0) await this.writeRecord(profile, secrets, dataKey);
    if (token) await this.writeToken(profile, token, dataKey, true);
  }

  /**
   * The store as an operation needs it. A format 3 keyring is read and its data key unwrapped (once per process).
   * A format 1 or 2 file is migrated first; where that cannot write, a read (`fallBack`) gets the old file's
   * profiles instead. With `create`, a missing store is made; without it, undefined says there is none.
   */
  async opened(pass: string, mode: { create: boolean; fallBack: boolean }): Promise<Opened | undefined> {
    const state = await this.readStoreFile();
    if (state.kind === 'keyring') return { dataKey: await this.unwrap(state, pass) };
    if (state.kind === 'none' && !mode.create) return undefined;
    // Proves the key before anything is written: a wrong key migrates nothing.
    const legacy = state.kind === 'legacy' ? await this.#openLegacy(state.envelope, pass) : undefined;
    try {
      return await this.#upgrade(pass, mode.create);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (legacy && mode.fallBack && code && READ_ONLY_CODES.has(code)) return { legacy };
      throw error;
    }
  }

  /** Makes the store or migrates it, once in this process at a time, and under the store lock across processes. */
  async #upgrade(pass: string, create: boolean): Promise<Opened | undefined> {
    const { file } = this;
    for (;;) {
      const pending = upgrading.get(file);
      if (!pending) break;
      await pending.catch(() => undefined);
    }
    const work = (async () => {
      await ensurePrivateDir(this.#configDir);
      return this.locked(() => this.#upgradeLocked(pass, create));
    })();
    upgrading.set(file, work);
    try {
      return await work;
    } finally {
      if (upgrading.get(file) === work) upgrading.delete(file);
    }
  }

  /** With the store lock held: the data key of the store as it is now, made or migrated as needed. */
  async #upgradeLocked(pass: string, create: boolean): Promise<Opened | undefined> {
    const state = await this.readStoreFile();
    if (state.kind === 'keyring') return { dataKey: await this.unwrap(state, pass) };
    if (state.kind === 'legacy') return { dataKey: await this.#migrateLocked(state.envelope, pass) };
    if (!create) return undefined;
    // Only here, where a new store is about to be made: an existing one opened with a short key keeps working.
    if (keyLength(pass) < MIN_STORE_KEY_LENGTH) throw tooShort('SYNCAUTH_STORE_KEY', `the key for the new store ${this.file}`);
    // Records left by a store whose keyring was deleted, or by a migration that died, belong to no data key.
    await this.#freshRecordsDir();
    const dataKey = randomBytes(DATA_KEY_BYTES);
    const kdf = freshKdf();
    await writePrivateFile(this.file, wrap(dataKey, await deriveKey(pass, kdf), kdf));
    return { dataKey };
  }

  async #freshRecordsDir(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    await ensurePrivateDir(this.dir, { tighten: true });
  }

  /**
   * Format 1 or 2 to 3, with the store lock held: every record under a new data key, then the keyring in place
   * of the old file (the one commit). The KDF parameters and salt stay, so the derived key serves on.
   */
  async #migrateLocked(envelope: LegacyEnvelope, pass: string): Promise<Buffer> {
    const profiles = await this.#openLegacy(envelope, pass);
    await this.#freshRecordsDir();
    const dataKey = randomBytes(DATA_KEY_BYTES);
    const names = Object.keys(profiles).filter((name) => Object.keys(stripUndefined(profiles[name] ?? {})).length > 0);
    for (let at = 0; at < names.length; at += MIGRATION_WRITES_AT_ONCE) {
      // Settled, all of them, before a failure is thrown: no write of this migration outlives it.
      const written = await Promise.allSettled(
        names.slice(at, at + MIGRATION_WRITES_AT_ONCE).map((name) => this.#writeProfile(name, profiles[name] ?? {}, dataKey)),
      );
      const failed = written.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
    }
    await writePrivateFile(this.file, wrap(dataKey, await deriveKey(pass, envelope.kdf), envelope.kdf));
    return dataKey;
  }

  async storedNames(): Promise<string[]> {
    const names = new Set<string>();
    for (const entry of await readdirIfExists(this.dir)) {
      const suffix = [RECORD_SUFFIX, TOKEN_SUFFIX].find((end) => entry.endsWith(end));
      const name = suffix ? entry.slice(0, -suffix.length) : '';
      if (isProfileName(name)) names.add(name);
    }
    return [...names].sort();
  }

  /** The store lock: making the store, migrating it, re-keying it. */
  locked<T>(work: () => Promise<T>): Promise<T> {
    return withFileLock(`${this.file}.lock`, work, lockOptions(this.file));
  }

  /** One profile's lock, for a read-modify-write of its record; other profiles' writers never wait on it. */
  recordLocked<T>(profile: string, work: () => Promise<T>): Promise<T> {
    const record = this.recordPath(profile);
    return withFileLock(`${record}.lock`, work, lockOptions(record));
  }

  noStore(): SyncauthError {
    return new SyncauthError('SYNCAUTH_NO_STORE', `there is no encrypted store at ${this.file}: nothing to re-key`, {
      hint: remedyHint({ action: 'run', command: 'setup' }, (command) => `a store is made by \`${command}\` with SYNCAUTH_STORE=file; check SYNCAUTH_CONFIG_DIR`),
    });
  }
}

/**
 * The store's workings for one config dir, shared by every store opened on it in this process: the daemon opens
 * one per profile while it loads them, and each store then holds only its options and this.
 */
const cores = new Map<string, FileStoreCore>();
const CORES_KEPT = 16;

function coreFor(configDir: string): FileStoreCore {
  const found = cores.get(configDir);
  if (found) return found;
  const core = new FileStoreCore(configDir);
  cores.set(configDir, core);
  while (cores.size > CORES_KEPT) cores.delete(cores.keys().next().value as string);
  return core;
}

/** The file store as opened with one set of options (the key, its warning, what chose it) on its config dir's core. */
class FileStore implements FileSecretStore {
  readonly #options: FileSecretStoreOptions;
  readonly #core: FileStoreCore;

  constructor(options: FileSecretStoreOptions) {
    this.#options = options;
    this.#core = coreFor(options.configDir);
  }

  get kind(): 'file' {
    return 'file';
  }

  get writable(): boolean {
    return true;
  }

  get file(): string {
    return this.#core.file;
  }

  get dir(): string {
    return this.#core.dir;
  }

  #requireKey(): string {
    const options = this.#options;
    const pass = options.storeKey()?.trim();
    if (!pass) {
      throw new SecretStoreError(
        'STORE_KEY_MISSING',
        `${options.chosenBy ?? 'SYNCAUTH_STORE=file'} needs SYNCAUTH_STORE_KEY to open ${this.file}: set it to the key that file was written ` +
          'with (for a new store, a long random value such as the output of `openssl rand -base64 32`), or ' +
          'choose SYNCAUTH_STORE=keychain or SYNCAUTH_STORE=env.',
        { path: this.file },
      );
    }
    return pass;
  }

  #warnIfWeak(pass: string): void {
    const { file } = this;
    const options = this.#options;
    if (keyLength(pass) < MIN_STORE_KEY_LENGTH && options.onWeakKey && !weakKeyWarned.has(file)) {
      weakKeyWarned.add(file);
      options.onWeakKey(
        `SYNCAUTH_STORE_KEY is shorter than ${MIN_STORE_KEY_LENGTH} characters; ${file} still opens with it, but a ` +
          `new store would refuse it. Run \`${syncauthCommand('profile rekey')}\` to re-encrypt the store under a long random key ` +
          '(e.g. the output of `openssl rand -base64 32`).',
      );
    }
  }

  /** The store opened with `pass`; an existing one opened with a short key is said once (see onWeakKey). */
  async #opened(pass: string, mode: { create: boolean; fallBack: boolean }): Promise<Opened | undefined> {
    const store = await this.#core.opened(pass, mode);
    if (store) this.#warnIfWeak(pass);
    return store;
  }

  async get(profile: string): Promise<StoredSecrets> {
    assertProfileName(profile);
    const store = await this.#opened(this.#requireKey(), { create: false, fallBack: true });
    if (!store) return {};
    if ('legacy' in store) return Object.hasOwn(store.legacy, profile) ? stripUndefined({ ...store.legacy[profile] }) : {};
    const secrets = this.#core.readRecord(profile, store.dataKey);
    const token = this.#core.readToken(profile, store.dataKey);
    return token === undefined ? secrets : { ...secrets, access_token: token };
  }

  /** The SecretStore's set: the secrets under the profile's lock, the access token alone in its own file. */
  async set(profile: string, secrets: StoredSecrets): Promise<void> {
    assertProfileName(profile);
    const core = this.#core;
    const { write, remove } = planMerge(secrets);
    if (write.length === 0 && remove.length === 0) return;
    // Removing from a store that does not exist yet is done already; it makes no store.
    const store = await this.#opened(this.#requireKey(), { create: write.length > 0, fallBack: false });
    if (!store || !('dataKey' in store)) return;
    const { dataKey } = store;
    const token = secrets.access_token;
    const changesRecord = [...write.map(([name]) => name), ...remove].some((name) => name !== 'access_token');
    if (changesRecord) {
      await core.recordLocked(profile, async () => {
        const next = core.readRecord(profile, dataKey);
        for (const [name, value] of write) if (name !== 'access_token') next[name] = value;
        for (const name of remove) delete next[name];
        if (Object.keys(next).length === 0) await rm(core.recordPath(profile), { force: true });
        else await core.writeRecord(profile, next, dataKey);
      });
    }
    // The renewal's write: the token file alone, replaced whole.
    if (token === '') await rm(core.tokenPath(profile), { force: true });
    else if (token !== undefined) await core.writeToken(profile, token, dataKey, false);
  }

  async readAccessToken(profile: string): Promise<string | undefined> {
    assertProfileName(profile);
    const store = await this.#opened(this.#requireKey(), { create: false, fallBack: true });
    if (!store) return undefined;
    if ('legacy' in store) return Object.hasOwn(store.legacy, profile) ? store.legacy[profile]?.access_token : undefined;
    return this.#core.readToken(profile, store.dataKey);
  }

  writeAccessToken(profile: string, value: string): Promise<void> {
    return this.set(profile, { access_token: value });
  }

  async delete(profile: string): Promise<void> {
    assertProfileName(profile);
    const core = this.#core;
    const store = await this.#opened(this.#requireKey(), { create: false, fallBack: false });
    if (!store) return;
    await core.recordLocked(profile, async () => {
      await rm(core.recordPath(profile), { force: true });
      await rm(core.tokenPath(profile), { force: true });
    });
  }

  async listProfiles(): Promise<string[]> {
    const store = await this.#opened(this.#requireKey(), { create: false, fallBack: true });
    if (!store) return [];
    if ('legacy' in store) {
      return Object.keys(store.legacy).filter((name) => Object.keys(stripUndefined(store.legacy[name] ?? {})).length > 0).sort();
    }
    return this.#core.storedNames();
  }

  async rekey(newKey: string): Promise<string[]> {
    const core = this.#core;
    const pass = this.#requireKey();
    const next = newKey.trim();
    if (keyLength(next) < MIN_STORE_KEY_LENGTH) throw tooShort('new store key', 'the new key');
    if (next === pass) throw new ValidationError([{ field: 'new store key', message: 'is the key the store already has' }]);
    // A format 1 or 2 file is migrated first, under the same key, as any opening does.
    if ((await this.#opened(pass, { create: false, fallBack: false })) === undefined) throw core.noStore();
    return core.locked(async () => {
      const state = await core.readStoreFile();
      if (state.kind !== 'keyring') throw core.noStore();
      const dataKey = await core.unwrap(state, pass);
      // A fresh salt too: nothing derived from the old key and salt is any use against the new keyring.
      const kdf = freshKdf();
      await writePrivateFile(core.file, wrap(dataKey, await deriveKey(next, kdf), kdf));
      return core.storedNames();
    });
  }
}

export function openFileSecretStore(options: FileSecretStoreOptions): FileSecretStore {
  return new FileStore(options);
}

function deriveKey(pass: string, kdf: KdfParams): Promise<Buffer> {
  const id = JSON.stringify(kdf);
  const cached = derivedKeys.get(id);
  if (cached && cached.pass === pass) return cached.key;
  const key = new Promise<Buffer>((resolve, reject) => {
    scrypt(
      pass,
      Buffer.from(kdf.salt, 'base64'),
      32,
      { N: kdf.N, r: kdf.r, p: kdf.p, maxmem: 256 * kdf.N * kdf.r },
      (error, derived) => (error ? reject(error) : resolve(derived)),
    );
  });
  remember(derivedKeys, id, pass, key);
  return key;
}

/** A stored file's JSON and format version; one this syncauth cannot read (not JSON, or newer) is refused by name. */
function parseVersioned(where: string, text: string): { data: unknown; version: unknown } {
  const parsed = versioned(text, VERSION);
  if (parsed.ok) return parsed;
  throw parsed.failure === 'newer' ? newer(where, parsed.version) : corrupt(where, 'it is not JSON');
}

function newer(where: string, version: number): SecretStoreError {
  return corrupt(where, `it was written by a newer syncauth (format version ${version}); upgrade syncauth to read it`);
}

/** Decrypted JSON, the plaintext buffer wiped whether or not it parses. */
function parsePlaintext(where: string, plaintext: Buffer): unknown {
  try {
    return JSON.parse(plaintext.toString('utf8'));
  } catch {
    throw corrupt(where, 'its content is not JSON');
  } finally {
    plaintext.fill(0);
  }
}

function decrypt(key: Buffer, cipher: Cipher, data: Buffer, aad: Buffer, where: string): Buffer {
  const plaintext = open(key, cipher, data, aad);
  if (plaintext) return plaintext;
  throw wrongKey(where);
}

// GCM cannot tell a wrong key from a changed file: both fail the tag.
function wrongKey(where: string): SecretStoreError {
  return new SecretStoreError(
    'STORE_LOCKED',
    `the store key does not open ${where}: SYNCAUTH_STORE_KEY is not the key it was written with, or the ` +
      `file was changed since. Set the right key; if it is lost, delete the file and run \`${syncauthCommand('setup')}\` ` +
      'to store the secrets again.',
    { path: where },
  );
}

function wrap(dataKey: Buffer, derived: Buffer, kdf: KdfParams): string {
  const { cipher, data } = encrypt(derived, keyringAad(kdf), dataKey);
  const keyring: Keyring = { format: FORMAT, version: VERSION, kdf, cipher, key: data.toString('base64') };
  return `${JSON.stringify(keyring, null, 2)}\n`;
}

function seal(profile: string, part: Part, secrets: StoredSecrets, dataKey: Buffer): string {
  return sealRecord(RECORD_FORMAT, dataKey, recordAad(profile, part), secrets);
}

function freshKdf(): KdfParams {
  return { name: 'scrypt', ...DEFAULT_KDF, salt: randomBytes(SALT_BYTES).toString('base64') };
}

function tooShort(field: string, what: string): ValidationError {
  return new ValidationError([
    {
      field,
      message:
        `${what} is shorter than ${MIN_STORE_KEY_LENGTH} characters; use a long random value such as the output of ` +
        '`openssl rand -base64 32`',
    },
  ]);
}

function lockOptions(what: string) {
  return {
    waitMs: 15_000,
    staleMs: 10_000,
    timeoutError: () =>
      new SecretStoreError(
        'STORE_LOCK_TIMEOUT',
        `could not lock ${what} within 15 s: another syncauth process holds ${what}.lock. Try again in a moment.`,
        { path: what },
      ),
  };
}

function corrupt(where: string, reason: string): SecretStoreError {
  return new SecretStoreError(
    'STORE_CORRUPT',
    `${where} is not a readable syncauth secret store: ${reason}. Restore it from a backup, or delete it and ` +
      `run \`${syncauthCommand('setup')}\` to store the secrets again.`,
    { path: where },
  );
}

/** Keeps a key under `id`, newest last, dropping the oldest past KEYS_KEPT and any whose making failed. */
function remember(cache: Map<string, { pass: string; key: Promise<Buffer> }>, id: string, pass: string, key: Promise<Buffer>): void {
  cache.delete(id);
  cache.set(id, { pass, key });
  while (cache.size > KEYS_KEPT) cache.delete(cache.keys().next().value as string);
  key.catch(() => {
    if (cache.get(id)?.key === key) cache.delete(id);
  });
}

function stripUndefined(secrets: StoredSecrets): StoredSecrets {
  const out: StoredSecrets = {};
  for (const name of STORED_NAMES) {
    const value = secrets[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

function legacyAad(version: LegacyEnvelope['version'], kdf: KdfParams): Buffer {
  return Buffer.from(
    JSON.stringify({ format: FORMAT, version, kdf: { name: kdf.name, N: kdf.N, r: kdf.r, p: kdf.p, salt: kdf.salt } }),
    'utf8',
  );
}

function keyringAad(kdf: KdfParams): Buffer {
  return Buffer.from(
    JSON.stringify({ format: FORMAT, version: VERSION, part: 'keyring', kdf: { name: kdf.name, N: kdf.N, r: kdf.r, p: kdf.p, salt: kdf.salt } }),
    'utf8',
  );
}

type Part = 'record' | 'token';

function recordAad(profile: string, part: Part): Buffer {
  return aadOf(RECORD_FORMAT, part, profile);
}

