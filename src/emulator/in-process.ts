// The emulator's Dropbox v2 API and service answered within the caller's process: an undici-shaped dispatcher
// (the seam the Dropbox API calls and the service client of syncauth take, see net/post.ts and service/http.ts)
// that hands `/2/...` and `/api/v1/...` calls to the same routes the HTTP server runs, with no socket between,
// and logs them in `state.requests` as the server does. Everything else (the token endpoint, the pages), and any
// call while a fault rule names its route, goes over HTTP to the emulator itself, so faults and their timing
// stay the server's. A long simulated run checks each token every few minutes and reconciles each renewal for
// weeks: over loopback HTTP those calls cost a third of its time.
import type { Request, Response, Router } from 'express';
import { DirectPool } from '../net/direct.js';
import type { EmulatorContext } from './context.js';
import { dropboxApiRouter } from './dropbox-api.js';
import { routeOf } from './faults.js';
import { serviceRouter } from './service.js';

/** What net/post.ts asks of a dispatcher. */
export interface InProcessRequest {
  origin: string | URL;
  path: string;
  method: string;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

export interface InProcessResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: { text(): Promise<string> } & AsyncIterable<Buffer>;
}

export interface InProcessDispatcher {
  request(request: InProcessRequest): Promise<InProcessResponse>;
  close(): Promise<void>;
}

// The limits net/post.ts gives its own direct pools.
const FORWARD_LIMITS = { connectMs: 10_000, headersMs: 300_000, bodyMs: 300_000 };

function bodyOf(text: string): InProcessResponse['body'] {
  return {
    text: async () => text,
    async *[Symbol.asyncIterator]() {
      yield Buffer.from(text, 'utf8');
    },
  };
}

/**
 * A dispatcher for calls to the emulator at `url`: API and service routes in-process (unless `faulted(route)`),
 * the rest forwarded over HTTP.
 */
export function inProcessDispatcher(ctx: EmulatorContext, url: string, faulted: (route: string) => boolean): InProcessDispatcher {
  const api: Router = dropboxApiRouter(ctx);
  const service: Router = serviceRouter(ctx);
  const forward = new DirectPool(url, FORWARD_LIMITS);
  const own = new URL(url).origin;
  return {
    async request(request) {
      const pathname = request.path.split('?')[0] ?? '';
      const route = routeOf(pathname);
      const router = pathname.startsWith('/2/') ? api : pathname.startsWith('/api/v1/') ? service : undefined;
      if (!router || new URL(request.origin).origin !== own || faulted(route)) {
        const answer = await forward.request({
          method: request.method,
          path: request.path,
          headers: request.headers ?? {},
          ...(request.body !== undefined ? { body: request.body } : {}),
          ...(request.signal ? { signal: request.signal } : {}),
        });
        return { statusCode: answer.statusCode, headers: answer.headers, body: bodyOf(answer.text) };
      }
      if (request.signal?.aborted) throw Object.assign(new Error('the request was aborted'), { name: 'AbortError', code: 'UND_ERR_ABORTED' });
      const at = ctx.options.now();
      const answer = await answerInProcess(router, request, pathname);
      ctx.state.requests.push({ route, method: request.method.toUpperCase(), path: pathname, status: answer.statusCode, at, bytes: Buffer.byteLength(answer.text) });
      return { statusCode: answer.statusCode, headers: answer.headers, body: bodyOf(answer.text) };
    },
    close: () => forward.close(),
  };
}

/** Runs `router` on a request and response that hold what its routes read and write. */
function answerInProcess(router: Router, request: InProcessRequest, pathname: string): Promise<{ statusCode: number; headers: Record<string, string>; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host: new URL(request.origin).host };
    for (const [name, value] of Object.entries(request.headers ?? {})) headers[name.toLowerCase()] = value;
    const req = {
      method: request.method.toUpperCase(),
      url: request.path,
      originalUrl: request.path,
      path: pathname,
      protocol: 'http',
      get: (name: string) => headers[name.toLowerCase()],
      headers,
      // As express.raw leaves it: the body's bytes.
      body: Buffer.from(request.body ?? '', 'utf8'),
    };
    const out: Record<string, string> = {};
    const res = {
      statusCode: 200,
      locals: {},
      status(code: number) {
        res.statusCode = code;
        return res;
      },
      setHeader(name: string, value: string) {
        out[name.toLowerCase()] = value;
        return res;
      },
      getHeader(name: string) {
        return out[name.toLowerCase()];
      },
      type(type: string) {
        out['content-type'] = type.includes('/') ? type : `application/${type}`;
        return res;
      },
      redirect(status: number, location: string) {
        out.location = location;
        res.statusCode = status;
        out['content-type'] = 'text/plain';
        return res.send(`Temporary Redirect. Redirecting to ${location}`);
      },
      json(value: unknown) {
        out['content-type'] ??= 'application/json';
        return res.send(JSON.stringify(value));
      },
      send(body: string | Buffer) {
        const text = Buffer.isBuffer(body) ? body.toString('utf8') : body;
        // express adds the charset to a textual type it sends.
        const type = out['content-type'];
        if (type && !/;\s*charset=/i.test(type) && (type.startsWith('text/') || type === 'application/json')) out['content-type'] = `${type}; charset=utf-8`;
        out['content-length'] = String(Buffer.byteLength(text));
        resolve({ statusCode: res.statusCode, headers: out, text });
        return res;
      },
    };
    router(req as unknown as Request, res as unknown as Response, (error?: unknown) => {
      if (error) reject(error instanceof Error ? error : new Error(String(error)));
      // No API route matched: the server's 404.
      else res.status(404).json({ detail: 'Not Found' });
    });
  });
}
