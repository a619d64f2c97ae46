// What the service's connection check and its jobs find when they use a connector. For a dropbox connector the
// emulator's own Dropbox side decides: the connector works when its access token is one Dropbox still honours,
// or when its refresh token, app key and app secret make a grant Dropbox would renew (the service renews expired
// tokens itself with all three), the grant may list and read files, and its folder exists in the app folder. Other types reach no real system here
// and always pass.
import { dropboxApiPath } from '../service/source-configs.js';
import type { EmulatorContext } from './context.js';
import { isoTime } from './context.js';
import type { StoredCheck, StoredJob, StoredSource, WorkspaceState } from './types.js';

const READ_SCOPES = ['files.metadata.read', 'files.content.read'];

/** Why the connector cannot read its data, in the words the service reports, or null when it can. */
export function connectionProblem(ctx: EmulatorContext, source: StoredSource): string | null {
  if (source.type !== 'dropbox') return null;
  const config = source.config;
  const text = (field: string): string => (typeof config[field] === 'string' ? (config[field] as string) : '');
  const now = ctx.options.now();
  let appKey: string | undefined;
  let scopes: readonly string[] = [];
  let tokenProblem: string | null = null;
  const refreshToken = text('refresh_token');
  if (refreshToken && text('app_key') && text('app_secret')) {
    const grant = ctx.state.grantsByRefreshToken.get(refreshToken);
    const app = ctx.options.apps.find((a) => a.appKey === text('app_key'));
    if (!app || app.appSecret !== text('app_secret')) tokenProblem = 'Dropbox refused the app key or app secret (invalid_client)';
    else if (!grant || grant.appKey !== app.appKey || grant.revokedAt !== null) tokenProblem = 'Dropbox refused the refresh token: invalid_grant (refresh token is invalid or revoked)';
    else {
      appKey = app.appKey;
      scopes = grant.scopes;
    }
  } else {
    const token = ctx.state.accessTokens.get(text('token'));
    const grant = token && ctx.state.grants.get(token.grantId);
    if (!token || !grant || grant.revokedAt !== null) tokenProblem = 'Dropbox refused the access token: invalid_access_token';
    else if (token.expiresAt <= now) tokenProblem = 'Dropbox refused the access token: expired_access_token';
    else {
      appKey = grant.appKey;
      scopes = token.scopes;
    }
  }
  if (tokenProblem) return `failed to connect to Dropbox: ${tokenProblem}`;
  // The service lists the folder, then downloads what it finds.
  const missing = READ_SCOPES.filter((scope) => !scopes.includes(scope));
  if (missing.length > 0) return `failed to connect to Dropbox: missing_scope: the grant lacks ${missing.join(', ')}`;
  const app = ctx.options.apps.find((a) => a.appKey === appKey);
  const folder = dropboxApiPath(text('remote_url'));
  if (app?.folders && !Object.hasOwn(app.folders, folder)) {
    return `failed to connect to Dropbox: path/not_found: ${folder} does not exist in the app folder`;
  }
  return null;
}

/** Reports a check whose time has come, judging the connector as it is at that moment. */
export function settleCheck(ctx: EmulatorContext, ws: WorkspaceState, check: StoredCheck): void {
  if (check.status !== 'SCHEDULED' || ctx.options.now() < check.dueAt) return;
  const source = ws.sources.get(check.sourceId);
  const problem = source ? connectionProblem(ctx, source) : 'the source connector no longer exists';
  check.status = problem ? 'FAILURE' : 'SUCCESS';
  check.reason = problem;
  check.reported_at = isoTime(Math.max(check.dueAt, Date.parse(check.created_at)));
}

/** Moves a job along: SCHEDULED, IN_PROGRESS, then COMPLETED (or FAILED when its source cannot be read). */
export function settleJob(ctx: EmulatorContext, ws: WorkspaceState, job: StoredJob): void {
  if (job.status !== 'SCHEDULED' && job.status !== 'IN_PROGRESS') return;
  const elapsed = ctx.options.now() - job.startedAt;
  const step = ctx.options.jobStepMs;
  if (elapsed < step) return;
  if (elapsed < 2 * step) {
    job.status = 'IN_PROGRESS';
    return;
  }
  const workflow = ws.workflows.get(job.workflow_id);
  const sourceId = workflow?.sources[0];
  const source = sourceId === undefined ? undefined : ws.sources.get(sourceId);
  let failure: string | null;
  if (!workflow) failure = 'the workflow no longer exists';
  else if (!source) failure = 'the workflow has no source connector';
  else if ((workflow.destinations[0] ?? '') === '' || !ws.destinations.has(workflow.destinations[0] as string)) failure = 'the workflow has no destination connector';
  else failure = connectionProblem(ctx, source);
  job.status = failure ? 'FAILED' : 'COMPLETED';
  job.failure = failure;
  job.runtime = isoDuration(2 * step);
}

/** An ISO 8601 duration in whole seconds (`PT1S`), as the document's `duration` format reads it. */
export function isoDuration(ms: number): string {
  return `PT${Math.max(0, Math.round(ms / 1000))}S`;
}
