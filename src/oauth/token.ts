// The token endpoint: trading the authorization code for tokens, and renewing the access token. Responses
// are validated with zod; failures are classified from the error bodies Dropbox is known to send, including
// its quirks (code and text together in `error`, an empty 429, a sentence as `error` on a 500).
import * as z from 'zod';
import { ValidationError } from '../errors.js';
import type { RemedyHint } from '../remedy.js';
import { OAuthError, reauthorizeHint, scrub } from './errors.js';
import type { OAuthErrorCode, OAuthErrorKind } from './errors.js';
import { checkCredential, endpointUrl, parseJsonObject, parseRetryAfter, post } from './http.js';
import type { HttpAnswer, TransportOptions } from './http.js';
import { checkAccessTokenShape, looksLikeAccessToken } from './scopes.js';

/** The Dropbox app, from the App Console's Settings tab. */
export interface AppCredentials {
  appKey: string;
  appSecret: string;
}

/** Where Dropbox lives; every one can point at a stand-in. */
export interface DropboxEndpoints {
  /** e.g. https://www.dropbox.com/oauth2/authorize */
  authorizeUrl: string;
  /** e.g. https://api.dropboxapi.com/oauth2/token */
  tokenUrl: string;
  /** The v2 API base, e.g. https://api.dropboxapi.com */
  apiUrl: string;
}

/** The outcome of a code exchange or a renewal. */
export interface TokenSet {
  accessToken: string;
  /** After a renewal: the old refresh token, unless Dropbox returned a new one. */
  refreshToken: string;
  /** Epoch milliseconds, counted from when the request was sent (so it errs early). */
  expiresAt: number;
  /** Seconds, as Dropbox said (14400 for its 4-hour tokens). */
  expiresIn: number;
  /** Granted permissions; empty when the response lists none, which renewals usually do not. */
  scopes: string[];
  accountId?: string;
  uid?: string;
  tokenType: string;
  /** Oddities worth telling the user that do not stop the flow (e.g. a token without the `sl.` prefix). */
  warnings: string[];
}

/** Options shared by the two token-endpoint calls. */
export interface TokenEndpointOptions extends TransportOptions {
  tokenUrl: string;
  app: AppCredentials;
  /** Clock in epoch milliseconds; default `Date.now`. */
  now?: () => number;
}

/** The longest access-token lifetime believed: a day. */
export const MAX_LIFETIME_S = 86_400;

const TokenResponse = z.object({
  access_token: z.string().min(1),
  token_type: z.string().min(1),
  // Dropbox's tokens live 4 hours. A lifetime past a day is no real answer, and an absurd one (1e300) would
  // only fail later, as an invalid date, after the token was taken.
  expires_in: z.number().positive().max(MAX_LIFETIME_S),
  refresh_token: z.string().min(1).optional(),
  scope: z.string().optional(),
  account_id: z.string().optional(),
  // Dropbox sends uid as a string; a number is accepted because nothing is lost by reading it.
  uid: z.union([z.string(), z.number()]).optional(),
});
type TokenResponse = z.infer<typeof TokenResponse>;

const FORM = 'application/x-www-form-urlencoded';
const PEER = "Dropbox's token endpoint";

/**
 * Trades an authorization code for an access token and a refresh token. The app authenticates with HTTP
 * Basic; `redirectUri` must be the one sent to the authorize page (omit it in paste mode), and
 * `codeVerifier` the PKCE verifier of that request. A code works once and only for a few minutes.
 */
export async function exchangeCode(
  opts: TokenEndpointOptions & { code: string; redirectUri?: string; codeVerifier?: string },
): Promise<TokenSet> {
  const url = endpointUrl(opts.tokenUrl, 'tokenUrl');
  checkApp(opts.app);
  const code = typeof opts.code === 'string' ? opts.code.trim() : '';
  if (code === '') throw new ValidationError([{ field: 'code', message: 'must not be empty' }]);
  if (looksLikeAccessToken(code)) {
    throw new ValidationError([
      {
        field: 'code',
        message: 'this is an access token (it starts with "sl."), not an authorization code: paste the code Dropbox shows after you click Allow',
      },
    ]);
  }
  const form = new URLSearchParams({ code, grant_type: 'authorization_code' });
  if (opts.redirectUri !== undefined) form.set('redirect_uri', opts.redirectUri);
  if (opts.codeVerifier !== undefined) form.set('code_verifier', opts.codeVerifier);
  const basic = Buffer.from(`${opts.app.appKey}:${opts.app.appSecret}`, 'utf8').toString('base64');
  // The app key too: a provider that echoes the request must not put it in a message; and the Basic form.
  const secrets = [opts.app.appKey, opts.app.appSecret, basic, code, opts.codeVerifier];
  const { answer, body, sentAt } = await tokenRequest(opts, url, 'authorization_code', form, secrets, { authorization: `Basic ${basic}` });
  if (body.refresh_token === undefined) {
    throw new OAuthError(
      'OAUTH_BAD_RESPONSE',
      "Dropbox's token response has no refresh_token; Dropbox only issues one when the authorize URL asks for token_access_type=offline",
      { status: answer.status, hint: 'authorize again with an authorize URL from createAuthorizationRequest', body: redactedBody(answer.text) },
    );
  }
  return toTokenSet(body, body.refresh_token, sentAt);
}

/**
 * Gets a fresh access token with the refresh token. The app authenticates with `client_id` and
 * `client_secret` in the form body and no Authorization header (Dropbox refuses both at once). Dropbox
 * usually returns no refresh token here: the old one stays valid and is returned; a new one is taken when
 * present.
 */
export async function renewAccessToken(opts: TokenEndpointOptions & { refreshToken: string }): Promise<TokenSet> {
  const url = endpointUrl(opts.tokenUrl, 'tokenUrl');
  checkApp(opts.app);
  checkCredential(opts.refreshToken, 'refreshToken');
  const form = new URLSearchParams({
    refresh_token: opts.refreshToken,
    grant_type: 'refresh_token',
    client_id: opts.app.appKey,
    client_secret: opts.app.appSecret,
  });
  const secrets = [opts.app.appKey, opts.app.appSecret, opts.refreshToken];
  const { body, sentAt } = await tokenRequest(opts, url, 'refresh_token', form, secrets);
  return toTokenSet(body, body.refresh_token ?? opts.refreshToken, sentAt);
}

/**
 * One POST to the token endpoint, both grants alike: the form, the time it was sent (the token's lifetime
 * counts from then), an error made of any answer but a 2xx, and the answer's body checked.
 */
async function tokenRequest(
  opts: TokenEndpointOptions,
  url: URL,
  grant: Grant,
  form: URLSearchParams,
  secrets: (string | undefined)[],
  headers: Record<string, string> = {},
): Promise<{ answer: HttpAnswer; body: TokenResponse; sentAt: number }> {
  const now = opts.now ?? Date.now;
  const sentAt = now();
  const answer = await post({
    url,
    headers: { ...headers, 'content-type': FORM, accept: 'application/json' },
    body: form.toString(),
    peer: PEER,
    dispatcher: opts.dispatcher,
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
  });
  if (answer.status < 200 || answer.status > 299) throw tokenEndpointError(answer, grant, secrets, now());
  return { answer, body: parseTokenResponse(answer), sentAt };
}

function checkApp(app: AppCredentials): void {
  if (app === null || typeof app !== 'object') throw new ValidationError([{ field: 'app', message: 'is required' }]);
  checkCredential(app.appKey, 'appKey', { noColon: true });
  checkCredential(app.appSecret, 'appSecret');
}

function parseTokenResponse(answer: HttpAnswer): TokenResponse {
  const json = parseJsonObject(answer.text);
  if (json === undefined) {
    throw new OAuthError('OAUTH_BAD_RESPONSE', `${PEER} answered ${answer.status} with a body that is not a JSON object`, {
      status: answer.status,
      hint: 'check that the token URL points at Dropbox (https://api.dropboxapi.com/oauth2/token)',
      body: redactedBody(answer.text),
    });
  }
  const parsed = TokenResponse.safeParse(json);
  if (!parsed.success) {
    // Only field names go into the message: the values may be tokens.
    const fields = [...new Set(parsed.error.issues.map((i) => i.path.join('.') || '(body)'))].join(', ');
    throw new OAuthError('OAUTH_BAD_RESPONSE', `${PEER} sent a token response with missing or invalid fields: ${fields}`, {
      status: answer.status,
      hint: 'check that the token URL points at Dropbox (https://api.dropboxapi.com/oauth2/token)',
      body: redactedBody(answer.text),
    });
  }
  if (parsed.data.token_type.toLowerCase() !== 'bearer') {
    throw new OAuthError('OAUTH_BAD_RESPONSE', `${PEER} issued a token of type "${scrub(parsed.data.token_type, [])}", not a bearer token`, {
      status: answer.status,
      body: redactedBody(answer.text),
    });
  }
  return parsed.data;
}

function toTokenSet(body: TokenResponse, refreshToken: string, sentAt: number): TokenSet {
  const warning = checkAccessTokenShape(body.access_token);
  return {
    accessToken: body.access_token,
    refreshToken,
    expiresAt: sentAt + Math.round(body.expires_in * 1000),
    expiresIn: body.expires_in,
    scopes: body.scope === undefined ? [] : body.scope.split(/\s+/).filter(Boolean),
    ...(body.account_id !== undefined ? { accountId: body.account_id } : {}),
    ...(body.uid !== undefined ? { uid: String(body.uid) } : {}),
    tokenType: body.token_type,
    warnings: warning === undefined ? [] : [warning],
  };
}

const TOKEN_FIELDS = ['access_token', 'refresh_token', 'id_token'];

/** A successful body that failed validation still holds live tokens: keep it for debugging without them. */
function redactedBody(text: string): unknown {
  const json = parseJsonObject(text);
  if (json === undefined) return text;
  const copy: Record<string, unknown> = { ...json };
  for (const field of TOKEN_FIELDS) if (field in copy) copy[field] = '[redacted]';
  return copy;
}

/**
 * Reads an RFC 6749 error body. Dropbox once put code and text together in `error`
 * (`"invalid_client: Invalid client_id or client_secret"`), so a `code: text` value is split; an `error`
 * that is a sentence (Dropbox's 500 body) is a description, not a code.
 */
function parseOAuthErrorBody(text: string): { error?: string; errorDescription?: string } {
  const json = parseJsonObject(text);
  let error: string | undefined;
  let description: string | undefined;
  if (json !== undefined) {
    error = typeof json.error === 'string' ? json.error : undefined;
    description = typeof json.error_description === 'string' ? json.error_description : undefined;
  } else {
    // Some clients and proxies render the same pair as plain text.
    error = text.trim() || undefined;
  }
  if (error !== undefined) {
    const combined = /^([a-z_]+)\s*:\s*([\s\S]*)$/.exec(error);
    if (combined) {
      error = combined[1];
      description ??= combined[2] || undefined;
    } else if (!/^[a-z_]+$/.test(error)) {
      description ??= json !== undefined ? error : undefined;
      error = undefined;
    }
  }
  return {
    ...(error !== undefined ? { error } : {}),
    ...(description !== undefined ? { errorDescription: description } : {}),
  };
}

type Grant = 'authorization_code' | 'refresh_token';

function tokenEndpointError(answer: HttpAnswer, grant: Grant, secrets: (string | undefined)[], now: number): OAuthError {
  const parsed = parseOAuthErrorBody(answer.text);
  const error = parsed.error === undefined ? undefined : scrub(parsed.error, secrets);
  const errorDescription = parsed.errorDescription === undefined ? undefined : scrub(parsed.errorDescription, secrets);
  const status = answer.status;
  const detail = error ? ` (${error}${errorDescription ? `: ${errorDescription}` : ''})` : errorDescription ? ` (${errorDescription})` : '';
  const base = { error, errorDescription, status, body: answer.text };
  const make = (
    code: OAuthErrorCode,
    message: string,
    hint: string | RemedyHint,
    extra: { retryAfterMs?: number; kind?: OAuthErrorKind } = {},
  ): OAuthError => new OAuthError(code, message, { ...base, ...extra, hint });

  if (status === 429) {
    const retryAfterMs = parseRetryAfter(answer.headers['retry-after'], now);
    const when = retryAfterMs === undefined ? 'later' : `in ${Math.ceil(retryAfterMs / 1000)} s`;
    return make('OAUTH_RATE_LIMITED', `${PEER} is limiting requests (HTTP 429)${detail}`, `try again ${when}`, { retryAfterMs });
  }
  if (status >= 500) {
    return make('OAUTH_SERVER_ERROR', `${PEER} failed (HTTP ${status})${detail}`, 'Dropbox had a problem; try again in a few minutes', {
      retryAfterMs: parseRetryAfter(answer.headers['retry-after'], now),
    });
  }
  switch (error) {
    case 'invalid_grant':
      if (grant === 'refresh_token') {
        return make(
          'OAUTH_INVALID_GRANT',
          `Dropbox no longer accepts the refresh token${detail}: the app was disconnected from the account, the token was revoked, or it was never a refresh token`,
          reauthorizeHint(),
        );
      }
      return make(
        'OAUTH_INVALID_GRANT',
        `Dropbox refused the authorization code${detail}`,
        /redirect_uri/i.test(errorDescription ?? '')
          ? reauthorizeHint('the redirect URI sent with the code must equal the one on the authorize URL; ')
          : reauthorizeHint('a code works once and only for a few minutes; '),
      );
    case 'invalid_client':
    case 'unauthorized_client':
      return make('OAUTH_INVALID_CLIENT', `Dropbox refused the app credentials${detail}`, 'check the app key and app secret (App Console, Settings tab)');
    case 'invalid_request':
    case 'unsupported_grant_type':
      return make('OAUTH_INVALID_REQUEST', `Dropbox refused the token request${detail}`, 'check the app key and app secret (App Console, Settings tab)');
    case 'invalid_scope':
      return make('OAUTH_INVALID_SCOPE', `Dropbox refused the requested permissions${detail}`, "check the app's Permissions tab in the App Console");
    case 'server_error':
    case 'temporarily_unavailable':
      return make('OAUTH_SERVER_ERROR', `${PEER} failed (HTTP ${status})${detail}`, 'Dropbox had a problem; try again in a few minutes');
    case undefined:
      return make(
        'OAUTH_HTTP_ERROR',
        `${PEER} answered HTTP ${status}${detail}`,
        'check that the token URL points at Dropbox (https://api.dropboxapi.com/oauth2/token)',
        // Without an OAuth error body the usual cause is a URL that is not a token endpoint at all.
        { kind: 'configuration' },
      );
    default:
      return make('OAUTH_PROVIDER_ERROR', `${PEER} refused the request${detail}`, 'check the app key and app secret (App Console, Settings tab)');
  }
}
