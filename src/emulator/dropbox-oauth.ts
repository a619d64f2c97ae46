// Dropbox's OAuth 2 endpoints: the authorize page (GET shows it, POST records the user's decision) and the
// token endpoint. Wire behaviour and error bodies follow what is known of Dropbox's real endpoints; where
// that is unknown, the choice made here is marked as an assumption.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, Response, Router } from 'express';
import express from 'express';
import { bodyText, mediaType, queryParams, type EmulatorContext } from './context.js';
import { authorizePage, badRequestPage, codePage, deniedPage, sendHtml } from './pages.js';
import type { EmulatorApp, Grant, IssuedAccessToken, IssuedCode } from './types.js';

interface AuthorizeRequest {
  app: EmulatorApp;
  redirectUri: string | null;
  state: string | null;
  scopes: string[];
  tokenAccessType: 'offline' | 'online';
  codeChallenge: string | null;
}

interface PendingDecision extends AuthorizeRequest {
  expiresAt: number;
}

const MAX_STATE_BYTES = 500;
// How long the authorize page stays answerable; a real user session would bound it similarly.
const DECISION_LIFETIME_MS = 15 * 60 * 1000;
const PKCE_VALUE = /^[A-Za-z0-9\-._~]{43,128}$/;
const DENIED_DESCRIPTION = 'The user chose not to give your app access to their Dropbox account.';

export function dropboxOAuthRouter(ctx: EmulatorContext): Router {
  const router = express.Router();
  const pending = new Map<string, PendingDecision>();

  router.get('/oauth2/authorize', (req, res) => {
    const parsed = parseAuthorizeRequest(queryParams(req), ctx.options.apps);
    if (typeof parsed === 'string') {
      sendHtml(res, 400, badRequestPage(parsed));
      return;
    }
    if (ctx.options.autoApprove) {
      decide(ctx, parsed, true, res, ctx.state.account.accountId);
      return;
    }
    const now = ctx.options.now();
    for (const [key, p] of pending) if (p.expiresAt <= now) pending.delete(key);
    const nonce = ctx.gen.nonce();
    pending.set(nonce, { ...parsed, expiresAt: now + DECISION_LIFETIME_MS });
    res.setHeader('Cache-Control', 'no-store');
    const page = authorizePage({
      appName: parsed.app.name,
      folderName: parsed.app.folderName,
      scopes: parsed.scopes,
      nonce,
      email: ctx.state.account.email,
      accounts: ctx.state.accounts,
    });
    sendHtml(res, 200, page);
  });

  router.post('/oauth2/authorize', (req, res) => {
    const form = new URLSearchParams(mediaType(req) === 'application/x-www-form-urlencoded' ? bodyText(req) : '');
    const nonce = form.get('nonce') ?? '';
    const decision = form.get('decision');
    const request = pending.get(nonce);
    // The nonce ties the decision to the page that was shown: a decision posted for anything else, or
    // twice, is refused.
    if (!request || request.expiresAt <= ctx.options.now()) {
      pending.delete(nonce);
      sendHtml(res, 400, badRequestPage('This authorization request has expired or was already answered. Start again from the app.'));
      return;
    }
    if (decision !== 'allow' && decision !== 'deny') {
      sendHtml(res, 400, badRequestPage('Missing decision: choose Allow or Deny.'));
      return;
    }
    const chosen = form.get('account');
    const account = chosen === null ? ctx.state.account : ctx.state.accounts.find((a) => a.accountId === chosen);
    if (!account) {
      sendHtml(res, 400, badRequestPage('Unknown account.'));
      return;
    }
    pending.delete(nonce);
    decide(ctx, request, decision === 'allow', res, account.accountId);
  });

  router.post('/oauth2/token', (req, res) => {
    handleToken(ctx, req, res);
  });

  return router;
}

function parseAuthorizeRequest(q: URLSearchParams, apps: readonly EmulatorApp[]): AuthorizeRequest | string {
  const clientId = q.get('client_id') ?? '';
  const app = apps.find((a) => a.appKey === clientId);
  if (!app) return `Invalid client_id: "${clientId}"`;

  const redirectUri = q.get('redirect_uri');
  if (redirectUri !== null && !app.redirectUris.includes(redirectUri)) {
    return "Invalid redirect_uri. It must exactly match one of the redirect URIs you've pre-configured for your app (including the path).";
  }

  const responseType = q.get('response_type');
  if (responseType === null) return 'Missing "response_type" parameter.';
  // The legacy implicit grant (`token`) is deliberately not offered: syncauth never uses it.
  if (responseType !== 'code') return `Invalid response_type: "${responseType}". Expected "code".`;

  const accessType = q.get('token_access_type');
  let tokenAccessType: 'offline' | 'online';
  if (accessType === 'offline' || accessType === 'online') tokenAccessType = accessType;
  // Apps created since 2021 cannot have long-lived tokens, and for them an absent value means `online`
  // (dropbox-oauth.md §1.2): a short-lived token and no refresh token.
  else if (accessType === null) tokenAccessType = 'online';
  else if (accessType === 'legacy') return 'Invalid token_access_type: "legacy". This app does not allow long-lived access tokens.';
  else return `Invalid token_access_type: "${accessType}". Expected "offline", "online" or "legacy".`;

  const state = q.get('state');
  if (state !== null && Buffer.byteLength(state, 'utf8') > MAX_STATE_BYTES) {
    return `Invalid state: it may be up to ${MAX_STATE_BYTES} bytes long.`;
  }

  const challenge = q.get('code_challenge');
  const method = q.get('code_challenge_method');
  if (challenge !== null || method !== null) {
    if (challenge === null) return 'Missing "code_challenge" parameter.';
    // `plain` is unconfirmed for Dropbox and no SDK sends it; only S256 is taken.
    if (method !== 'S256') return `Invalid code_challenge_method: "${method ?? ''}". Expected "S256".`;
    if (!PKCE_VALUE.test(challenge)) return 'Invalid code_challenge: expected 43 to 128 characters of [A-Za-z0-9-._~].';
  }

  const scopeParam = q.get('scope');
  let scopes = [...app.scopes];
  if (scopeParam !== null) {
    const requested = scopeParam.split(/\s+/).filter(Boolean);
    const unknown = requested.filter((s) => !app.scopes.includes(s));
    if (unknown.length > 0) return `Invalid scope: ${unknown.map((s) => `"${s}"`).join(', ')} not enabled for this app.`;
    scopes = app.scopes.filter((s) => requested.includes(s));
  }

  return { app, redirectUri, state, scopes, tokenAccessType, codeChallenge: challenge };
}

function decide(ctx: EmulatorContext, request: AuthorizeRequest, allow: boolean, res: Response, accountId: string): void {
  res.setHeader('Cache-Control', 'no-store');
  if (!allow) {
    if (request.redirectUri === null) {
      sendHtml(res, 200, deniedPage(request.app.name));
      return;
    }
    const target = new URL(request.redirectUri);
    target.searchParams.append('error', 'access_denied');
    target.searchParams.append('error_description', DENIED_DESCRIPTION);
    if (request.state !== null) target.searchParams.append('state', request.state);
    res.redirect(302, target.toString());
    return;
  }
  const now = ctx.options.now();
  const issued: IssuedCode = {
    code: ctx.gen.authorizationCode(),
    appKey: request.app.appKey,
    redirectUri: request.redirectUri,
    scopes: request.scopes,
    tokenAccessType: request.tokenAccessType,
    codeChallenge: request.codeChallenge,
    accountId,
    issuedAt: now,
    expiresAt: now + ctx.options.codeLifetimeSeconds * 1000,
    used: false,
  };
  ctx.state.codes.set(issued.code, issued);
  if (request.redirectUri === null) {
    sendHtml(res, 200, codePage(request.app.name, issued.code));
    return;
  }
  const target = new URL(request.redirectUri);
  target.searchParams.append('code', issued.code);
  if (request.state !== null) target.searchParams.append('state', request.state);
  res.redirect(302, target.toString());
}

type Body = Record<string, string>;

function fail(res: Response, body: Body): void {
  res.status(400).json(body);
}

function missingField(res: Response, field: string): void {
  fail(res, { error: 'invalid_request', error_description: `missing required field "${field}"` });
}

const INVALID_CLIENT: Body = { error: 'invalid_client: Invalid client_id or client_secret' };
const NO_AUTH_FUNCTION: Body = { error_description: 'No auth function available for given request', error: 'invalid_request' };

function handleToken(ctx: EmulatorContext, req: Request, res: Response): void {
  res.setHeader('Cache-Control', 'no-store');
  // Dropbox takes the parameters in the form body or in the query string (the JS SDK sends them there).
  const params = queryParams(req);
  if (mediaType(req) === 'application/x-www-form-urlencoded') {
    for (const [k, v] of new URLSearchParams(bodyText(req))) if (!params.has(k)) params.append(k, v);
  }
  const get = (name: string): string | null => {
    const v = params.get(name);
    return v === null || v === '' ? null : v;
  };

  const basic = parseBasic(req.headers.authorization);
  if (basic === 'malformed') {
    fail(res, INVALID_CLIENT);
    return;
  }
  if (basic && (params.has('client_id') || params.has('client_secret'))) {
    // Dropbox takes one or the other, "not both" (golang/oauth2 internal/token.go); the exact body it
    // answers with is not documented, so this wording is an assumption.
    fail(res, {
      error: 'invalid_request',
      error_description: 'client credentials must be sent either with HTTP Basic auth or as client_id/client_secret parameters, not both',
    });
    return;
  }

  const grantType = get('grant_type');
  if (grantType === null) {
    missingField(res, 'grant_type');
    return;
  }
  if (grantType !== 'authorization_code' && grantType !== 'refresh_token') {
    // Only the error code is known (Java SDK DbxOAuthError); the description is an assumption.
    fail(res, { error: 'unsupported_grant_type', error_description: `grant_type "${grantType}" is not supported` });
    return;
  }

  const clientId = basic ? basic.id : get('client_id');
  const clientSecret = basic ? basic.secret : get('client_secret');
  if (clientId === null) {
    fail(res, NO_AUTH_FUNCTION);
    return;
  }
  const app = ctx.options.apps.find((a) => a.appKey === clientId);
  if (!app || (clientSecret !== null && !sameSecret(clientSecret, app.appSecret))) {
    fail(res, INVALID_CLIENT);
    return;
  }
  const confidential = clientSecret !== null;

  if (grantType === 'authorization_code') exchangeCode(ctx, res, app, confidential, get);
  else refreshAccessToken(ctx, res, app, confidential, get);
}

function exchangeCode(
  ctx: EmulatorContext,
  res: Response,
  app: EmulatorApp,
  confidential: boolean,
  get: (name: string) => string | null,
): void {
  const code = get('code');
  if (code === null) {
    missingField(res, 'code');
    return;
  }
  const now = ctx.options.now();
  const issued = ctx.state.codes.get(code);
  if (!issued || issued.used || issued.expiresAt <= now || issued.appKey !== app.appKey) {
    fail(res, { error: 'invalid_grant', error_description: "code doesn't exist or has expired" });
    return;
  }
  // Without a secret only a PKCE code can be exchanged: the verifier is then the proof.
  if (!confidential && issued.codeChallenge === null) {
    fail(res, NO_AUTH_FUNCTION);
    return;
  }
  if (get('redirect_uri') !== issued.redirectUri) {
    fail(res, { error_description: 'redirect_uri mismatch', error: 'invalid_grant' });
    return;
  }
  if (issued.codeChallenge !== null) {
    const verifier = get('code_verifier');
    if (verifier === null) {
      missingField(res, 'code_verifier');
      return;
    }
    // The exact body for a wrong verifier was not found; invalid_grant is what RFC 7636 §4.6 asks for.
    if (!PKCE_VALUE.test(verifier) || s256(verifier) !== issued.codeChallenge) {
      fail(res, { error: 'invalid_grant', error_description: 'invalid code verifier' });
      return;
    }
  }
  // Consumed only once every check passed, so a request refused for a fixable reason may be retried.
  issued.used = true;

  const grant: Grant = {
    id: ctx.gen.uuid(),
    appKey: app.appKey,
    accountId: issued.accountId,
    scopes: issued.scopes,
    refreshToken: issued.tokenAccessType === 'offline' ? ctx.gen.refreshToken() : null,
    publicClient: !confidential,
    createdAt: now,
    revokedAt: null,
  };
  ctx.state.grants.set(grant.id, grant);
  if (grant.refreshToken !== null) ctx.state.grantsByRefreshToken.set(grant.refreshToken, grant);
  const token = issueAccessToken(ctx, grant, grant.scopes);

  // Field order of Dropbox's documented example response.
  const body: Record<string, string | number> = {
    access_token: token.token,
    expires_in: ctx.options.tokenLifetimeSeconds,
    token_type: 'bearer',
    scope: grant.scopes.join(' '),
  };
  if (grant.refreshToken !== null) body.refresh_token = grant.refreshToken;
  const account = ctx.state.accounts.find((a) => a.accountId === grant.accountId) ?? ctx.state.account;
  body.account_id = account.accountId;
  body.uid = account.uid;
  res.json(body);
}

function refreshAccessToken(
  ctx: EmulatorContext,
  res: Response,
  app: EmulatorApp,
  confidential: boolean,
  get: (name: string) => string | null,
): void {
  const refreshToken = get('refresh_token');
  if (refreshToken === null) {
    missingField(res, 'refresh_token');
    return;
  }
  const grant = ctx.state.grantsByRefreshToken.get(refreshToken);
  if (grant) res.locals.grantId = grant.id;
  // A grant obtained with a secret must be renewed with it (dropbox-sdk-js#769); only a PKCE grant may
  // be renewed with the client_id alone.
  if (!confidential && !(grant?.publicClient && grant.appKey === app.appKey)) {
    fail(res, NO_AUTH_FUNCTION);
    return;
  }
  if (!grant || grant.revokedAt !== null || grant.appKey !== app.appKey) {
    fail(res, { error: 'invalid_grant', error_description: 'refresh token is invalid or revoked' });
    return;
  }
  let scopes = grant.scopes;
  const scopeParam = get('scope');
  if (scopeParam !== null) {
    const requested = scopeParam.split(/\s+/).filter(Boolean);
    const extra = requested.filter((s) => !grant.scopes.includes(s));
    if (extra.length > 0) {
      // The code is RFC 6749's; Dropbox's exact body here is not documented.
      fail(res, { error: 'invalid_scope', error_description: `scope must be a subset of the granted scopes; not granted: ${extra.join(' ')}` });
      return;
    }
    scopes = requested;
  }
  const token = issueAccessToken(ctx, grant, scopes);
  // No refresh_token: Dropbox does not rotate it. `scope` only when a subset was asked for
  // (Java DbxRefreshResult).
  const body: Record<string, string | number> = {
    access_token: token.token,
    token_type: 'bearer',
    expires_in: ctx.options.tokenLifetimeSeconds,
  };
  if (scopeParam !== null) body.scope = scopes.join(' ');
  res.json(body);
}

function issueAccessToken(ctx: EmulatorContext, grant: Grant, scopes: readonly string[]): IssuedAccessToken {
  const now = ctx.options.now();
  const token: IssuedAccessToken = {
    token: ctx.gen.accessToken(),
    grantId: grant.id,
    scopes,
    issuedAt: now,
    expiresAt: now + ctx.options.tokenLifetimeSeconds * 1000,
  };
  ctx.state.accessTokens.set(token.token, token);
  return token;
}

function parseBasic(header: string | undefined): { id: string; secret: string } | 'malformed' | null {
  if (!header) return null;
  const m = /^Basic\s+(\S*)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1] ?? '', 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return 'malformed';
  return { id: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}

function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}
