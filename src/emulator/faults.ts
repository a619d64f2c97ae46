// Fault injection: each rule may delay, fail, or both, the requests of one route, for a share of them and
// for the next N only. Rules are checked in order before the route's own handling; latencies add up and
// the first rule with a status answers.
import type { NextFunction, Request, Response } from 'express';
import { STATUS_CODES } from 'node:http';
import { errorPage, sendHtml } from './pages.js';
import type { EmulatorRoute, FaultRoute, FaultRule } from './types.js';

interface ArmedRule extends FaultRule {
  remaining: number;
}

const FAULT_ROUTES: ReadonlySet<string> = new Set<FaultRoute>([
  'authorize', 'token', 'revoke', 'account', 'list_folder', 'sources', 'workflows', 'destinations', 'jobs', '*',
]);

export function routeOf(path: string): EmulatorRoute {
  if (path === '/oauth2/authorize') return 'authorize';
  if (path === '/oauth2/token') return 'token';
  if (path === '/2/auth/token/revoke') return 'revoke';
  if (path === '/2/users/get_current_account') return 'account';
  if (path === '/2/files/list_folder') return 'list_folder';
  if (path === '/api/v1/sources' || path.startsWith('/api/v1/sources/')) return 'sources';
  if (path === '/api/v1/workflows' || path.startsWith('/api/v1/workflows/')) return 'workflows';
  if (path === '/api/v1/destinations' || path.startsWith('/api/v1/destinations/')) return 'destinations';
  if (path === '/api/v1/jobs' || path.startsWith('/api/v1/jobs/')) return 'jobs';
  return 'other';
}

export class FaultInjector {
  private rules: ArmedRule[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(rules: FaultRule[], private readonly roll: () => number) {
    this.set(rules);
  }

  set(rules: FaultRule[]): void {
    for (const rule of rules) {
      if (!FAULT_ROUTES.has(rule.route)) throw new Error(`emulator: unknown fault route ${String(rule.route)}`);
      if (rule.errorRate !== undefined && !(rule.errorRate >= 0 && rule.errorRate <= 1)) {
        throw new Error(`emulator: fault errorRate must be within 0..1, got ${rule.errorRate}`);
      }
      if (rule.trickleMs !== undefined && !(Number.isFinite(rule.trickleMs) && rule.trickleMs >= 0)) {
        throw new Error(`emulator: fault trickleMs must be 0 or more milliseconds, got ${rule.trickleMs}`);
      }
      if (rule.status !== undefined && !(Number.isInteger(rule.status) && rule.status >= 400 && rule.status <= 599)) {
        throw new Error(`emulator: fault status must be an HTTP error status, got ${rule.status}`);
      }
    }
    this.rules = rules.map((r) => ({ ...r, remaining: r.times ?? Infinity }));
  }

  /** Whether a rule still armed names `route` (or every route). */
  names(route: string): boolean {
    return this.rules.some((rule) => rule.remaining > 0 && (rule.route === '*' || rule.route === route));
  }

  /** Stops pending delays so that closing the server does not wait for them. */
  cancelPending(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  middleware() {
    return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
      const route = routeOf(req.path);
      let latency = 0;
      let trickle = 0;
      let failing: ArmedRule | undefined;
      for (const rule of this.rules) {
        if (rule.route !== '*' && rule.route !== route) continue;
        if (rule.remaining <= 0) continue;
        // `times` counts matching requests, whether or not the roll made this one fail.
        rule.remaining--;
        if (this.roll() >= (rule.errorRate ?? 1)) continue;
        latency += rule.latencyMs ?? 0;
        trickle = Math.max(trickle, rule.trickleMs ?? 0);
        if (rule.status !== undefined && !failing) failing = rule;
      }
      if (latency > 0) await this.sleep(latency);
      if (trickle > 0) this.trickle(res, trickle);
      if (!failing?.status) {
        next();
        return;
      }
      sendFault(route, failing.status, failing.retryAfterSeconds, res);
    };
  }

  /**
   * Holds the body `res` is given, then sends the status and headers at once and the body in small slices
   * over `ms`: the client sees a response that started and is slow to finish.
   */
  private trickle(res: Response, ms: number): void {
    const chunks: Buffer[] = [];
    const keep = (chunk: unknown, encoding?: unknown): void => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8'));
    };
    const write = res.write.bind(res) as (chunk: Buffer) => boolean;
    const end = res.end.bind(res) as () => Response;
    res.write = ((chunk: unknown, encoding?: unknown) => {
      keep(chunk, encoding);
      return true;
    }) as Response['write'];
    res.end = ((chunk?: unknown, encoding?: unknown) => {
      keep(chunk, encoding);
      const body = Buffer.concat(chunks);
      res.flushHeaders();
      const slice = Math.max(1, Math.ceil(body.length / Math.ceil(ms / 20)));
      const steps = Math.max(1, Math.ceil(body.length / slice));
      let sent = 0;
      const next = (): void => {
        if (res.destroyed) return;
        if (sent >= body.length) {
          end();
          return;
        }
        write(body.subarray(sent, sent + slice));
        sent += slice;
        const t = setTimeout(() => {
          this.timers.delete(t);
          next();
        }, ms / steps);
        this.timers.add(t);
      };
      next();
      return res;
    }) as Response['end'];
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }
}

function sendFault(route: EmulatorRoute, status: number, retryAfterSeconds: number | undefined, res: Response): void {
  const retryAfter = retryAfterSeconds ?? (status === 429 ? 1 : undefined);
  if (retryAfter !== undefined) res.setHeader('Retry-After', String(retryAfter));
  const reason = STATUS_CODES[status] ?? 'Error';
  res.status(status);
  switch (route) {
    case 'token':
      // Dropbox's token endpoint was seen answering 429 with an empty body (dropbox-sdk-js#1130) and 500
      // with this JSON (snarfed/oauth-dropins#729).
      if (status === 429) res.end();
      else res.json({ error: 'The server has either erred or is incapable of performing the requested operation.' });
      return;
    case 'revoke':
    case 'account':
    case 'list_folder':
      if (status === 429) {
        res.json({
          error_summary: 'too_many_requests/.',
          error: { reason: { '.tag': 'too_many_requests' }, retry_after: retryAfter },
        });
      } else {
        res.type('text/plain').send(reason);
      }
      return;
    case 'authorize':
      sendHtml(res, status, errorPage(status, reason));
      return;
    default:
      // Starlette answers an unhandled exception with a plain-text 500; anything else raised on purpose
      // is FastAPI's `{"detail": ...}`.
      if (status === 500) res.type('text/plain').send('Internal Server Error');
      else res.json({ detail: reason });
  }
}
