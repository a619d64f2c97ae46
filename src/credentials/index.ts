// Where the four secrets live. The keychain is the default; the encrypted file and the environment are used
// only when chosen. Nothing here falls back from one store to another: a keychain that cannot be reached is
// an error that names the other two, never a quiet switch to something weaker.
import { ValidationError } from '../errors.js';
import { openEnvSecretStore } from './env.js';
import { openFileSecretStore } from './file.js';
import { openKeychainSecretStore } from './keychain.js';
import type { SecretStore, SecretStoreKind } from './types.js';

export { SECRET_NAMES, SECRET_ENV } from './types.js';
export type { SecretName, ProfileSecrets, SecretStore, SecretStoreKind, StoredSecrets } from './types.js';
export { SecretStoreError, isSecretStoreError, isKeychainUnavailable, SECRET_STORE_ERROR_CODES } from './errors.js';
export type { SecretStoreErrorCode } from './errors.js';
export { MIN_STORE_KEY_LENGTH, SECRET_FILE_NAME, SECRET_RECORDS_DIR, openFileSecretStore, secretFilesOf } from './file.js';
export type { FileSecretStore } from './file.js';
export { KEYCHAIN_SERVICE, KEYCHAIN_INDEX_ACCOUNT, KEYCHAIN_CACHE_KEY_ACCOUNT, KEYCHAIN_TOKENS_DIR, keychainAccount, keychainTokenFileOf } from './keychain.js';

export const DEFAULT_KEYCHAIN_TIMEOUT_MS = 3_000;

export interface OpenSecretStoreOptions {
  kind: SecretStoreKind;
  /** Holds `secrets.enc` (file store) and the keychain index lock. */
  configDir: string;
  /**
   * Where SYNCAUTH_* secrets (env store), SYNCAUTH_STORE_KEY (file store) and the D-Bus session (keychain) are
   * read from, at each call. Default: process.env.
   */
  env?: NodeJS.ProcessEnv;
  /** Key of the file store; wins over SYNCAUTH_STORE_KEY in `env`. */
  storeKey?: string;
  /** What chose the store, for its errors (the file store's missing key): `SYNCAUTH_STORE=file` unless said. */
  chosenBy?: string;
  /** Limit on each keychain operation. Default 3 s. */
  timeoutMs?: number;
  /**
   * Where a store's warnings go (today: a file store opened with a key shorter than the minimum for a new
   * one). Default: a `warning:` line on stderr, which is where a command's notes go and never a log's lines.
   */
  onWarning?: (message: string) => void;
}

const warnOnStderr = (message: string): void => {
  process.stderr.write(`warning: ${message}\n`);
};

export function openSecretStore(options: OpenSecretStoreOptions): SecretStore {
  const env = () => options.env ?? process.env;
  switch (options.kind) {
    case 'keychain':
      return openKeychainSecretStore({
        configDir: options.configDir,
        env,
        timeoutMs: options.timeoutMs ?? DEFAULT_KEYCHAIN_TIMEOUT_MS,
      });
    case 'file':
      return openFileSecretStore({
        configDir: options.configDir,
        storeKey: () => options.storeKey ?? env().SYNCAUTH_STORE_KEY,
        onWeakKey: options.onWarning ?? warnOnStderr,
        ...(options.chosenBy ? { chosenBy: options.chosenBy } : {}),
      });
    case 'env':
      return openEnvSecretStore(env());
    default:
      throw new ValidationError([{ field: 'SYNCAUTH_STORE', message: 'must be one of: keychain, file, env' }]);
  }
}
