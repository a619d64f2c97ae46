// The first leg of the flow: the authorize URL the user opens, with a fresh CSRF state and PKCE pair, and
// the checks on what the browser brings back.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as Undici from 'undici';
import type { Dispatcher } from 'undici';
import { proxyDispatcher } from '../net/proxy.js';
import { ValidationError } from '../errors.js';
import { remedyHint } from '../remedy.js';
import { OAuthError, reauthorizeHint, scrub } from './errors.js';
import { checkCredential, endpointUrl } from './http.js';

/** Everything needed to finish the flow started by opening `url`; keep it in memory only. */
export interface AuthorizationRequest {
  /** The authorize page to open in the browser. */
  url: string;
  /** The CSRF value the callback must bring back. */
  state: string;
  /** The PKCE verifier to send with the code (a secret until the exchange is done). */
  codeVerifier: string;
  /** The redirect URI sent, which the exchange must repeat; absent in paste mode. */
  redirectUri?: string;
}

/**
 * Builds Dropbox's authorize URL for a code grant with a refresh token (`token_access_type=offline`), a
 * 256-bit random `state` and a PKCE S256 challenge. Without `redirectUri` Dropbox shows the code for the user
 * to paste (paste mode); with it, Dropbox redirects there, and the URI must be registered in the App Console
 * exactly (host literal, port, path).
 */
export function createAuthorizationRequest(opts: {
  authorizeUrl: string;
  appKey: string;
  /** Omitted: paste mode. */
  redirectUri?: string;
  /** Ask for a subset of the app's permissions; omitted: all the ticked ones. */
  scopes?: readonly string[];
}): AuthorizationRequest {
  const url = endpointUrl(opts.authorizeUrl, 'authorizeUrl');
  checkCredential(opts.appKey, 'appKey', { noColon: true });
  if (opts.redirectUri !== undefined) endpointUrl(opts.redirectUri, 'redirectUri');
  const state = randomBytes(32).toString('base64url');
  // 64 random bytes give 86 characters of [A-Za-z0-9-_], inside RFC 7636's 43..128 and its alphabet.
  const codeVerifier = randomBytes(64).toString('base64url');
  const params = url.searchParams;
  params.set('client_id', opts.appKey);
  params.set('response_type', 'code');
  params.set('token_access_type', 'offline');
  params.set('state', state);
  params.set('code_challenge', pkceChallenge(codeVerifier));
  params.set('code_challenge_method', 'S256');
  if (opts.redirectUri !== undefined) params.set('redirect_uri', opts.redirectUri);
  if (opts.scopes !== undefined && opts.scopes.length > 0) params.set('scope', opts.scopes.join(' '));
  return {
    url: url.toString(),
    state,
    codeVerifier,
    ...(opts.redirectUri !== undefined ? { redirectUri: opts.redirectUri } : {}),
  };
}

/** RFC 7636 S256: base64url(SHA-256(verifier)), no padding. */
export function pkceChallenge(codeVerifier: string): string {
  return createHash('sha256').update(codeVerifier, 'ascii').digest('base64url');
}

/**
 * Reads the query of the redirect back from Dropbox. Returns the code, or throws: `OAUTH_STATE_MISMATCH` when
 * `state` is missing or foreign (checked first, so that nobody else's request can end the flow),
 * `OAUTH_ACCESS_DENIED` when the user clicked Deny, another OAuthError for any other `error`, and
 * `OAUTH_BAD_RESPONSE` when there is neither a code nor an error.
 */
export function parseAuthorizationResponse(params: URLSearchParams, expectedState: string): { code: string } {
  if (!expectedState) throw new ValidationError([{ field: 'state', message: 'must not be empty' }]);
  const state = params.get('state');
  if (state === null || !sameString(state, expectedState)) {
    throw new OAuthError(
      'OAUTH_STATE_MISMATCH',
      state === null
        ? 'the callback carries no state, so it cannot be tied to this authorization'
        : 'the callback carries a different state: it belongs to another authorization attempt',
      { hint: 'start the authorization again and use the newest browser tab' },
    );
  }
  const error = params.get('error');
  if (error !== null) throw authorizationError(error, params.get('error_description') ?? undefined);
  const code = params.get('code');
  if (!code) {
    throw new OAuthError('OAUTH_BAD_RESPONSE', 'the callback carries neither a code nor an error', {
      hint: reauthorizeHint(),
    });
  }
  return { code };
}

function sameString(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The error Dropbox put on the redirect (RFC 6749 §4.1.2.1). */
function authorizationError(rawError: string, rawDescription: string | undefined): OAuthError {
  const error = scrub(rawError, []);
  const errorDescription = rawDescription === undefined ? undefined : scrub(rawDescription, []);
  const said = errorDescription ? ` (Dropbox said: ${errorDescription})` : '';
  const common = { error, errorDescription };
  switch (error) {
    case 'access_denied':
      return new OAuthError('OAUTH_ACCESS_DENIED', `authorization was refused: you clicked Deny on the Dropbox page${said}`, {
        ...common,
        hint: remedyHint({ action: 'reauthorize' }, (command) => `run \`${command}\` again and click Allow`),
      });
    case 'invalid_scope':
      return new OAuthError('OAUTH_INVALID_SCOPE', `Dropbox refused the requested permissions${said}`, {
        ...common,
        hint: "tick the permissions on the app's Permissions tab in the Dropbox App Console, then authorize again",
      });
    case 'unauthorized_client':
    case 'invalid_client':
      return new OAuthError('OAUTH_INVALID_CLIENT', `Dropbox refused the app${said}`, {
        ...common,
        hint: 'check the app key',
      });
    case 'invalid_request':
    case 'unsupported_response_type':
      return new OAuthError('OAUTH_INVALID_REQUEST', `Dropbox refused the authorization request${said}`, {
        ...common,
        hint: 'check the app key and the redirect URI registered in the App Console',
      });
    case 'server_error':
    case 'temporarily_unavailable':
      return new OAuthError('OAUTH_SERVER_ERROR', `Dropbox could not complete the authorization${said}`, {
        ...common,
        hint: 'try again in a few minutes',
      });
    default:
      return new OAuthError('OAUTH_PROVIDER_ERROR', `Dropbox ended the authorization with the error "${error}"${said}`, {
        ...common,
        hint: reauthorizeHint(),
      });
  }
}

/** What Dropbox's authorize page says about a request before anyone signs in. */
export type AuthorizePageVerdict =
  | { kind: 'accepted' }
  | { kind: 'unknown-app-key' }
  | { kind: 'unregistered-redirect-uri' }
  | { kind: 'unreachable'; reason: string };

/** Enough of the page to find the developer details; Dropbox's error page is a few kilobytes. */
const PAGE_LIMIT_BYTES = 512 * 1024;

/**
 * Asks the authorize page about `url` the way a browser that is not signed in would, without following a
 * redirect. Dropbox answers an unknown `client_id` or an unregistered `redirect_uri` at once with its "Error
 * (400)" page, whose developer details read `Invalid client_id: "…"` or `Invalid redirect_uri. …`
 * (dropbox-oauth.md §1.3); those two are recognised and anything else counts as accepted, so a page that
 * changed never stops anyone. A host that does not answer within `timeoutMs` is `unreachable`.
 */
export async function probeAuthorizePage(url: string, opts: { timeoutMs?: number; signal?: AbortSignal; dispatcher?: Dispatcher } = {}): Promise<AuthorizePageVerdict> {
  const target = new URL(url);
  const deadline = AbortSignal.timeout(opts.timeoutMs ?? 5_000);
  const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  let status: number;
  let text = '';
  try {
    // undici's global dispatcher is loaded only for a probe: the daemon imports this module and never probes.
    const dispatcher = opts.dispatcher ?? proxyDispatcher(target) ??
      (createRequire(import.meta.url)('undici') as typeof Undici).getGlobalDispatcher();
    const response = await dispatcher.request({
      origin: target.origin,
      path: `${target.pathname}${target.search}`,
      method: 'GET',
      headers: { accept: 'text/html' },
      signal,
    });
    status = response.statusCode;
    for await (const chunk of response.body) {
      text += (chunk as Buffer).toString('utf8');
      if (text.length > PAGE_LIMIT_BYTES) break;
    }
    response.body.destroy();
  } catch (err) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    const code = (err as { code?: string }).code;
    return { kind: 'unreachable', reason: deadline.aborted ? 'no answer in time' : code ?? (err as Error).message };
  }
  if (status !== 400) return { kind: 'accepted' };
  if (/Invalid client_id/i.test(text)) return { kind: 'unknown-app-key' };
  if (/Invalid redirect_uri/i.test(text)) return { kind: 'unregistered-redirect-uri' };
  return { kind: 'accepted' };
}
