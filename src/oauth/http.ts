// One HTTP exchange with Dropbox (or a stand-in): a POST through net/post.ts (the caller's undici dispatcher or
// the proxy's, else a keep-alive pool per origin, an overall deadline), and failures before a complete answer
// turned into OAuthError. Status handling is the caller's.
import type { Dispatcher } from 'undici';
import { ValidationError } from '../errors.js';
import { OAuthError } from './errors.js';
import { HTTP_SCHEMES, parseUrl } from '../net/http.js';
import { PostFailure, post as postOnce, type PostAnswer } from '../net/post.js';

export { headerValue, parseRetryAfter } from '../net/http.js';
export { DEFAULT_TIMEOUT_MS, formatMs } from '../net/post.js';

/** Options every network call of this module takes. */
export interface TransportOptions {
  /** undici dispatcher (an Agent, a Pool, a MockAgent); the global dispatcher when omitted. */
  dispatcher?: Dispatcher;
  /** Deadline for the whole exchange in milliseconds; default 30 000. */
  timeoutMs?: number;
  /** Stops the exchange; it then fails with `OAUTH_ABORTED`. */
  signal?: AbortSignal;
}

export interface HttpCall extends TransportOptions {
  url: URL;
  headers: Record<string, string>;
  body?: string;
  /** Who is asked, for messages: "Dropbox's token endpoint". */
  peer: string;
}

export type HttpAnswer = PostAnswer;

/** OAuthError's code for each way a POST can fail before a complete answer. */
const FAILURE_CODES = { timeout: 'OAUTH_TIMEOUT', network: 'OAUTH_NETWORK', aborted: 'OAUTH_ABORTED' } as const;

/** One POST; resolves with any status, rejects (with an OAuthError) only when no complete answer arrived. */
export async function post(call: HttpCall): Promise<HttpAnswer> {
  try {
    return await postOnce(call);
  } catch (error) {
    if (!(error instanceof PostFailure)) throw error;
    throw new OAuthError(FAILURE_CODES[error.reason], error.message, {
      ...(error.hint !== undefined ? { hint: error.hint } : {}),
      cause: error.cause,
    });
  }
}

/** Parses JSON only when the text is an object; Dropbox sends plain text for some errors. */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  const trimmed = text.trim();
  if (!trimmed.startsWith('{')) return undefined;
  try {
    const value = JSON.parse(trimmed) as unknown;
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Parses an endpoint option; `field` names it in the error. */
export function endpointUrl(value: string, field: string): URL {
  const url = parseUrl(value, HTTP_SCHEMES);
  // Credentials in a URL end up in logs and messages; Dropbox never needs them there.
  if (url === 'has_credentials') throw new ValidationError([{ field, message: 'must not contain a user name or password' }]);
  if (typeof url === 'string') throw new ValidationError([{ field, message: 'must be an http(s) URL' }]);
  return url;
}

// Visible ASCII only: anything else would corrupt a header or could never be a Dropbox credential.
const HEADER_SAFE = /^[\x21-\x7e]+$/;

/** Checks a credential without ever echoing it. */
export function checkCredential(value: string, field: string, options: { noColon?: boolean } = {}): void {
  if (typeof value !== 'string' || value === '') throw new ValidationError([{ field, message: 'must not be empty' }]);
  if (!HEADER_SAFE.test(value)) {
    throw new ValidationError([{ field, message: 'contains spaces or characters a Dropbox credential never has' }]);
  }
  // HTTP Basic separates key and secret with the first colon.
  if (options.noColon && value.includes(':')) {
    throw new ValidationError([{ field, message: 'contains ":", which a Dropbox app key never has' }]);
  }
}
