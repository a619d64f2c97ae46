// The encrypted file store, for hosts without a keychain (containers, headless servers), used only when
// chosen with SYNCAUTH_STORE=file. One file holds every profile: AES-256-GCM under a key derived with scrypt
// from SYNCAUTH_STORE_KEY. The header (format, version, KDF parameters and salt) is authenticated as
// associated data, so weakening the parameters in the file is detected like any other tampering.
//
// Format versions: 1 held the four secrets; 2 adds each profile's cached access token. A version 1 file is read
// as it is and written back as version 2 on the next change. The number went up, although the envelope kept
// its shape, so that an older syncauth meeting a file with a cached token says to upgrade instead of calling
// the file corrupt and suggesting to delete it.
//
// Keys: a new store refuses a key shorter than MIN_STORE_KEY_LENGTH characters. A store written before that
// rule keeps opening with its short key (refusing it would lock its owner out of their own secrets), with a
// warning that names `syncauth profile rekey`, which re-encrypts the whole file under a new key and salt. The
// format does not change for either: the key never enters the file.
import { createCipheriv, createDecipheriv, randomBytes, scrypt } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import { SyncauthError, ValidationError } from '../errors.js';
import { ensurePrivateDir, readTextIfExists, writePrivateFile } from '../profile/files.js';
import { withFileLock } from '../profile/lock.js';
import { PROFILE_NAME_PATTERN, assertProfileName } from '../profile/name.js';
import { SecretStoreError } from './errors.js';
import { STORED_NAMES, planMerge } from './types.js';
import type { StoredSecrets, SecretStore } from './types.js';

export const SECRET_FILE_NAME = 'secrets.enc';
/** The shortest key a new store (or a re-key) accepts, in characters, after trimming. */
export const MIN_STORE_KEY_LENGTH = 16;
const FORMAT = 'syncauth-secrets';
const VERSION = 2;
const READABLE_VERSIONS = [1, 2] as const;
// 2^15 × 8 × 128 bytes = 32 MiB and about 0.1 s per derivation: OWASP's floor for scrypt, paid once per process
// because the derived key is cached for the file's salt.
const DEFAULT_KDF = { N: 2 ** 15, r: 8, p: 1 } as const;
/**
 * Derived keys, by KDF parameters (the salt among them), shared by every store this process opens: the daemon
 * opens one per profile, and each deriving its own key at start took 32 MiB and 0.1 s per profile, four at a
 * time (the thread pool), for the same key. A derivation under way is shared too. A handful of entries at most
 * (a salt changes only when the store is written anew under another key).
 */
const derivedKeys = new Map<string, { pass: string; key: Promise<Buffer> }>();
const DERIVED_KEYS_KEPT = 8;
const SALT_BYTES = 16;
const IV_BYTES = 12;
const TAG_BYTES = 16;

const base64Of = (bytes: number) =>
  z.base64().refine((value) => Buffer.from(value, 'base64').length === bytes, `must be ${bytes} bytes`);

// Bounds on the parameters keep a crafted file from making us allocate gigabytes before the tag is checked.
const EnvelopeSchema = z.strictObject({
  format: z.literal(FORMAT),
  version: z.union(READABLE_VERSIONS.map((version) => z.literal(version))),
  kdf: z.strictObject({
    name: z.literal('scrypt'),
    N: z.number().int().min(2 ** 14).max(2 ** 17).refine((n) => (n & (n - 1)) === 0, 'must be a power of two'),
    r: z.number().int().min(1).max(8),
    p: z.number().int().min(1).max(4),
    salt: base64Of(SALT_BYTES),
  }),
  cipher: z.strictObject({ name: z.literal('aes-256-gcm'), iv: base64Of(IV_BYTES), tag: base64Of(TAG_BYTES) }),
  data: z.base64(),
});
type Envelope = z.infer<typeof EnvelopeSchema>;
type KdfParams = Envelope['kdf'];

// One schema for both versions: a version 1 file is the same shape without `access_token`.
const SecretsSchema = z.strictObject(
  Object.fromEntries(STORED_NAMES.map((name) => [name, z.string().min(1).optional()])) as Record<
    (typeof STORED_NAMES)[number],
    z.ZodOptional<z.ZodString>
  >,
);
const PlaintextSchema = z.strictObject({
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
}

/** The file store, with what only it can do besides the SecretStore operations. */
export interface FileSecretStore extends SecretStore {
  readonly kind: 'file';
  /** `<configDir>/secrets.enc`. */
  readonly file: string;
  /**
   * Re-encrypts every profile's secrets under `newKey`, with a fresh salt, as one atomic replacement of the
   * file: a crash leaves the old file (old key) or the new one (new key), never a mixture. Opens the file with
   * the current key first; refuses a new key shorter than MIN_STORE_KEY_LENGTH or equal to the current one.
   * Returns the profiles re-encrypted.
   */
  rekey(newKey: string): Promise<string[]>;
}

// Said once per file in a process: every command opens the store several times.
const weakKeyWarned = new Set<string>();

const keyLength = (key: string): number => Array.from(key.trim()).length;

export function openFileSecretStore(options: FileSecretStoreOptions): FileSecretStore {
  const file = path.join(options.configDir, SECRET_FILE_NAME);

  function requireKey(): string {
    const pass = options.storeKey()?.trim();
    if (!pass) {
      throw new SecretStoreError(
        'STORE_KEY_MISSING',
        `SYNCAUTH_STORE=file needs SYNCAUTH_STORE_KEY to open ${file}: set it to the key that file was written ` +
          'with (for a new store, a long random value such as the output of `openssl rand -base64 32`), or ' +
          'choose SYNCAUTH_STORE=keychain or SYNCAUTH_STORE=env.',
        { path: file },
      );
    }
    return pass;
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
    derivedKeys.delete(id);
    derivedKeys.set(id, { pass, key });
    while (derivedKeys.size > DERIVED_KEYS_KEPT) derivedKeys.delete(derivedKeys.keys().next().value as string);
    key.catch(() => {
      if (derivedKeys.get(id)?.key === key) derivedKeys.delete(id);
    });
    return key;
  }

  async function readEnvelope(): Promise<Envelope | undefined> {
    const text = await readTextIfExists(file);
    if (text === undefined) return undefined;
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      throw corrupt('it is not JSON');
    }
    const version = (data as { version?: unknown } | null)?.version;
    if (typeof version === 'number' && version > VERSION) {
      throw corrupt(`it was written by a newer syncauth (format version ${version}); upgrade syncauth to read it`);
    }
    const parsed = EnvelopeSchema.safeParse(data);
    if (!parsed.success) throw corrupt('its header is not valid');
    return parsed.data;
  }

  async function open(envelope: Envelope, pass: string): Promise<Profiles> {
    const key = await deriveKey(pass, envelope.kdf);
    let plaintext: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(envelope.cipher.iv, 'base64'));
      decipher.setAAD(associatedData(envelope.version, envelope.kdf));
      decipher.setAuthTag(Buffer.from(envelope.cipher.tag, 'base64'));
      plaintext = Buffer.concat([decipher.update(Buffer.from(envelope.data, 'base64')), decipher.final()]);
    } catch {
      // GCM cannot tell a wrong key from a changed file: both fail the tag.
      throw new SecretStoreError(
        'STORE_LOCKED',
        `the store key does not open ${file}: SYNCAUTH_STORE_KEY is not the key it was written with, or the ` +
          'file was changed since. Set the right key; if it is lost, delete the file and run `syncauth setup` ' +
          'to store the secrets again.',
        { path: file },
      );
    }
    let data: unknown;
    try {
      data = JSON.parse(plaintext.toString('utf8'));
    } catch {
      throw corrupt('its content is not JSON');
    } finally {
      plaintext.fill(0);
    }
    const parsed = PlaintextSchema.safeParse(data);
    // Neither zod's issues nor the data go into the message: the data are the secrets.
    if (!parsed.success) throw corrupt('its content is not a set of profile secrets');
    if (keyLength(pass) < MIN_STORE_KEY_LENGTH && options.onWeakKey && !weakKeyWarned.has(file)) {
      weakKeyWarned.add(file);
      options.onWeakKey(
        `SYNCAUTH_STORE_KEY is shorter than ${MIN_STORE_KEY_LENGTH} characters; ${file} still opens with it, but a ` +
          'new store would refuse it. Run `syncauth profile rekey` to re-encrypt the store under a long random key ' +
          '(e.g. the output of `openssl rand -base64 32`).',
      );
    }
    return parsed.data.profiles;
  }

  async function seal(profiles: Profiles, pass: string, kdf: KdfParams): Promise<string> {
    const key = await deriveKey(pass, kdf);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(associatedData(VERSION, kdf));
    const plaintext = Buffer.from(JSON.stringify({ profiles }), 'utf8');
    const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    plaintext.fill(0);
    const envelope: Envelope = {
      format: FORMAT,
      version: VERSION,
      kdf,
      cipher: { name: 'aes-256-gcm', iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64') },
      data: data.toString('base64'),
    };
    return `${JSON.stringify(envelope, null, 2)}\n`;
  }

  async function load(pass: string): Promise<{ profiles: Profiles; kdf: KdfParams } | undefined> {
    const envelope = await readEnvelope();
    if (!envelope) return undefined;
    return { profiles: await open(envelope, pass), kdf: envelope.kdf };
  }

  const freshKdf = (): KdfParams => ({ name: 'scrypt', ...DEFAULT_KDF, salt: randomBytes(SALT_BYTES).toString('base64') });

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

  async function modify(change: (profiles: Profiles) => boolean): Promise<void> {
    const pass = requireKey();
    await ensurePrivateDir(options.configDir);
    await locked(async () => {
      const loaded = await load(pass);
      const profiles = loaded?.profiles ?? {};
      if (!change(profiles)) return;
      // Only here, where a new file is about to be made: an existing one opened with a short key keeps working.
      if (!loaded && keyLength(pass) < MIN_STORE_KEY_LENGTH) {
        throw tooShort('SYNCAUTH_STORE_KEY', `the key for the new store ${file}`);
      }
      // A new file gets a fresh salt; a rewrite keeps it (and so the cached key) and only draws a new IV.
      await writePrivateFile(file, await seal(profiles, pass, loaded?.kdf ?? freshKdf()));
    });
  }

  function locked<T>(work: () => Promise<T>): Promise<T> {
    const lockPath = `${file}.lock`;
    return withFileLock(
      lockPath,
      work,
      {
        waitMs: 15_000,
        staleMs: 10_000,
        timeoutError: () =>
          new SecretStoreError(
            'STORE_LOCK_TIMEOUT',
            `could not lock ${file} within 15 s: another syncauth process holds ${lockPath}. Try again in a moment.`,
            { path: file },
          ),
      },
    );
  }

  function corrupt(reason: string): SecretStoreError {
    return new SecretStoreError(
      'STORE_CORRUPT',
      `${file} is not a readable syncauth secret store: ${reason}. Restore it from a backup, or delete it and ` +
        'run `syncauth setup` to store the secrets again.',
      { path: file },
    );
  }

  return {
    kind: 'file',
    writable: true,
    file,

    async get(profile) {
      assertProfileName(profile);
      const loaded = await load(requireKey());
      return loaded && Object.hasOwn(loaded.profiles, profile) ? { ...loaded.profiles[profile] } : {};
    },

    async set(profile, secrets) {
      assertProfileName(profile);
      const { write, remove } = planMerge(secrets);
      if (write.length === 0 && remove.length === 0) return;
      await modify((profiles) => {
        const next: StoredSecrets = Object.hasOwn(profiles, profile) ? { ...profiles[profile] } : {};
        for (const [name, value] of write) next[name] = value;
        for (const name of remove) delete next[name];
        if (Object.keys(next).length === 0) delete profiles[profile];
        else profiles[profile] = next;
        return true;
      });
    },

    async delete(profile) {
      assertProfileName(profile);
      await modify((profiles) => {
        if (!Object.hasOwn(profiles, profile)) return false;
        delete profiles[profile];
        return true;
      });
    },

    async listProfiles() {
      const loaded = await load(requireKey());
      return Object.keys(loaded?.profiles ?? {}).sort();
    },

    async rekey(newKey) {
      const pass = requireKey();
      const next = newKey.trim();
      if (keyLength(next) < MIN_STORE_KEY_LENGTH) throw tooShort('new store key', 'the new key');
      if (next === pass) throw new ValidationError([{ field: 'new store key', message: 'is the key the store already has' }]);
      return locked(async () => {
        const loaded = await load(pass);
        if (!loaded) {
          throw new SyncauthError('SYNCAUTH_NO_STORE', `there is no encrypted store at ${file}: nothing to re-key`, {
            hint: 'a store is made by `syncauth setup` with SYNCAUTH_STORE=file; check SYNCAUTH_CONFIG_DIR',
          });
        }
        // A fresh salt too: nothing derived from the old key and salt is any use against the new file.
        await writePrivateFile(file, await seal(loaded.profiles, next, freshKdf()));
        return Object.keys(loaded.profiles).sort();
      });
    },
  };
}

function associatedData(version: Envelope['version'], kdf: KdfParams): Buffer {
  return Buffer.from(
    JSON.stringify({ format: FORMAT, version, kdf: { name: kdf.name, N: kdf.N, r: kdf.r, p: kdf.p, salt: kdf.salt } }),
    'utf8',
  );
}
