// The one error class of the OAuth module. Callers branch on `kind` (what to do next) or on `code` (a stable
// string); the message and hint are for people. Nothing secret ever reaches an enumerable property: provider
// texts are scrubbed of the values sent with the request, and the raw body is kept non-enumerable.
import { SyncauthError, type ErrorKind } from '../errors.js';
import { redact } from '../redact.js';
import { remedyHint, type RemedyHint } from '../remedy.js';

/**
 * The {@link ErrorKind}s an OAuth failure can have:
 * - `terminal`: the grant is gone; the user must authorize again (exit 4).
 * - `configuration`: a setting is wrong (app key or secret, URL, port, permissions); retrying will not help.
 * - `rate_limited`: wait `retryAfterMs` (when known), then retry.
 * - `transient`: network, timeout or a server error; retry with backoff. An expired access token is also
 *   transient: renew it, then retry.
 * - `denied`: the user refused (clicked Deny) or the flow was stopped; do not retry on your own.
 * - `protocol`: the answer was not what the protocol promises (bad JSON, wrong state, missing field).
 */
export type OAuthErrorKind = Extract<ErrorKind, 'terminal' | 'configuration' | 'rate_limited' | 'transient' | 'denied' | 'protocol'>;

/** Every `code` an {@link OAuthError} can carry, with the kind it has unless a throw site says otherwise. */
export const OAUTH_ERROR_KINDS = {
  OAUTH_INVALID_GRANT: 'terminal',
  OAUTH_INVALID_CLIENT: 'configuration',
  OAUTH_INVALID_REQUEST: 'configuration',
  OAUTH_INVALID_SCOPE: 'configuration',
  OAUTH_PROVIDER_ERROR: 'protocol',
  OAUTH_RATE_LIMITED: 'rate_limited',
  OAUTH_SERVER_ERROR: 'transient',
  OAUTH_NETWORK: 'transient',
  OAUTH_TIMEOUT: 'transient',
  OAUTH_ABORTED: 'denied',
  OAUTH_ACCESS_DENIED: 'denied',
  OAUTH_STATE_MISMATCH: 'protocol',
  OAUTH_BAD_RESPONSE: 'protocol',
  OAUTH_HTTP_ERROR: 'protocol',
  OAUTH_EXPIRED_ACCESS_TOKEN: 'transient',
  OAUTH_INVALID_ACCESS_TOKEN: 'terminal',
  OAUTH_MISSING_SCOPE: 'configuration',
  OAUTH_ACCESS_FORBIDDEN: 'configuration',
  OAUTH_PATH_NOT_FOUND: 'configuration',
  OAUTH_API_ERROR: 'configuration',
  OAUTH_PORT_IN_USE: 'configuration',
  OAUTH_LOOPBACK_FAILED: 'configuration',
} as const satisfies Record<string, OAuthErrorKind>;

export type OAuthErrorCode = keyof typeof OAUTH_ERROR_KINDS;

export interface OAuthErrorOptions {
  /** Overrides the kind that belongs to the code. */
  kind?: OAuthErrorKind;
  /** The provider's `error` (for v2 API errors, the `.tag`). */
  error?: string;
  /** The provider's `error_description` (for v2 API errors, `error_summary`). */
  errorDescription?: string;
  status?: number;
  retryAfterMs?: number;
  /** For `OAUTH_MISSING_SCOPE`: the permission Dropbox said the call needs. */
  requiredScope?: string;
  hint?: string | RemedyHint;
  cause?: unknown;
  /** The response body as received; stored non-enumerable so loggers and JSON.stringify never see it. */
  body?: unknown;
}

/** A failure of the Dropbox OAuth flow or of one of the few v2 API calls syncauth makes. */
export class OAuthError extends SyncauthError {
  declare readonly code: OAuthErrorCode;
  declare readonly kind: OAuthErrorKind;
  readonly error: string | undefined;
  readonly errorDescription: string | undefined;
  readonly status: number | undefined;
  readonly requiredScope: string | undefined;
  declare readonly body: unknown;

  constructor(code: OAuthErrorCode, message: string, options: OAuthErrorOptions = {}) {
    super(code, message, {
      kind: options.kind ?? OAUTH_ERROR_KINDS[code],
      retryAfterMs: options.retryAfterMs,
      hint: options.hint,
      cause: options.cause,
    });
    this.error = options.error === undefined ? undefined : redact(options.error);
    this.errorDescription = options.errorDescription === undefined ? undefined : redact(options.errorDescription);
    this.status = options.status;
    this.requiredScope = options.requiredScope;
    Object.defineProperty(this, 'body', { value: options.body, enumerable: false, writable: false });
  }
}

/** True when `err` is an {@link OAuthError}, optionally with the given code. */
export function isOAuthError(err: unknown, code?: OAuthErrorCode): err is OAuthError {
  return err instanceof OAuthError && (code === undefined || err.code === code);
}

/** The hint of every failure that only a new authorization can cure. */
export const REAUTHORIZE_HINT = 'run `syncauth setup` to authorize again';

/**
 * {@link REAUTHORIZE_HINT} as a remedy: `syncauth setup` in `error.hint`, and the command as the person invoked
 * syncauth where it is shown (`npx --yes ./syncauth-….tgz setup`); `before` says first why.
 */
export function reauthorizeHint(before = ''): RemedyHint {
  return remedyHint({ action: 'reauthorize' }, (command) => `${before}run \`${command}\` to authorize again`);
}

// Provider texts are short; anything longer is a page of HTML or a stack trace nobody should read in a message.
const MAX_PROVIDER_TEXT = 300;

/**
 * Makes a provider-supplied text safe for a message: every secret sent with the request and every secret the
 * process knows is cut out in each of its forms (a provider may echo a parameter or the Basic header back),
 * control characters go, and the length is bounded.
 */
export function scrub(text: string, secrets: readonly (string | undefined)[]): string {
  let out = redact(text, secrets);
  // eslint-disable-next-line no-control-regex
  out = out.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return out.length > MAX_PROVIDER_TEXT ? `${out.slice(0, MAX_PROVIDER_TEXT)}…` : out;
}
