// A keep-alive connection pool to one origin on Node's own http/https, for calls that go direct (no proxy, no
// dispatcher of the caller's). It stands in for undici's Pool where undici is not needed: loading the undici
// package costs a command more start-up time than the rest of it, and the daemon several MiB of memory.
//
// It keeps undici's limits and their error codes, so callers classify failures the same either way:
// - connect: the TCP (and TLS) handshake of a new connection, UND_ERR_CONNECT_TIMEOUT;
// - headers: from the request written to the response's headers, UND_ERR_HEADERS_TIMEOUT;
// - body: the longest silence while the body arrives, UND_ERR_BODY_TIMEOUT.
// The overall deadline stays the caller's (through `signal`).
import type * as Http from 'node:http';
import type { Agent, ClientRequest, IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

export interface DirectTimeouts {
  connectMs: number;
  headersMs: number;
  bodyMs: number;
}

export interface DirectRequest {
  method: string;
  /** Path and query. */
  path: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /**
   * Asked once the status is known: a consumer it returns takes the body chunk by chunk as it arrives, and
   * `text` is then empty (a long answer read as it comes is never held whole).
   */
  onBody?: (statusCode: number) => ((chunk: Buffer) => void) | undefined;
}

export interface DirectResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  text: string;
}

// undici's keepAliveTimeout default: an idle connection is closed by us before a server tires of it.
const IDLE_MS = 4_000;

type HttpModule = typeof Http;

export class DirectPool {
  readonly #origin: URL;
  readonly #timeouts: DirectTimeouts;
  #module: Promise<{ http: HttpModule; agent: Agent }> | undefined;
  #closed = false;

  constructor(origin: string, timeouts: DirectTimeouts) {
    this.#origin = new URL(origin);
    this.#timeouts = timeouts;
  }

  /** node:https only for an https origin: loading TLS costs a plain-http call nothing. */
  #load(): Promise<{ http: HttpModule; agent: Agent }> {
    this.#module ??= (this.#origin.protocol === 'https:' ? import('node:https') : import('node:http')).then((http) => ({
      http: http as HttpModule,
      agent: new http.Agent({ keepAlive: true, timeout: IDLE_MS }),
    }));
    return this.#module;
  }

  /** One exchange; resolves with any status, rejects when no complete response arrived. */
  async request(request: DirectRequest): Promise<DirectResponse> {
    if (this.#closed) throw Object.assign(new Error('the pool is closed'), { code: 'UND_ERR_DESTROYED' });
    const { http, agent } = await this.#load();
    request.signal?.throwIfAborted();
    const headers: Record<string, string | number> = { ...request.headers };
    if (request.body !== undefined) headers['content-length'] = Buffer.byteLength(request.body);
    return new Promise<DirectResponse>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let settled = false;
      const arm = (ms: number, code: string, message: string, target: () => ClientRequest | IncomingMessage): void => {
        clearTimeout(timer);
        timer = setTimeout(() => target().destroy(Object.assign(new Error(message), { code })), ms);
      };
      const fail = (err: Error): void => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        reject(err);
      };
      const req = http.request({
        agent,
        protocol: this.#origin.protocol,
        hostname: this.#origin.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: this.#origin.port || undefined,
        method: request.method,
        path: request.path,
        headers,
        ...(request.signal ? { signal: request.signal } : {}),
      });
      req.on('error', fail);
      // The headers limit runs from the request written over an established connection.
      let connected = false;
      let written = false;
      const awaitHeaders = (): void => {
        if (connected && written) arm(this.#timeouts.headersMs, 'UND_ERR_HEADERS_TIMEOUT', 'Headers Timeout Error', () => req);
      };
      req.on('socket', (socket: Socket) => {
        if (!socket.connecting) {
          connected = true;
          awaitHeaders();
          return;
        }
        arm(this.#timeouts.connectMs, 'UND_ERR_CONNECT_TIMEOUT', 'Connect Timeout Error', () => req);
        socket.once(this.#origin.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
          clearTimeout(timer);
          connected = true;
          awaitHeaders();
        });
      });
      req.on('finish', () => {
        written = true;
        awaitHeaders();
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        const consume = request.onBody?.(res.statusCode ?? 0);
        const idle = (): void => arm(this.#timeouts.bodyMs, 'UND_ERR_BODY_TIMEOUT', 'Body Timeout Error', () => res);
        idle();
        res.on('data', (chunk: Buffer) => {
          if (consume) consume(chunk);
          else chunks.push(chunk);
          idle();
        });
        res.on('error', fail);
        res.on('end', () => {
          clearTimeout(timer);
          if (settled) return;
          settled = true;
          resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, text: consume ? '' : Buffer.concat(chunks).toString('utf8') });
        });
        // Closed before its end without an error of its own (the request was destroyed under it).
        res.on('close', () => {
          if (!res.complete) fail(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }));
        });
      });
      req.end(request.body);
    });
  }

  /** Closes every connection, idle or not; later requests fail. */
  async close(): Promise<void> {
    this.#closed = true;
    const loaded = this.#module;
    this.#module = undefined;
    if (loaded) (await loaded).agent.destroy();
  }
}
