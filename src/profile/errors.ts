import { SyncauthError } from '../errors.js';

export const PROFILE_STORE_ERROR_CODES = ['PROFILE_CORRUPT', 'PROFILE_LOCK_TIMEOUT', 'PROFILE_MISMATCH'] as const;
export type ProfileStoreErrorCode = (typeof PROFILE_STORE_ERROR_CODES)[number];

export class ProfileStoreError extends SyncauthError {
  declare readonly code: ProfileStoreErrorCode;
  /** The state file or lock the error is about. */
  readonly path: string;

  constructor(code: ProfileStoreErrorCode, message: string, options: { path: string; cause?: unknown }) {
    // A busy lock frees itself; a state file that does not parse or belongs to another profile needs a person.
    super(code, message, { kind: code === 'PROFILE_LOCK_TIMEOUT' ? 'transient' : 'configuration', cause: options.cause });
    this.path = options.path;
  }
}

export function isProfileStoreError(error: unknown, code?: ProfileStoreErrorCode): error is ProfileStoreError {
  return error instanceof ProfileStoreError && (code === undefined || error.code === code);
}
