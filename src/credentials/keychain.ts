// The OS keychain through @napi-rs/keyring, pinned to the Secret Service on Linux: unpinned, the library
// falls back without a word to the kernel keyring, which a reboot empties, taking the refresh token with it.
//
// Every operation runs in a short-lived child process. Observed with @napi-rs/keyring 2.1: constructing an
// entry pinned to the Secret Service connects to D-Bus synchronously on the calling thread, so a bus that
// accepts the connection and never answers blocks the event loop: neither the AbortSignal the async methods
// take nor any timer can fire. A child can be killed when the time is up. It also gives every call a fresh
// libdbus, which otherwise caches the session bus address for the life of the process, so
// DBUS_SESSION_BUS_ADDRESS is honoured as it is at call time. The cost is one node start-up (~60 ms) per
// store operation, which the handful of keychain calls per command can afford. At most CHILDREN_AT_ONCE run at
// once in a process, the rest waiting their turn before their time limit starts: a daemon loading a hundred
// keychain profiles sixteen at a time had sixteen node start-ups contend for two cores, and some ran past 3 s.
//
// The access-token cache is not in the keychain: a renewal would start a child per token stored, and the
// daemon one per token read back. The keychain holds one random cache key instead (account
// `__token-cache-key__`, made with the first token stored, under the index lock), read once per process and
// kept in memory; each profile's last access token is a file of its own, `<configDir>/keychain-tokens/
// <profile>.token` (0600, in a 0700 directory), sealed under that key with AES-256-GCM and bound to its format,
// version and profile name (see sealed-record.ts), as the file store keeps its `secrets/<profile>.token`. So
// the keychain is touched when a process starts (the read of the grant fetches the key in the same child) and
// when the grant changes, never per renewal. Like the file store's, the token file is replaced whole, without
// a lock, and not flushed: a crash loses at most the cache, and a file that does not open (torn, changed, or
// sealed under another key) reads as no token, which the next renewal writes again. A key read from the
// keychain is kept for the life of the process; a token file that fails the tag has the key read again (at
// most once a minute), so a key replaced in the keychain does not strand a long-running daemon.
//
// The previous release kept the token in the keychain under `<profile>:access_token`. get() still reads that
// entry while the profile has no token file (the file, once written, wins), and the next write of the profile's
// grant or its deletion removes it, in the child that does the write.
//
// listProfiles: the Secret Service, macOS Keychain and Windows Credential Manager cannot be enumerated alike,
// so the store keeps its own index, a JSON list of profile names under the account `__profiles__` (no
// profile name can take that form, nor `__token-cache-key__`). It is updated in the same child as the secrets,
// under a lock file in the config dir so two processes adding profiles at once cannot lose one. A profile whose
// token file alone is left is listed too, as a profile holding only its token is in any store.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as z from 'zod';
import { Semaphore } from '../limiter.js';
import { ensurePrivateDir, readdirIfExists, writePrivateFile } from '../profile/files.js';
import { withFileLock } from '../profile/lock.js';
import { assertProfileName, isProfileName } from '../profile/name.js';
import { SecretStoreError } from './errors.js';
import { readSealedFile, recordAad, sealRecord, unsealRecord } from './sealed-record.js';
import type { RecordFormat } from './sealed-record.js';
import { SECRET_NAMES, STORED_NAMES, planMerge } from './types.js';
import type { StoredSecrets, SecretStore, StoredName } from './types.js';

export const KEYCHAIN_SERVICE = 'syncauth';
export const KEYCHAIN_INDEX_ACCOUNT = '__profiles__';
/** The account of the key the access-token files are sealed under. */
export const KEYCHAIN_CACHE_KEY_ACCOUNT = '__token-cache-key__';
/** The directory in the config dir that holds the keychain profiles' access-token files. */
export const KEYCHAIN_TOKENS_DIR = 'keychain-tokens';
const TOKEN_SUFFIX = '.token';
const INDEX_LOCK_FILE = 'keychain-index.lock';
const TOKEN_FORMAT: RecordFormat = { format: 'syncauth-keychain-token', version: 1 };
const CACHE_KEY_BYTES = 32;
/** A token file that fails the tag has the key read again from the keychain, at most this often. */
const KEY_RELOAD_MS = 60_000;
const TokenContent = z.strictObject({ access_token: z.string().min(1) });

/** The file holding the cached access token of a keychain profile (which need not exist). */
export function keychainTokenFileOf(configDir: string, profile: string): string {
  return path.join(configDir, KEYCHAIN_TOKENS_DIR, `${profile}${TOKEN_SUFFIX}`);
}

/**
 * The cache key of each keychain this process has used (by D-Bus session address), read once and kept: every
 * store opened in the process shares it, and a read or a creation under way is shared too.
 */
const cacheKeys = new Map<string, { key: Buffer; at: number }>();
const keyFlights = new Map<string, Promise<Buffer | undefined>>();

/** A key as the keychain holds it (base64 of 32 bytes), or undefined for anything else. */
function parseCacheKey(raw: unknown): Buffer | undefined {
  if (typeof raw !== 'string' || !/^[A-Za-z0-9+/]{43}=$/.test(raw)) return undefined;
  const key = Buffer.from(raw, 'base64');
  return key.length === CACHE_KEY_BYTES ? key : undefined;
}

export function keychainAccount(profile: string, name: StoredName): string {
  return `${profile}:${name}`;
}

type KeychainOp =
  | { op: 'get'; account: string }
  | { op: 'set'; account: string; value: string }
  | { op: 'delete'; account: string }
  /** The account's value when it is a cache key; otherwise `value` is stored there and returned. */
  | { op: 'ensure'; account: string; value: string }
  /** Adds `profile` to the index if any of `accounts` holds a secret, removes it otherwise. */
  | { op: 'index-sync'; account: string; profile: string; accounts: string[] };

// The child runs a real file beside this one, kept in plain CommonJS so it runs the same from the sources and
// from dist (tsconfig.build.json copies it).
const CHILD_SCRIPT = fileURLToPath(new URL('./keychain-child.cjs', import.meta.url));

export interface KeychainSecretStoreOptions {
  configDir: string;
  /** The environment the keychain child runs in, read at each call (D-Bus address, HOME, XDG dirs). */
  env: () => NodeJS.ProcessEnv;
  timeoutMs: number;
}

/** The keychain store for one config dir and environment: the secrets in the keychain, the access tokens in files. */
class KeychainStore implements SecretStore {
  // Only the options are kept, the paths joined where they are used: the daemon opens a store per profile while
  // it loads them, and the two paths' strings were most of what each held, for a saving no child's start-up
  // would notice.
  readonly #options: KeychainSecretStoreOptions;

  constructor(options: KeychainSecretStoreOptions) {
    this.#options = options;
  }

  get kind(): 'keychain' {
    return 'keychain';
  }

  get writable(): boolean {
    return true;
  }

  get #indexLock(): string {
    return path.join(this.#options.configDir, INDEX_LOCK_FILE);
  }

  get #tokensDir(): string {
    return path.join(this.#options.configDir, KEYCHAIN_TOKENS_DIR);
  }

  #run(ops: KeychainOp[], doing: string, values: string[] = []): Promise<unknown[]> {
    return runInChild(ops, { env: this.#options.env(), timeoutMs: this.#options.timeoutMs, doing, values });
  }

  async #underIndexLock<T>(fn: () => Promise<T>): Promise<T> {
    const indexLock = this.#indexLock;
    await ensurePrivateDir(this.#options.configDir);
    return withFileLock(indexLock, fn, {
      waitMs: 15_000,
      staleMs: 10_000,
      timeoutError: () =>
        new SecretStoreError(
          'STORE_LOCK_TIMEOUT',
          `could not lock the keychain profile index within 15 s: another syncauth process holds ${indexLock}. ` +
            'Try again in a moment.',
          { path: indexLock },
        ),
    });
  }

  // ---- the cache key ----

  #keychainId(): string {
    return this.#options.env().DBUS_SESSION_BUS_ADDRESS ?? '';
  }

  #heldKey(): Buffer | undefined {
    return cacheKeys.get(this.#keychainId())?.key;
  }

  /**
   * The cache key: the one held, else read from the keychain; with `create`, one made and stored (under the
   * index lock, so two processes cannot each store their own) when the keychain holds none.
   */
  #cacheKey(create: boolean): Promise<Buffer | undefined> {
    const id = this.#keychainId();
    const held = cacheKeys.get(id)?.key;
    if (held) return Promise.resolve(held);
    const flightId = `${create ? 'create' : 'read'}\0${id}`;
    const pending = keyFlights.get(flightId);
    if (pending) return pending;
    const flight = (async () => {
      try {
        if (!create) {
          const [raw] = await this.#run([{ op: 'get', account: KEYCHAIN_CACHE_KEY_ACCOUNT }], 'reading the access-token cache key');
          return keep(id, raw);
        }
        const fresh = randomBytes(CACHE_KEY_BYTES).toString('base64');
        const doing = 'storing the access-token cache key';
        const [raw] = await this.#underIndexLock(() => this.#run([{ op: 'ensure', account: KEYCHAIN_CACHE_KEY_ACCOUNT, value: fresh }], doing, [fresh]));
        const key = keep(id, raw);
        if (!key) throw new SecretStoreError('KEYCHAIN_UNAVAILABLE', 'the OS keychain did not keep the access-token cache key');
        return key;
      } finally {
        keyFlights.delete(flightId);
      }
    })();
    keyFlights.set(flightId, flight);
    return flight;
  }

  /** After a token file failed the tag under `failed`: the keychain's key, when it is another one. */
  async #reloadedKey(failed: Buffer): Promise<Buffer | undefined> {
    const id = this.#keychainId();
    const held = cacheKeys.get(id);
    // Another call read a different key meanwhile.
    if (held && !held.key.equals(failed)) return held.key;
    // Read a moment ago: the file is torn or changed, not sealed under a key the keychain has now.
    if (held && Date.now() - held.at < KEY_RELOAD_MS) return undefined;
    cacheKeys.delete(id);
    const key = await this.#cacheKey(false).catch(() => undefined);
    // The keychain out of reach, or holding no key: the old one serves on, for another minute before asking again.
    if (!key && held) cacheKeys.set(id, { key: held.key, at: Date.now() });
    return key && !key.equals(failed) ? key : undefined;
  }

  // ---- the token files ----

  #tokenFile(profile: string): string {
    return keychainTokenFileOf(this.#options.configDir, profile);
  }

  /**
   * The profile's token file: whether there is one, and the token when it opens. `key` is the one to try, or
   * `fetch` to read it from the keychain when none is held.
   */
  async #readTokenFile(profile: string, key: Buffer | undefined | 'fetch'): Promise<{ present: boolean; token?: string }> {
    const text = readSealedFile(this.#tokenFile(profile));
    if (text === undefined) return { present: false };
    const first = key === 'fetch' ? await this.#cacheKey(false) : key;
    if (!first) return { present: true };
    let token = unsealToken(profile, text, first);
    if (token === 'wrong key') {
      const again = await this.#reloadedKey(first);
      token = again ? unsealToken(profile, text, again) : undefined;
    }
    return token === 'wrong key' || token === undefined ? { present: true } : { present: true, token };
  }

  /** Replaces the profile's token file whole, not flushed (see the head of this file). */
  async #writeTokenFile(profile: string, token: string): Promise<void> {
    const key = this.#heldKey() ?? (await this.#cacheKey(true));
    if (!key) return;
    const text = sealRecord(TOKEN_FORMAT, key, tokenAad(profile), { access_token: token });
    const write = () => writePrivateFile(this.#tokenFile(profile), text, undefined, { followLinks: false, durable: false });
    try {
      await write();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      await ensurePrivateDir(this.#options.configDir);
      await ensurePrivateDir(this.#tokensDir, { tighten: true });
      await write();
    }
  }

  async #tokenFileNames(): Promise<string[]> {
    return (await readdirIfExists(this.#tokensDir))
      .filter((entry) => entry.endsWith(TOKEN_SUFFIX))
      .map((entry) => entry.slice(0, -TOKEN_SUFFIX.length))
      .filter(isProfileName);
  }

  /** Removes the cached token: its file, and the entry the previous release kept in the keychain. */
  async #removeToken(profile: string): Promise<void> {
    await rm(this.#tokenFile(profile), { force: true });
    const ops: KeychainOp[] = [
      { op: 'delete', account: keychainAccount(profile, 'access_token') },
      { op: 'index-sync', account: KEYCHAIN_INDEX_ACCOUNT, profile, accounts: accountsOf(profile) },
    ];
    await this.#underIndexLock(() => this.#run(ops, `removing the access token of profile "${profile}"`));
  }

  async get(profile: string): Promise<StoredSecrets> {
    assertProfileName(profile);
    // The cache key rides along with the first read of a process: no child of its own.
    const id = this.#keychainId();
    const withKey = !cacheKeys.has(id);
    const ops: KeychainOp[] = accountsOf(profile).map((account) => ({ op: 'get', account }));
    if (withKey) ops.push({ op: 'get', account: KEYCHAIN_CACHE_KEY_ACCOUNT });
    const results = await this.#run(ops, `reading the secrets of profile "${profile}"`);
    const secrets: StoredSecrets = {};
    SECRET_NAMES.forEach((name) => {
      const value = results[STORED_NAMES.indexOf(name)];
      if (typeof value === 'string' && value !== '') secrets[name] = value;
    });
    const key = withKey ? keep(id, results[STORED_NAMES.length]) : this.#heldKey();
    const file = await this.#readTokenFile(profile, key);
    // The previous release's entry, while no file has taken its place.
    const previous = results[STORED_NAMES.indexOf('access_token')];
    const token = file.present ? file.token : typeof previous === 'string' && previous !== '' ? previous : undefined;
    if (token !== undefined) secrets.access_token = token;
    return secrets;
  }

  async set(profile: string, secrets: StoredSecrets): Promise<void> {
    assertProfileName(profile);
    const { write, remove } = planMerge(secrets);
    const grantWrite = write.filter(([name]) => name !== 'access_token');
    const grantRemove = remove.filter((name) => name !== 'access_token');
    const token = secrets.access_token;
    if (grantWrite.length > 0 || grantRemove.length > 0) {
      // A token stored with the grant (setup's marker) needs the key: made in the same child when there is none.
      const fresh = token && !this.#heldKey() ? randomBytes(CACHE_KEY_BYTES).toString('base64') : undefined;
      const id = this.#keychainId();
      const ops: KeychainOp[] = [
        ...grantWrite.map(([name, value]): KeychainOp => ({ op: 'set', account: keychainAccount(profile, name), value })),
        ...grantRemove.map((name): KeychainOp => ({ op: 'delete', account: keychainAccount(profile, name) })),
        // The previous release's cached token goes with the grant it was of.
        { op: 'delete', account: keychainAccount(profile, 'access_token') },
        ...(fresh ? [{ op: 'ensure', account: KEYCHAIN_CACHE_KEY_ACCOUNT, value: fresh } satisfies KeychainOp] : []),
        { op: 'index-sync', account: KEYCHAIN_INDEX_ACCOUNT, profile, accounts: accountsOf(profile) },
      ];
      const doing = `storing the secrets of profile "${profile}"`;
      const values = [...grantWrite.map(([, value]) => value), ...(fresh ? [fresh] : [])];
      const results = await this.#underIndexLock(() => this.#run(ops, doing, values));
      if (fresh) keep(id, results[ops.length - 2]);
      if (token === '') await rm(this.#tokenFile(profile), { force: true });
    } else if (token === '') {
      await this.#removeToken(profile);
    }
    if (token) await this.#writeTokenFile(profile, token);
  }

  async readAccessToken(profile: string): Promise<string | undefined> {
    assertProfileName(profile);
    return (await this.#readTokenFile(profile, this.#heldKey() ?? 'fetch')).token;
  }

  async writeAccessToken(profile: string, value: string): Promise<void> {
    assertProfileName(profile);
    if (value === '') await this.#removeToken(profile);
    else await this.#writeTokenFile(profile, value);
  }

  async delete(profile: string): Promise<void> {
    assertProfileName(profile);
    await rm(this.#tokenFile(profile), { force: true });
    const ops: KeychainOp[] = [
      ...accountsOf(profile).map((account): KeychainOp => ({ op: 'delete', account })),
      { op: 'index-sync', account: KEYCHAIN_INDEX_ACCOUNT, profile, accounts: accountsOf(profile) },
    ];
    await this.#underIndexLock(() => this.#run(ops, `deleting the secrets of profile "${profile}"`));
  }

  async listProfiles(): Promise<string[]> {
    const [raw] = await this.#run([{ op: 'get', account: KEYCHAIN_INDEX_ACCOUNT }], 'listing the profiles');
    // A profile whose token file alone is left counts, as a profile holding only its token does in any store.
    const names = new Set(await this.#tokenFileNames());
    let parsed: unknown;
    try {
      parsed = typeof raw === 'string' ? JSON.parse(raw) : [];
    } catch {
      parsed = [];
    }
    if (Array.isArray(parsed)) for (const name of parsed) if (typeof name === 'string' && isProfileName(name)) names.add(name);
    return [...names].sort();
  }
}

export function openKeychainSecretStore(options: KeychainSecretStoreOptions): SecretStore {
  return new KeychainStore(options);
}

/** The keychain accounts of a profile's stored names. */
function accountsOf(profile: string): string[] {
  return STORED_NAMES.map((name) => keychainAccount(profile, name));
}

/** Keeps the key the keychain answered with; undefined when it holds none (or something that is not a key). */
function keep(id: string, raw: unknown): Buffer | undefined {
  const key = parseCacheKey(raw);
  if (key) cacheKeys.set(id, { key, at: Date.now() });
  return key;
}

function tokenAad(profile: string): Buffer {
  return recordAad(TOKEN_FORMAT, 'token', profile);
}

function unsealToken(profile: string, text: string, key: Buffer): string | undefined | 'wrong key' {
  const opened = unsealRecord(TOKEN_FORMAT, text, key, tokenAad(profile));
  if (!opened.ok) return opened.failure === 'key' ? 'wrong key' : undefined;
  const parsed = TokenContent.safeParse(opened.value);
  return parsed.success ? parsed.data.access_token : undefined;
}

interface ChildContext {
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  /** What the operation was, for the message: `reading the secrets of profile "docs"`. */
  doing: string;
  /** Secret values in flight, to scrub from anything the platform says back. */
  values: string[];
}

let keyringModule: string | undefined;

const CHILDREN_AT_ONCE = 4;
const children = new Semaphore(CHILDREN_AT_ONCE);

function runInChild(ops: KeychainOp[], context: ChildContext): Promise<unknown[]> {
  return children.run(() => runChild(ops, context));
}

function runChild(ops: KeychainOp[], context: ChildContext): Promise<unknown[]> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const unavailable = (reason: string, cause?: unknown) =>
      new SecretStoreError(
        'KEYCHAIN_UNAVAILABLE',
        `the OS keychain is not available while ${context.doing}: ${scrub(reason, context.values)}. ${keychainRemedy()}`,
        { cause },
      );
    try {
      keyringModule ??= createRequire(import.meta.url).resolve('@napi-rs/keyring');
    } catch (error) {
      reject(unavailable('the @napi-rs/keyring package is not installed', error));
      return;
    }
    const child = spawn(process.execPath, [CHILD_SCRIPT, keyringModule], {
      env: childEnv(context.env),
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    let stdout = '';
    let stderr = '';
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settle(() =>
        reject(
          new SecretStoreError(
            'KEYCHAIN_TIMEOUT',
            `the OS keychain did not answer within ${context.timeoutMs / 1000} s while ${context.doing} (a Secret ` +
              `Service that hangs, or a keychain waiting for an unlock prompt). ${keychainRemedy()}`,
          ),
        ),
      );
    }, context.timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < 4096) stderr += chunk;
    });
    child.stdin.on('error', () => undefined); // EPIPE when the child dies before reading; 'close' reports it.
    child.on('error', (error) => settle(() => reject(unavailable(`could not start ${process.execPath}`, error))));
    child.on('close', (code, signal) => {
      settle(() => {
        let reply: { ok?: unknown; results?: unknown; message?: unknown } | undefined;
        try {
          reply = JSON.parse(stdout) as typeof reply;
        } catch {
          reply = undefined;
        }
        if (reply?.ok === true && Array.isArray(reply.results)) {
          resolve(reply.results);
          return;
        }
        if (reply && typeof reply.message === 'string') {
          reject(unavailable(reply.message));
          return;
        }
        // No reply at all: the native module failed to load or crashed. Its first words say which.
        const firstLine = stderr.split('\n').find((line) => line.trim() !== '')?.trim();
        const how = signal ? `signal ${signal}` : `exit code ${String(code)}`;
        reject(
          unavailable(
            `the keychain helper stopped after ${Date.now() - started} ms with ${how}` +
              (firstLine ? ` (${firstLine.slice(0, 200)})` : ''),
          ),
        );
      });
    });
    child.stdin.end(JSON.stringify({ service: KEYCHAIN_SERVICE, ops }));
  });
}

// The child gets the caller's environment minus syncauth's own variables, several of which are secrets the
// keychain library has no use for, and minus NODE_OPTIONS, whose preloads (a test runner's, a debugger's) are
// not meant for this helper.
function childEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined || key.startsWith('SYNCAUTH_') || key === 'NODE_OPTIONS') continue;
    out[key] = value;
  }
  return out;
}

function scrub(text: string, values: string[]): string {
  let out = text;
  for (const value of values) if (value) out = out.split(value).join('[redacted]');
  return out.length > 300 ? `${out.slice(0, 300)}…` : out;
}

function keychainRemedy(): string {
  const first =
    process.platform === 'linux'
      ? 'Run a Secret Service in your D-Bus session and unlock it (e.g. gnome-keyring-daemon --unlock), or choose'
      : process.platform === 'darwin'
        ? 'Unlock the login keychain, or choose'
        : 'Check the Windows Credential Manager, or choose';
  return (
    `${first} another store: SYNCAUTH_STORE=file with SYNCAUTH_STORE_KEY set to a long random key keeps the ` +
    'secrets in an encrypted file in the config directory; SYNCAUTH_STORE=env reads them from ' +
    'SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_REFRESH_TOKEN and SYNCAUTH_API_KEY.'
  );
}
