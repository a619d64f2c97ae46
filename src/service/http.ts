// The transport under the service client: one connection pool, the fixed headers, timeouts, JSON in and out.
// It sends exactly one request per call; retry policy lives in client.ts, which knows the operation. The pool
// is the caller's undici dispatcher or the proxy's when there is one, else a pool on Node's own http
// (net/direct.ts), which spares every command the cost of loading undici.
import { HTTP_SCHEMES, parseUrl } from '../net/http.js';
import { createRequire } from 'node:module';
import type { IncomingHttpHeaders } from 'node:http';
import { DirectPool } from '../net/direct.js';
import { proxyDispatcher } from '../net/proxy.js';
import type { Dispatcher } from 'undici';
import { ValidationError } from '../errors.js';
import type { FieldIssue } from '../errors.js';
import { ServiceError } from './errors.js';

// package.json sits two levels above both src/service/ and dist/service/, so this works from either.
const packageJson = createRequire(import.meta.url)('../../package.json') as { version: string };
export const DEFAULT_USER_AGENT = `syncauth/${packageJson.version}`;
export const DEFAULT_API_KEY_HEADER = 'service-api-key';
/**
 * connect, headers and body are idle limits; `totalMs` bounds the whole exchange, so a server that trickles one
 * byte at a time still ends within it.
 */
export const DEFAULT_TIMEOUTS = { connectMs: 10_000, headersMs: 30_000, bodyMs: 30_000, totalMs: 60_000 } as const;

/** Cause codes of exchanges we ended ourselves: past the overall deadline, or cancelled by the client's owner. */
export const DEADLINE_CODE = 'SYNCAUTH_DEADLINE';
export const CANCELLED_CODE = 'SYNCAUTH_CANCELLED';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface ServiceEndpoint {
  /** scheme://host[:port], the key of the keep-alive pool. */
  origin: string;
  /** Any path the service is mounted under (a reverse proxy prefix), without a trailing slash. */
  basePath: string;
}

/**
 * The docs publish the API root as `https://platform.unstructuredapp.io/api/v1` and users paste it, while every
 * path we send already starts with `/api/v1/`; the official Python SDK strips it for the same reason. A
 * trailing slash is stripped so that joining never produces `//`. Any other prefix is kept: the service may sit
 * behind a proxy under a path of its own.
 */
export function resolveServiceEndpoint(baseUrl: string): ServiceEndpoint {
  const issue = (message: string): ValidationError => new ValidationError([{ field: 'baseUrl', message }]);
  const url = parseUrl(baseUrl, HTTP_SCHEMES);
  // Credentials in the URL would travel in logs and error messages; the API key has its own header.
  if (url === 'has_credentials') throw issue('must not contain a user name or password');
  if (typeof url === 'string') throw issue('must be an http(s) URL, like https://platform.example.com');
  if (url.search || url.hash) throw issue('must not contain a query or a fragment');
  let basePath = url.pathname.replace(/\/+$/, '');
  if (basePath.endsWith('/api/v1')) basePath = basePath.slice(0, -'/api/v1'.length).replace(/\/+$/, '');
  return { origin: url.origin, basePath };
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Visible ASCII only: a key with a line break or control character would corrupt the request.
const HEADER_VALUE = /^[\x21-\x7e]+$/;

export function checkCredentials(apiKey: unknown, apiKeyHeader: string): void {
  const issues: FieldIssue[] = [];
  if (typeof apiKey !== 'string' || apiKey === '') {
    issues.push({ field: 'apiKey', message: 'must not be empty' });
  } else if (!HEADER_VALUE.test(apiKey)) {
    // The value itself is never echoed: it is the secret.
    issues.push({ field: 'apiKey', message: 'contains spaces or characters not allowed in an HTTP header' });
  }
  if (!HEADER_NAME.test(apiKeyHeader)) {
    issues.push({ field: 'apiKeyHeader', message: `"${apiKeyHeader}" is not a valid HTTP header name` });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

export interface TransportOptions {
  endpoint: ServiceEndpoint;
  apiKey: string;
  apiKeyHeader: string;
  userAgent: string;
  timeouts: { connectMs: number; headersMs: number; bodyMs: number; totalMs: number };
  dispatcher: Dispatcher | undefined;
}

export interface HttpRequest {
  method: HttpMethod;
  /** From `/api/v1/…`; the base path is prepended here. */
  path: string;
  query?: Record<string, string>;
  /** Serialised as JSON when present; `undefined` means no body at all. */
  body?: unknown;
}

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The parsed body, or `undefined` when it was empty, not JSON, or streamed. */
  json: unknown;
  /** Whether the body went to the caller's consumer as it arrived (`text` and `json` are then empty). */
  streamed?: boolean;
}

export class Transport {
  readonly endpoint: ServiceEndpoint;
  readonly #dispatcher: Dispatcher | DirectPool;
  /** Only a pool this transport created is closed by it; a dispatcher passed in belongs to the caller. */
  readonly #ownsDispatcher: boolean;
  readonly #headers: Record<string, string>;
  readonly #timeouts: TransportOptions['timeouts'];
  /** Aborted by cancel(): every exchange in flight ends at once, and later ones fail before sending. */
  readonly #cancel = new AbortController();
  #closed = false;

  constructor(options: TransportOptions) {
    this.endpoint = options.endpoint;
    this.#timeouts = options.timeouts;
    // A proxy from the environment is shared by the process; only a pool made here is this transport's to close.
    const proxy = options.dispatcher === undefined ? proxyDispatcher(options.endpoint.origin) : undefined;
    this.#ownsDispatcher = options.dispatcher === undefined && proxy === undefined;
    this.#dispatcher =
      options.dispatcher ??
      proxy ??
      new DirectPool(options.endpoint.origin, options.timeouts);
    this.#headers = {
      [options.apiKeyHeader.toLowerCase()]: options.apiKey,
      accept: 'application/json',
      'user-agent': options.userAgent,
    };
  }

  /** The path as sent, query included, for messages and for call records. */
  target(request: HttpRequest): string {
    const query = request.query && Object.keys(request.query).length > 0
      ? `?${new URLSearchParams(request.query).toString()}`
      : '';
    return `${this.endpoint.basePath}${request.path}${query}`;
  }

  /**
   * One exchange. Throws ServiceError('SERVICE_NETWORK') when no complete response arrived in time. With
   * `onBody`, a 2xx answer's body goes to the consumer it returns as it arrives, and `text` and `json` stay
   * empty; other answers are read whole, as without it.
   */
  async send(request: HttpRequest, onBody?: () => (chunk: Buffer) => void): Promise<HttpResponse> {
    if (this.#closed) throw new Error('ServiceClient.close() was called; create a new client to send requests');
    const path = this.target(request);
    const hasBody = request.body !== undefined;
    const headers = hasBody ? { ...this.#headers, 'content-type': 'application/json' } : { ...this.#headers };
    const ended = new AbortController();
    const deadline = setTimeout(() => ended.abort(ownError(DEADLINE_CODE, 'the overall deadline passed')), this.#timeouts.totalMs);
    const onCancel = (): void => ended.abort(ownError(CANCELLED_CODE, 'the request was cancelled'));
    if (this.#cancel.signal.aborted) onCancel();
    else this.#cancel.signal.addEventListener('abort', onCancel, { once: true });
    let status: number;
    let responseHeaders: IncomingHttpHeaders;
    let text: string;
    let streamed = false;
    const consumerFor = (statusCode: number): ((chunk: Buffer) => void) | undefined => {
      if (!onBody || statusCode < 200 || statusCode >= 300) return undefined;
      streamed = true;
      return onBody();
    };
    try {
      if (ended.signal.aborted) throw ended.signal.reason;
      const exchange = {
        method: request.method,
        headers,
        ...(hasBody ? { body: JSON.stringify(request.body) } : {}),
        signal: ended.signal,
      };
      if (this.#dispatcher instanceof DirectPool) {
        const response = await this.#dispatcher.request({ ...exchange, path, ...(onBody ? { onBody: consumerFor } : {}) });
        status = response.statusCode;
        responseHeaders = response.headers;
        text = response.text;
      } else {
        const response = await this.#dispatcher.request({
          ...exchange,
          origin: this.endpoint.origin,
          path,
          headersTimeout: this.#timeouts.headersMs,
          bodyTimeout: this.#timeouts.bodyMs,
        });
        status = response.statusCode;
        responseHeaders = response.headers;
        const consume = consumerFor(status);
        if (consume) {
          for await (const chunk of response.body) consume(chunk as Buffer);
          text = '';
        } else {
          text = await response.body.text();
        }
      }
    } catch (err) {
      // undici and node:http report an abort as their own AbortError; the reason says which of ours it was.
      throw networkError(ended.signal.aborted ? ended.signal.reason : err, request.method, path, this.endpoint.origin, this.#timeouts);
    } finally {
      clearTimeout(deadline);
      this.#cancel.signal.removeEventListener('abort', onCancel);
    }
    return { status, headers: responseHeaders, text, json: streamed ? undefined : parseJson(text), streamed };
  }

  /** Ends every exchange in flight and refuses new ones: the owner gave up on this client (a deadline, a stop). */
  cancel(): void {
    this.#cancel.abort();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }
}

function ownError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The error code of a network failure, whether undici raised it or wrapped Node's. */
export function networkErrorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Failures that happen before a request leaves this machine: the service cannot have acted on it, so even a
 * create may be sent again. ENOTFOUND is left out on purpose: a misspelt host does not heal with retries.
 */
const BEFORE_SENDING = new Set([
  'ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'EAI_AGAIN', 'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/** Failures after the request may have reached the service: the outcome is unknown. */
const OUTCOME_UNKNOWN = new Set([
  'ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT',
  DEADLINE_CODE,
]);

export type NetworkFailureKind = 'before-sending' | 'outcome-unknown' | 'permanent';

export function networkFailureKind(err: ServiceError): NetworkFailureKind | undefined {
  if (err.code !== 'SERVICE_NETWORK') return undefined;
  const code = networkErrorCode(err.cause);
  if (code !== undefined && BEFORE_SENDING.has(code)) return 'before-sending';
  if (code !== undefined && OUTCOME_UNKNOWN.has(code)) return 'outcome-unknown';
  return 'permanent';
}

function networkError(
  err: unknown,
  method: HttpMethod,
  path: string,
  origin: string,
  timeouts: TransportOptions['timeouts'],
): ServiceError {
  const code = networkErrorCode(err);
  const seconds = (ms: number): string => `${ms / 1000} s`;
  let what: string;
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      what = `could not connect to ${origin} within ${seconds(timeouts.connectMs)}`;
      break;
    case 'UND_ERR_HEADERS_TIMEOUT':
      what = `${origin} did not start answering within ${seconds(timeouts.headersMs)}`;
      break;
    case 'UND_ERR_BODY_TIMEOUT':
      what = `${origin} stopped sending its answer for ${seconds(timeouts.bodyMs)}`;
      break;
    case DEADLINE_CODE:
      what = `${origin} did not finish answering within ${seconds(timeouts.totalMs)}`;
      break;
    case CANCELLED_CODE:
      what = 'cancelled before an answer arrived';
      break;
    case 'ECONNREFUSED':
      what = `${origin} refused the connection`;
      break;
    case 'ENOTFOUND':
      what = `the host of ${origin} was not found`;
      break;
    default:
      what = `the connection to ${origin} failed (${code ?? (err instanceof Error ? err.message : String(err))})`;
  }
  return new ServiceError('SERVICE_NETWORK', `${method} ${path}: ${what}`, {
    method,
    path,
    cause: err,
    hint: 'check SYNCAUTH_BASE_URL and the network; the service may also be down',
  });
}

export { parseRetryAfter } from '../net/http.js';
