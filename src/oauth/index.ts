// Dropbox OAuth 2 as a pure protocol: every endpoint is an option, nothing is read from the environment or
// printed, and every failure is an OAuthError (or a ValidationError for options that cannot work).
export { OAuthError, OAUTH_ERROR_KINDS, isOAuthError, REAUTHORIZE_HINT } from './errors.js';
export type { OAuthErrorCode, OAuthErrorKind, OAuthErrorOptions } from './errors.js';
export { DEFAULT_TIMEOUT_MS } from './http.js';
export type { TransportOptions } from './http.js';
export { createAuthorizationRequest, parseAuthorizationResponse, pkceChallenge, probeAuthorizePage } from './authorize.js';
export type { AuthorizationRequest, AuthorizePageVerdict } from './authorize.js';
export { exchangeCode, renewAccessToken } from './token.js';
export type { AppCredentials, DropboxEndpoints, TokenEndpointOptions, TokenSet } from './token.js';
export { revokeToken, getCurrentAccount, listFolder } from './api.js';
export type { ApiCallOptions, DropboxAccount, FolderEntry } from './api.js';
export {
  SCOPES_FOR_ACCESS,
  checkAccessTokenShape,
  checkGrantedScopes,
  looksLikeAccessToken,
  permissionsHint,
} from './scopes.js';
export type { FolderAccess } from './scopes.js';
export { DEFAULT_LOOPBACK_TIMEOUT_MS, startLoopbackServer } from './loopback.js';
export type { LoopbackOptions, LoopbackOutcome, LoopbackServer } from './loopback.js';
