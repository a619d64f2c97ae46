// The OS keychain through @napi-rs/keyring, pinned to the Secret Service on Linux: unpinned, the library
// falls back without a word to the kernel keyring, which a reboot empties, taking the refresh token with it.
//
// Every operation runs in a short-lived child process. Observed with @napi-rs/keyring 2.1: constructing an
// entry pinned to the Secret Service connects to D-Bus synchronously on the calling thread, so a bus that
// accepts the connection and never answers blocks the event loop: neither the AbortSignal the async methods
// take nor any timer can fire. A child can be killed when the time is up. It also gives every call a fresh
// libdbus, which otherwise caches the session bus address for the life of the process, so
// DBUS_SESSION_BUS_ADDRESS is honoured as it is at call time. The cost is one node start-up (~60 ms) per
// store operation, which the handful of keychain calls per command or per renewal can afford.
//
// listProfiles: the Secret Service, macOS Keychain and Windows Credential Manager cannot be enumerated alike,
// so the store keeps its own index, a JSON list of profile names under the account `__profiles__` (no
// profile name can take that form). It is updated in the same child as the secrets, under a lock file in the
// config dir so two processes adding profiles at once cannot lose one.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensurePrivateDir } from '../profile/files.js';
import { withFileLock } from '../profile/lock.js';
import { assertProfileName, isProfileName } from '../profile/name.js';
import { SecretStoreError } from './errors.js';
import { STORED_NAMES, planMerge } from './types.js';
import type { StoredSecrets, SecretStore, StoredName } from './types.js';

export const KEYCHAIN_SERVICE = 'syncauth';
export const KEYCHAIN_INDEX_ACCOUNT = '__profiles__';
const INDEX_LOCK_FILE = 'keychain-index.lock';

export function keychainAccount(profile: string, name: StoredName): string {
  return `${profile}:${name}`;
}

type KeychainOp =
  | { op: 'get'; account: string }
  | { op: 'set'; account: string; value: string }
  | { op: 'delete'; account: string }
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

export function openKeychainSecretStore(options: KeychainSecretStoreOptions): SecretStore {
  const accounts = (profile: string) => STORED_NAMES.map((name) => keychainAccount(profile, name));
  const indexLock = path.join(options.configDir, INDEX_LOCK_FILE);

  const run = (ops: KeychainOp[], doing: string, values: string[] = []) =>
    runInChild(ops, { env: options.env(), timeoutMs: options.timeoutMs, doing, values });

  async function underIndexLock<T>(fn: () => Promise<T>): Promise<T> {
    await ensurePrivateDir(options.configDir);
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

  return {
    kind: 'keychain',
    writable: true,

    async get(profile) {
      assertProfileName(profile);
      const results = await run(
        accounts(profile).map((account) => ({ op: 'get', account })),
        `reading the secrets of profile "${profile}"`,
      );
      const secrets: StoredSecrets = {};
      STORED_NAMES.forEach((name, i) => {
        const value = results[i];
        if (typeof value === 'string' && value !== '') secrets[name] = value;
      });
      return secrets;
    },

    async set(profile, secrets) {
      assertProfileName(profile);
      const { write, remove } = planMerge(secrets);
      if (write.length === 0 && remove.length === 0) return;
      const ops: KeychainOp[] = [
        ...write.map(([name, value]): KeychainOp => ({ op: 'set', account: keychainAccount(profile, name), value })),
        ...remove.map((name): KeychainOp => ({ op: 'delete', account: keychainAccount(profile, name) })),
        { op: 'index-sync', account: KEYCHAIN_INDEX_ACCOUNT, profile, accounts: accounts(profile) },
      ];
      const doing = `storing the secrets of profile "${profile}"`;
      await underIndexLock(() => run(ops, doing, write.map(([, value]) => value)));
    },

    async delete(profile) {
      assertProfileName(profile);
      const ops: KeychainOp[] = [
        ...accounts(profile).map((account): KeychainOp => ({ op: 'delete', account })),
        { op: 'index-sync', account: KEYCHAIN_INDEX_ACCOUNT, profile, accounts: accounts(profile) },
      ];
      await underIndexLock(() => run(ops, `deleting the secrets of profile "${profile}"`));
    },

    async listProfiles() {
      const [raw] = await run([{ op: 'get', account: KEYCHAIN_INDEX_ACCOUNT }], 'listing the profiles');
      if (typeof raw !== 'string') return [];
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        return [];
      }
      if (!Array.isArray(parsed)) return [];
      return parsed.filter((name): name is string => typeof name === 'string' && isProfileName(name)).sort();
    },
  };
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

function runInChild(ops: KeychainOp[], context: ChildContext): Promise<unknown[]> {
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
