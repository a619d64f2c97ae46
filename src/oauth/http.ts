// One HTTP exchange with Dropbox (or a stand-in): through the caller's undici dispatcher or the proxy's, else a
// keep-alive pool on Node's own http per origin (net/direct.ts), an overall deadline, and failures before a
// complete answer turned into OAuthError. Status handling is the caller's.
import type { Dispatcher } from 'undici';
import { DirectPool } from '../net/direct.js';
import { proxyDispatcher } from '../net/proxy.js';
import { ValidationError } from '../errors.js';
import { OAuthError } from './errors.js';
import { HTTP_SCHEMES, parseUrl } from '../net/http.js';

export { headerValue, parseRetryAfter } from '../net/http.js';

/** Whole-exchange deadline (connect, headers and body) when the caller gives none. */
export const DEFAULT_TIMEOUT_MS = 30_000;

// The limits of undici's global dispatcher, which carried these calls before; the caller's deadline comes first.
const DIRECT_LIMITS = { connectMs: 10_000, headersMs: 300_000, bodyMs: 300_000 };
/** One pool per origin for the life of the process, as undici's global dispatcher was; idle sockets hold nothing open. */
const directPools = new Map<string, DirectPool>();

function directPool(origin: string): DirectPool {
  let pool = directPools.get(origin);
  if (!pool) {
    pool = new DirectPool(origin, DIRECT_LIMITS);
    directPools.set(origin, pool);
  }
  return pool;
}

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

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One POST; resolves with any status, rejects only when no complete answer arrived. */
export async function post(call: HttpCall): Promise<HttpAnswer> {
  const timeoutMs = call.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (call.signal?.aborted) throw abortedError(call, call.signal.reason);
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = (): void => controller.abort();
  call.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const exchange = {
      method: 'POST' as const,
      path: `${call.url.pathname}${call.url.search}`,
      headers: call.headers,
      ...(call.body !== undefined ? { body: call.body } : {}),
      signal: controller.signal,
    };
    // Without one of the caller's, the proxy the environment names (HTTPS_PROXY, NO_PROXY), else a direct pool.
    const dispatcher = call.dispatcher ?? proxyDispatcher(call.url);
    if (!dispatcher) {
      const answer = await directPool(call.url.origin).request(exchange);
      return { status: answer.statusCode, headers: answer.headers, text: answer.text };
    }
    const response = await dispatcher.request({ ...exchange, origin: call.url.origin });
    const text = await response.body.text();
    return { status: response.statusCode, headers: response.headers, text };
  } catch (err) {
    if (timedOut) {
      throw new OAuthError('OAUTH_TIMEOUT', `${call.peer} (${call.url.origin}) did not answer within ${formatMs(timeoutMs)}`, {
        hint: 'check the network connection and try again',
        cause: err,
      });
    }
    if (call.signal?.aborted) throw abortedError(call, call.signal.reason);
    const code = errorCode(err);
    throw new OAuthError('OAUTH_NETWORK', `could not reach ${call.peer} at ${call.url.origin}${code ? ` (${code})` : ''}`, {
      hint: 'check the network connection and the endpoint URL, then try again',
      cause: err,
    });
  } finally {
    clearTimeout(timer);
    call.signal?.removeEventListener('abort', onAbort);
  }
}

function abortedError(call: HttpCall, reason: unknown): OAuthError {
  return new OAuthError('OAUTH_ABORTED', `the request to ${call.peer} was cancelled`, { cause: reason });
}

function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A duration for messages: `5 minutes`, `30 s`, `50 ms`. */
export function formatMs(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} minute${ms === 60_000 ? '' : 's'}`;
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
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
