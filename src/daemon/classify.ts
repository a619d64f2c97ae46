// What a failure means for the daemon: wait and retry (how long), or stop until a person acts. The error's
// kind decides, through the one table in errors.ts; anything that is not a SyncauthError is retried.
import { ERROR_KIND_OUTCOMES, SyncauthError, type FailureKind } from '../errors.js';
import { syncauthCommand } from '../profile/name.js';

export type { FailureKind } from '../errors.js';

export interface Failure {
  kind: FailureKind;
  code: string;
  /** Safe to log: every message of ours is built without secrets. */
  message: string;
  /** The error's hint, a remedy's command written as the person ran syncauth (as the daemon's logs show it). */
  hint?: string;
  retryAfterMs?: number;
}

export function classifyFailure(error: unknown): Failure {
  if (error instanceof SyncauthError) {
    const kind = ERROR_KIND_OUTCOMES[error.kind].daemon;
    const hint = error.hintFor(syncauthCommand);
    // A wait the other side asked for matters only to a failure that is retried.
    const retries = kind === 'rate_limited' || kind === 'transient';
    return {
      code: error.code,
      message: error.message,
      ...(hint ? { hint } : {}),
      kind,
      ...(retries && error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}),
    };
  }
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return { code: typeof code === 'string' ? code : 'UNEXPECTED', message: error.message, kind: 'transient' };
  }
  return { code: 'UNEXPECTED', message: String(error), kind: 'transient' };
}
