// Every message here says what to do next and carries no secret: the values the stores handle never reach a
// message, a property or a cause, so an error can be logged or printed whole.
import { ExitCode, SyncauthError, type ErrorKind } from '../errors.js';

export const SECRET_STORE_ERROR_CODES = [
  'KEYCHAIN_UNAVAILABLE',
  'KEYCHAIN_TIMEOUT',
  'STORE_LOCKED',
  'STORE_KEY_MISSING',
  'STORE_READ_ONLY',
  'STORE_CORRUPT',
  'STORE_LOCK_TIMEOUT',
] as const;
export type SecretStoreErrorCode = (typeof SECRET_STORE_ERROR_CODES)[number];

export class SecretStoreError extends SyncauthError {
  declare readonly code: SecretStoreErrorCode;
  /** The file the error is about (encrypted store), when there is one. */
  readonly path: string | undefined;

  constructor(code: SecretStoreErrorCode, message: string, options: { path?: string; cause?: unknown } = {}) {
    super(code, message, { kind: kindFor(code), exitCode: exitCodeFor(code), cause: options.cause });
    this.path = options.path;
  }
}

export function isSecretStoreError(error: unknown, code?: SecretStoreErrorCode): error is SecretStoreError {
  return error instanceof SecretStoreError && (code === undefined || error.code === code);
}

/** True for the two ways a keychain can be out of reach, which both call for the same remedy. */
export function isKeychainUnavailable(error: unknown): error is SecretStoreError {
  return isSecretStoreError(error, 'KEYCHAIN_UNAVAILABLE') || isSecretStoreError(error, 'KEYCHAIN_TIMEOUT');
}

// A store that is read-only, locked, corrupt or lacks its key stays so until a person acts; a keychain out of
// reach or a busy store lock may come back by itself.
function kindFor(code: SecretStoreErrorCode): ErrorKind {
  switch (code) {
    case 'STORE_READ_ONLY':
    case 'STORE_KEY_MISSING':
    case 'STORE_LOCKED':
    case 'STORE_CORRUPT':
      return 'configuration';
    default:
      return 'transient';
  }
}

// An exit code that predates kinds: a missing key or a write to the read-only environment is a matter of how
// syncauth was invoked (2), where the kind alone would give 1.
function exitCodeFor(code: SecretStoreErrorCode): ExitCode | undefined {
  return code === 'STORE_KEY_MISSING' || code === 'STORE_READ_ONLY' ? ExitCode.usage : undefined;
}
