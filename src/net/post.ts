// One HTTP POST (to Dropbox, the service's webhooks, a notice receiver): through the caller's undici dispatcher or
// the proxy's, else a keep-alive pool on Node's own http per origin (direct.ts), an overall deadline, and
// failures before a complete answer turned into a PostFailure that says which (timeout, network, aborted) in
// words that name the peer. Status handling, and the caller's own error family, are the caller's.
import type { Dispatcher } from 'undici';
import { DirectPool } from './direct.js';
import { proxyDispatcher } from './proxy.js';

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

export interface PostCall {
  url: URL;
  headers: Record<string, string>;
  body?: string;
  /** Who is asked, for messages: "Dropbox's token endpoint". */
  peer: string;
  /** undici dispatcher (an Agent, a Pool, a MockAgent); else the proxy the environment names, else a direct pool. */
  dispatcher?: Dispatcher;
  /** Deadline for the whole exchange in milliseconds; default 30 000. */
  timeoutMs?: number;
  /** Stops the exchange; it then fails as `aborted`. */
  signal?: AbortSignal;
}

export interface PostAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Why no complete answer arrived: the deadline passed, the network failed, or the caller's signal stopped it. */
export type PostFailureReason = 'timeout' | 'network' | 'aborted';

/** A POST that got no complete answer; `message` names the peer, `hint` what to do, `cause` what failed below. */
export class PostFailure extends Error {
  readonly reason: PostFailureReason;
  readonly hint: string | undefined;

  constructor(reason: PostFailureReason, message: string, options: { hint?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'PostFailure';
    this.reason = reason;
    this.hint = options.hint;
  }
}

/** One POST; resolves with any status, rejects (with a PostFailure) only when no complete answer arrived. */
export async function post(call: PostCall): Promise<PostAnswer> {
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
      throw new PostFailure('timeout', `${call.peer} (${call.url.origin}) did not answer within ${formatMs(timeoutMs)}`, {
        hint: 'check the network connection and try again',
        cause: err,
      });
    }
    if (call.signal?.aborted) throw abortedError(call, call.signal.reason);
    const code = errorCode(err);
    throw new PostFailure('network', `could not reach ${call.peer} at ${call.url.origin}${code ? ` (${code})` : ''}`, {
      hint: 'check the network connection and the endpoint URL, then try again',
      cause: err,
    });
  } finally {
    clearTimeout(timer);
    call.signal?.removeEventListener('abort', onAbort);
  }
}

function abortedError(call: PostCall, reason: unknown): PostFailure {
  return new PostFailure('aborted', `the request to ${call.peer} was cancelled`, { cause: reason });
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

