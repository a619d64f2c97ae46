// The one-shot callback server for the loopback flow. It listens on 127.0.0.1 only, on the fixed port of
// the registered redirect URI, and accepts exactly one callback: a GET on the exact path, from a browser
// that addressed it by the URI's own host (a DNS-rebinding page cannot), with this flow's state. Anything
// else gets an explanatory page and leaves the flow waiting.
import { parseUrl } from '../net/http.js';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Request, Response } from 'express';
import { ValidationError } from '../errors.js';
import { plainCommandLine, type CommandLine } from '../remedy.js';
import { parseAuthorizationResponse } from './authorize.js';
import { OAuthError, isOAuthError } from './errors.js';
import { formatMs } from './http.js';
import { renderPage, SUCCESS_PAGE } from './pages.js';
import type { Page } from './pages.js';

/** How long the server waits for the browser when the caller gives no timeout. */
export const DEFAULT_LOOPBACK_TIMEOUT_MS = 5 * 60 * 1000;

const BIND_HOST = '127.0.0.1';
const REDIRECT_HINT =
  'set SYNCAUTH_REDIRECT_URI to http://127.0.0.1:<PORT>/callback with a free port and register that exact URI ' +
  "on the app's Settings tab in the Dropbox App Console";

export interface LoopbackOptions {
  /** `http://127.0.0.1:PORT/PATH` or `http://localhost:PORT/PATH`, exactly as registered with Dropbox. */
  redirectUri: string;
  /** The `state` of the authorization request; callbacks without it are refused. */
  state: string;
  /** Default 300 000 (5 minutes). */
  timeoutMs?: number;
  /** Aborting rejects `result` and closes the server. */
  signal?: AbortSignal;
  /**
   * Keep the browser's callback request waiting after the code arrives, until `finish()` says how the code
   * exchange went: the success page then appears only for a grant in hand. Default false: the success page
   * is sent as soon as the code arrives.
   */
  holdPage?: boolean;
  /** How the page writes the command a hint names (`syncauth setup` unless told): as the person ran syncauth. */
  commandLine?: CommandLine;
}

/** How the flow ended after the code arrived, for the page the waiting browser gets. */
export type LoopbackOutcome = { ok: true } | { ok: false; message: string; hint?: string | undefined };

export interface LoopbackServer {
  /** The port listened on (the redirect URI's). */
  port: number;
  /**
   * The code of the one accepted callback. Rejects with an OAuthError: OAUTH_ACCESS_DENIED (Deny clicked),
   * another code for another `error` from Dropbox, OAUTH_TIMEOUT, or OAUTH_ABORTED (signal or close()).
   */
  result: Promise<{ code: string }>;
  /**
   * With `holdPage`: answers the waiting browser with the success page, or a failure page with the message and
   * the next step (which must hold no secret). Only the first call counts.
   */
  finish(outcome: LoopbackOutcome): void;
  /** Stops listening and drops open connections; safe to call more than once. Call it when done. */
  close(): Promise<void>;
}

interface CallbackTarget {
  port: number;
  /** What the browser must send as Host: the URI's host and port, as written in it. */
  host: string;
  pathname: string;
}

/**
 * Starts the callback server and resolves once it listens. A port already in use fails with
 * OAUTH_PORT_IN_USE. After the result settles the server keeps answering (with a "finished" page) until
 * `close()`, so a reload never meets a dead port; a timeout or an abort closes it at once.
 */
export async function startLoopbackServer(opts: LoopbackOptions): Promise<LoopbackServer> {
  const target = parseRedirectUri(opts.redirectUri);
  if (typeof opts.state !== 'string' || opts.state === '') {
    throw new ValidationError([{ field: 'state', message: 'must not be empty' }]);
  }
  const timeoutMs = opts.timeoutMs ?? DEFAULT_LOOPBACK_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new ValidationError([{ field: 'timeoutMs', message: 'must be a positive number of milliseconds' }]);
  }
  if (opts.signal?.aborted) throw abortedError(opts.signal.reason);

  let settled = false;
  let resolveResult!: (value: { code: string }) => void;
  let rejectResult!: (reason: OAuthError) => void;
  const result = new Promise<{ code: string }>((resolve, reject) => {
    resolveResult = resolve;
    rejectResult = reject;
  });
  // A rejection nobody awaits yet (the caller is still opening the browser) must not crash the process;
  // callers still see it through their own `await`.
  result.catch(() => undefined);

  // Loaded here, not with the module: only setup opens a loopback server, and the daemon imports this module too.
  const { default: express } = await import('express');
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use((req: Request, res: Response) => {
    handleRequest(req, res);
  });

  const server = createServer(app);
  await listen(server, target, opts.redirectUri);
  const address = server.address() as AddressInfo;

  const timer = setTimeout(() => {
    settle(
      new OAuthError('OAUTH_TIMEOUT', `no answer from the browser within ${formatMs(timeoutMs)}`, {
        hint: 'run the command again and finish on the Dropbox page in time, or paste the code instead (--no-browser)',
      }),
    );
    void close();
  }, timeoutMs);
  let closing: Promise<void> | undefined;
  // The browser's callback request, kept waiting until finish() (holdPage).
  let held: ((page: Page, status: number) => void) | undefined;

  const finish = (outcome: LoopbackOutcome): void => {
    const answer = held;
    held = undefined;
    if (!answer) return;
    if (outcome.ok) {
      answer(SUCCESS_PAGE, 200);
      return;
    }
    answer({
      title: 'syncauth could not finish the authorization',
      paragraphs: [
        `${capitalize(outcome.message)}.`,
        ...(outcome.hint ? [`Next: ${outcome.hint}.`] : []),
        'The terminal says the same. You can close this tab.',
      ],
      ok: false,
    }, 400);
  };

  const close = (): Promise<void> => {
    if (!settled) settle(abortedError(undefined, 'the callback server was closed before Dropbox answered'));
    // Never leave a browser waiting on a server that is going away.
    finish({ ok: false, message: 'syncauth stopped before it finished the authorization', hint: 'see the terminal' });
    closing ??= new Promise<void>((resolve) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      server.close(() => resolve());
      // The browser may hold a keep-alive connection open; waiting for it would stall close() for minutes.
      server.closeAllConnections();
    });
    return closing;
  };

  function settle(outcome: { code: string } | OAuthError): void {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    if (outcome instanceof OAuthError) rejectResult(outcome);
    else resolveResult(outcome);
  }

  function onAbort(): void {
    settle(abortedError(opts.signal?.reason));
    void close();
  }

  opts.signal?.addEventListener('abort', onAbort, { once: true });
  // An abort while the server was starting fired no listener.
  if (opts.signal?.aborted) onAbort();

  function handleRequest(req: Request, res: Response): void {
    res.set({
      'Cache-Control': 'no-store',
      // The callback URL carries the code: it must not leak through a Referer.
      'Referrer-Policy': 'no-referrer',
      'X-Content-Type-Options': 'nosniff',
      'X-Frame-Options': 'DENY',
      'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'",
      Connection: 'close',
    });
    const send = (status: number, page: Page): void => {
      res.status(status).type('html').send(renderPage(page));
    };

    if ((req.headers.host ?? '').toLowerCase() !== target.host) {
      send(421, {
        title: 'Wrong address',
        paragraphs: [`This server only answers requests addressed to ${target.host}.`],
        ok: false,
      });
      return;
    }
    // The raw request target, not Express's routing: matching must be exact (case, trailing slash).
    const raw = req.originalUrl;
    const q = raw.indexOf('?');
    const pathname = q === -1 ? raw : raw.slice(0, q);
    if (pathname !== target.pathname) {
      send(404, {
        title: 'Not found',
        paragraphs: [`Nothing here. syncauth waits for Dropbox at ${target.pathname}.`],
        ok: false,
      });
      return;
    }
    if (req.method !== 'GET') {
      res.set('Allow', 'GET');
      send(405, { title: 'Method not allowed', paragraphs: ['The callback only accepts GET.'], ok: false });
      return;
    }
    if (settled) {
      send(410, {
        title: 'Already finished',
        paragraphs: ['This authorization has already finished; nothing was changed. You can close this tab.'],
        ok: false,
      });
      return;
    }
    let code: string;
    try {
      ({ code } = parseAuthorizationResponse(new URLSearchParams(q === -1 ? '' : raw.slice(q + 1)), opts.state));
    } catch (err) {
      if (isOAuthError(err, 'OAUTH_STATE_MISMATCH') || isOAuthError(err, 'OAUTH_BAD_RESPONSE')) {
        send(400, {
          title: 'Invalid callback',
          paragraphs: [
            `${err.message}.`,
            'syncauth is still waiting: use the link from the newest authorization attempt.',
          ],
          ok: false,
        });
        return;
      }
      const failure = err as OAuthError;
      settle(failure);
      send(failure.code === 'OAUTH_ACCESS_DENIED' ? 403 : 400, {
        title: 'syncauth was not authorized',
        paragraphs: [`${capitalize(failure.message)}.`, ...(failure.hint ? [`Next: ${failure.hintFor(opts.commandLine ?? plainCommandLine)}.`] : [])],
        ok: false,
      });
      return;
    }
    settle({ code });
    if (opts.holdPage) {
      held = (page, status) => send(status, page);
      return;
    }
    send(200, SUCCESS_PAGE);
  }

  return { port: address.port, result, finish, close };
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function abortedError(reason: unknown, message = 'the authorization was cancelled'): OAuthError {
  return new OAuthError('OAUTH_ABORTED', message, { cause: reason });
}

/** The loopback redirect URI must name a loopback host literal and a fixed port: Dropbox matches it exactly. */
function parseRedirectUri(redirectUri: string): CallbackTarget {
  const issue = (message: string): ValidationError =>
    new ValidationError([{ field: 'redirectUri', message }], { hint: REDIRECT_HINT });
  const url = parseUrl(redirectUri, ['http:'], { credentials: 'allow' });
  if (url === 'not_a_url') throw issue('must be a URL like http://127.0.0.1:53682/callback');
  if (url === 'wrong_scheme' || typeof url === 'string') throw issue('must start with http:// (the loopback server does not speak TLS)');
  if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') {
    throw issue('must use the host 127.0.0.1 or localhost: the callback server only listens on this machine');
  }
  if (url.username || url.password || url.hash) throw issue('must not contain a user name, password or fragment');
  const port = url.port === '' ? 80 : Number(url.port);
  if (port === 0) throw issue('needs a fixed port: Dropbox only redirects to the exact URI registered');
  return { port, host: url.host, pathname: url.pathname };
}

async function listen(server: Server, target: CallbackTarget, redirectUri: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      reject(listenError(err, target, redirectUri));
    };
    server.once('error', onError);
    server.listen({ host: BIND_HOST, port: target.port }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function listenError(err: NodeJS.ErrnoException, target: CallbackTarget, redirectUri: string): OAuthError {
  if (err.code === 'EADDRINUSE') {
    return new OAuthError(
      'OAUTH_PORT_IN_USE',
      `port ${target.port} on ${BIND_HOST} is already in use, so syncauth cannot receive the Dropbox callback at ${redirectUri}`,
      { hint: `stop the program using port ${target.port}, or ${REDIRECT_HINT}`, cause: err },
    );
  }
  return new OAuthError(
    'OAUTH_LOOPBACK_FAILED',
    `cannot listen on ${BIND_HOST}:${target.port} for the Dropbox callback at ${redirectUri} (${err.code ?? err.message})`,
    {
      hint: err.code === 'EACCES' ? `ports below 1024 need privileges; ${REDIRECT_HINT}` : REDIRECT_HINT,
      cause: err,
    },
  );
}
