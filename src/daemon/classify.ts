// What a failure means for the daemon: wait and retry (how long), or stop until a person acts.
import { isSecretStoreError } from '../credentials/index.js';
import { SyncauthError, ValidationError } from '../errors.js';
import { isOAuthError } from '../oauth/index.js';
import { isProfileStoreError } from '../profile/index.js';
import { isServiceError } from '../service/index.js';
import { isCoordinatorUnavailable } from './coordinator.js';

export type FailureKind = 'rate_limited' | 'transient' | 'terminal' | 'configuration' | 'coordinator';

export interface Failure {
  kind: FailureKind;
  code: string;
  /** Safe to log: every message of ours is built without secrets. */
  message: string;
  hint?: string;
  retryAfterMs?: number;
}

const PERMANENT_STORE_CODES = new Set(['STORE_READ_ONLY', 'STORE_KEY_MISSING', 'STORE_LOCKED', 'STORE_CORRUPT']);

export function classifyFailure(error: unknown): Failure {
  const base = describe(error);
  if (isCoordinatorUnavailable(error)) return { ...base, kind: 'coordinator' };
  if (isOAuthError(error)) {
    switch (error.kind) {
      case 'terminal':
        return { ...base, kind: 'terminal' };
      case 'configuration':
        return { ...base, kind: 'configuration' };
      case 'rate_limited':
        return { ...base, kind: 'rate_limited', ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}) };
      default:
        // Server errors, timeouts, a cancelled request, and answers that are not what the protocol promises
        // (a proxy's error page) are all worth another try later.
        return { ...base, kind: 'transient', ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}) };
    }
  }
  if (error instanceof ValidationError) return { ...base, kind: 'configuration' };
  if (isProfileStoreError(error)) return { ...base, kind: error.code === 'PROFILE_LOCK_TIMEOUT' ? 'transient' : 'configuration' };
  if (isSecretStoreError(error)) return { ...base, kind: PERMANENT_STORE_CODES.has(error.code) ? 'configuration' : 'transient' };
  if (isServiceError(error)) {
    if (error.status === 429) return { ...base, kind: 'rate_limited', ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}) };
    const status = error.status;
    if (status === undefined || status >= 500 || status === 408 || error.code === 'SERVICE_BAD_RESPONSE') {
      return { ...base, kind: 'transient', ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}) };
    }
    // 400, 401, 403, 404 of a route, 409, 412, 422: the request or the key is wrong; repeating it is noise.
    return { ...base, kind: 'configuration' };
  }
  return { ...base, kind: 'transient' };
}

function describe(error: unknown): Omit<Failure, 'kind'> {
  if (error instanceof SyncauthError) return { code: error.code, message: error.message, ...(error.hint ? { hint: error.hint } : {}) };
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return { code: typeof code === 'string' ? code : 'UNEXPECTED', message: error.message };
  }
  return { code: 'UNEXPECTED', message: String(error) };
}
