// The library surface of syncauth for Node users:
// - the typed client of the ingestion service, its models and the per-type config validation the CLI uses;
// - the Dropbox OAuth steps (authorize URL, code exchange, renewal, revocation);
// - `getAccessToken`, a profile's fresh token as `syncauth token` gets it (cached, single-flight, safe across
//   processes), and `startDaemon`, the sidecar in-process;
// - the errors, each with a stable `code` and a `kind` saying what to do next (ERROR_KIND_OUTCOMES gives the
//   exit code and the daemon's decision of each kind).
// The daemon is loaded only when started: importing the client costs neither prom-client nor the sweep.
import type { DaemonOptions, RunningDaemon } from './daemon/types.js';

export * from './service/index.js';
export { ERROR_KIND_OUTCOMES, ExitCode, SyncauthError, ValidationError } from './errors.js';
export type { ErrorKind, FailureKind, FieldIssue, SyncauthErrorOptions } from './errors.js';
export type { CommandLine, Remedy, RemedyHint } from './remedy.js';

export {
  OAuthError,
  OAUTH_ERROR_KINDS,
  isOAuthError,
  createAuthorizationRequest,
  parseAuthorizationResponse,
  exchangeCode,
  renewAccessToken,
  revokeToken,
  getCurrentAccount,
} from './oauth/index.js';
export type {
  OAuthErrorCode,
  OAuthErrorKind,
  AuthorizationRequest,
  AppCredentials,
  DropboxEndpoints,
  TokenEndpointOptions,
  TokenSet,
  ApiCallOptions,
  DropboxAccount,
} from './oauth/index.js';

export { getAccessToken } from './library/access-token.js';
// A library's own GrantStore refuses what it cannot keep with this error, which the daemon takes to mean "held in
// memory only", as it does for the env store; any other failure to keep a rotated refresh token fails the renewal.
export { GrantStoreReadOnlyError, isGrantStoreReadOnly } from './sync/grant-store.js';
export { openProfileStore } from './library/profile-store.js';
// The profiles `syncauth setup` stored, for `startDaemon`: each kept where it lives, as `syncauth daemon` keeps it.
export { storedProfiles } from './library/stored-profiles.js';
export type { StoredProfiles, StoredProfilesOptions } from './library/stored-profiles.js';
export type { ProfileStore } from './profile/index.js';
export type { AccessToken, GetAccessTokenOptions } from './library/access-token.js';

export type {
  DaemonOptions,
  RunningDaemon,
  DaemonProfile,
  DaemonGrant,
  DaemonStatus,
  GrantStore,
  ProfileStatus,
  ReconcileTarget,
  SweepOptions,
  SweepReport,
} from './daemon/types.js';
export type { Coordinator, Lease, SharedReconcile } from './daemon/coordinator.js';

/** The sidecar in this process: renews, reconciles and publishes the given profiles until `close()`. */
export async function startDaemon(options: DaemonOptions): Promise<RunningDaemon> {
  const daemon = await import('./daemon/index.js');
  return daemon.startDaemon(options);
}
