import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import {
  OAuthError,
  createAuthorizationRequest,
  parseAuthorizationResponse,
  pkceChallenge,
} from '../../src/oauth/index.js';

const AUTHORIZE_URL = 'https://www.dropbox.com/oauth2/authorize';
const REDIRECT = 'http://127.0.0.1:53682/callback';

describe('createAuthorizationRequest', () => {
  it('builds the authorize URL with exactly the code-grant, offline and PKCE parameters', () => {
    const req = createAuthorizationRequest({ authorizeUrl: AUTHORIZE_URL, appKey: 'myappkey', redirectUri: REDIRECT });
    const url = new URL(req.url);
    expect(`${url.origin}${url.pathname}`).toBe(AUTHORIZE_URL);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      client_id: 'myappkey',
      response_type: 'code',
      token_access_type: 'offline',
      state: req.state,
      code_challenge: pkceChallenge(req.codeVerifier),
      code_challenge_method: 'S256',
      redirect_uri: REDIRECT,
    });
    expect(req.redirectUri).toBe(REDIRECT);
  });

  it('leaves redirect_uri out in paste mode', () => {
    const req = createAuthorizationRequest({ authorizeUrl: AUTHORIZE_URL, appKey: 'myappkey' });
    expect(new URL(req.url).searchParams.has('redirect_uri')).toBe(false);
    expect('redirectUri' in req).toBe(false);
  });

  it('uses a fresh base64url state of at least 128 bits every time', () => {
    const states = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const { state } = createAuthorizationRequest({ authorizeUrl: AUTHORIZE_URL, appKey: 'k' });
      expect(state).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(Buffer.from(state, 'base64url').length * 8).toBeGreaterThanOrEqual(128);
      states.add(state);
    }
    expect(states.size).toBe(50);
  });

  it('makes an RFC 7636 verifier and challenge = base64url(sha256(verifier))', () => {
    const req = createAuthorizationRequest({ authorizeUrl: AUTHORIZE_URL, appKey: 'k' });
    expect(req.codeVerifier).toMatch(/^[A-Za-z0-9\-._~]{43,128}$/);
    const expected = createHash('sha256').update(req.codeVerifier).digest('base64url');
    expect(new URL(req.url).searchParams.get('code_challenge')).toBe(expected);
    expect(expected).not.toContain('=');
    // RFC 7636 appendix B test vector.
    expect(pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
  });

  it('sends requested scopes space-separated and keeps a query already on the authorize URL', () => {
    const req = createAuthorizationRequest({
      authorizeUrl: `${AUTHORIZE_URL}?locale=de`,
      appKey: 'k',
      scopes: ['files.content.read', 'files.metadata.read'],
    });
    const params = new URL(req.url).searchParams;
    expect(params.get('scope')).toBe('files.content.read files.metadata.read');
    expect(params.get('locale')).toBe('de');
    expect(req.url).toContain('scope=files.content.read+files.metadata.read');
  });

  it('refuses options that cannot work', () => {
    expect(() => createAuthorizationRequest({ authorizeUrl: 'nope', appKey: 'k' })).toThrow(ValidationError);
    expect(() => createAuthorizationRequest({ authorizeUrl: AUTHORIZE_URL, appKey: '' })).toThrow(ValidationError);
    expect(() => createAuthorizationRequest({ authorizeUrl: AUTHORIZE_URL, appKey: 'k', redirectUri: 'x' })).toThrow(ValidationError);
  });
});

describe('parseAuthorizationResponse', () => {
  const catchError = (fn: () => unknown): OAuthError => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(OAuthError);
      return err as OAuthError;
    }
    throw new Error('expected a throw');
  };

  it('returns the code when the state matches', () => {
    expect(parseAuthorizationResponse(new URLSearchParams('code=abc&state=S1'), 'S1')).toEqual({ code: 'abc' });
  });

  it('checks the state before anything else', () => {
    expect(catchError(() => parseAuthorizationResponse(new URLSearchParams('code=abc'), 'S1')).code).toBe('OAUTH_STATE_MISMATCH');
    expect(catchError(() => parseAuthorizationResponse(new URLSearchParams('code=abc&state=S2'), 'S1')).code).toBe('OAUTH_STATE_MISMATCH');
    // A foreign request cannot end the flow with an error either.
    expect(catchError(() => parseAuthorizationResponse(new URLSearchParams('error=access_denied&state=S2'), 'S1')).code).toBe(
      'OAUTH_STATE_MISMATCH',
    );
  });

  it('reports Deny as OAUTH_ACCESS_DENIED', () => {
    const err = catchError(() =>
      parseAuthorizationResponse(
        new URLSearchParams({
          error: 'access_denied',
          error_description: 'The user chose not to give your app access to their Dropbox account.',
          state: 'S1',
        }),
        'S1',
      ),
    );
    expect(err.code).toBe('OAUTH_ACCESS_DENIED');
    expect(err.kind).toBe('denied');
    expect(err.exitCode).toBe(1);
    expect(err.message).toContain('you clicked Deny');
    expect(err.errorDescription).toBe('The user chose not to give your app access to their Dropbox account.');
  });

  it.each([
    ['invalid_scope', 'OAUTH_INVALID_SCOPE', 'configuration'],
    ['unauthorized_client', 'OAUTH_INVALID_CLIENT', 'configuration'],
    ['invalid_request', 'OAUTH_INVALID_REQUEST', 'configuration'],
    ['temporarily_unavailable', 'OAUTH_SERVER_ERROR', 'transient'],
    ['brand_new_error', 'OAUTH_PROVIDER_ERROR', 'protocol'],
  ])('maps error=%s to %s', (error, code, kind) => {
    const err = catchError(() => parseAuthorizationResponse(new URLSearchParams({ error, state: 'S1' }), 'S1'));
    expect(err.code).toBe(code);
    expect(err.kind).toBe(kind);
    expect(err.error).toBe(error);
  });

  it('refuses a callback with neither code nor error', () => {
    expect(catchError(() => parseAuthorizationResponse(new URLSearchParams('state=S1'), 'S1')).code).toBe('OAUTH_BAD_RESPONSE');
  });
});
