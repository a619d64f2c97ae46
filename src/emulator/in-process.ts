// The emulator's Dropbox v2 API answered within the caller's process: an undici-shaped dispatcher (the seam every
// Dropbox call of syncauth takes, see net/post.ts) that hands `/2/...` calls to the same routes the HTTP server
// runs, with no socket between, and logs them in `state.requests` as the server does. Everything else (the token
// endpoint, the service, the pages), and any API call while a fault rule names its route, goes over HTTP to the
// emulator itself, so faults and their timing stay the server's. A long simulated run checks each token every
// few minutes for weeks: over loopback HTTP those checks cost a quarter of its time.
import type { Request, Response, Router } from 'express';
import { DirectPool } from '../net/direct.js';
import type { EmulatorContext } from './context.js';
import { dropboxApiRouter } from './dropbox-api.js';
import { routeOf } from './faults.js';

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
  body: { text(): Promise<string> };
}

export interface InProcessDispatcher {
  request(request: InProcessRequest): Promise<InProcessResponse>;
  close(): Promise<void>;
}

// The limits net/post.ts gives its own direct pools.
const FORWARD_LIMITS = { connectMs: 10_000, headersMs: 300_000, bodyMs: 300_000 };

/**
 * A dispatcher for calls to the emulator at `url`: API routes in-process (unless `faulted(route)`), the rest
 * forwarded over HTTP.
 */
export function inProcessDispatcher(ctx: EmulatorContext, url: string, faulted: (route: string) => boolean): InProcessDispatcher {
  const api: Router = dropboxApiRouter(ctx);
  const forward = new DirectPool(url, FORWARD_LIMITS);
  const own = new URL(url).origin;
  return {
    async request(request) {
      const pathname = request.path.split('?')[0] ?? '';
      const route = routeOf(pathname);
      const inProcess = new URL(request.origin).origin === own && pathname.startsWith('/2/') && !faulted(route);
      if (!inProcess) {
        const answer = await forward.request({
          method: request.method,
          path: request.path,
          headers: request.headers ?? {},
          ...(request.body !== undefined ? { body: request.body } : {}),
          ...(request.signal ? { signal: request.signal } : {}),
        });
        return { statusCode: answer.statusCode, headers: answer.headers, body: { text: async () => answer.text } };
      }
      if (request.signal?.aborted) throw Object.assign(new Error('the request was aborted'), { name: 'AbortError', code: 'UND_ERR_ABORTED' });
      const at = ctx.options.now();
      const answer = await answerInProcess(api, request, pathname);
      ctx.state.requests.push({ route, method: request.method, path: pathname, status: answer.statusCode, at, bytes: Buffer.byteLength(answer.text) });
      return { statusCode: answer.statusCode, headers: answer.headers, body: { text: async () => answer.text } };
    },
    close: () => forward.close(),
  };
}

/** Runs `router` on a request and response that hold what its routes read and write. */
function answerInProcess(router: Router, request: InProcessRequest, pathname: string): Promise<{ statusCode: number; headers: Record<string, string>; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers ?? {})) headers[name.toLowerCase()] = value;
    const req = {
      method: request.method.toUpperCase(),
      url: request.path,
      originalUrl: request.path,
      path: pathname,
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
