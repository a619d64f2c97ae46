// What a run of setup will change, said before the browser opens: on an existing profile, the settings and
// secrets that differ from what it holds; on the service, a connector of the configured name that is not
// provably this profile's. Both are decided before anything is written.
import { ExitCode, SyncauthError, ValidationError } from '../../errors.js';
import type { ProfileState } from '../../profile/index.js';
import type { SourceConnectorInformation } from '../../service/models.js';
import { notOurs } from '../../sync/reconcile.js';
import type { StoredSecrets } from '../../credentials/index.js';
import type { Gathered } from './commit.js';

/** A setting or secret that setup will change on an existing profile; secrets are named, never shown. */
export interface Change {
  what: string;
  from: string;
  to: string;
}

const SETTING_LABELS: readonly (readonly [string, string])[] = [
  ['baseUrl', 'service URL'],
  ['apiKeyHeader', 'API key header'],
  ['remoteUrl', 'Dropbox folder'],
  ['recursive', 'recursive'],
  ['access', 'access'],
  ['connectorName', 'connector name'],
  ['workflowId', 'workflow'],
  ['schedule', 'schedule'],
  ['authorizeUrl', 'authorize URL'],
  ['tokenUrl', 'token URL'],
  ['dropboxApiUrl', 'Dropbox API URL'],
  ['redirectUri', 'redirect URI'],
];

const SECRET_LABELS: [keyof StoredSecrets, keyof Gathered, string][] = [
  ['api_key', 'apiKey', 'service API key'],
  ['app_key', 'appKey', 'Dropbox app key'],
  ['app_secret', 'appSecret', 'Dropbox app secret'],
];

/**
 * The differences between the profile as stored and what this run will store. `next` holds every setting the
 * run records (the gathered values and the resolved ones setup does not gather). Secrets are compared with the
 * stored ones and reported as replaced, without any part of either value.
 */
export function profileChanges(state: ProfileState, next: Record<string, unknown>, stored: StoredSecrets, gathered: Gathered): Change[] {
  const changes: Change[] = [];
  const show = (value: unknown) => (value === undefined || value === null || value === '' ? 'none' : String(value));
  for (const [key, label] of SETTING_LABELS) {
    const before = (state as Record<string, unknown>)[key];
    const after = next[key];
    if (show(before) !== show(after)) changes.push({ what: label, from: show(before), to: show(after) });
  }
  for (const [name, field, label] of SECRET_LABELS) {
    const before = stored[name];
    const after = gathered[field] as string | undefined;
    if (before && after && before !== after) changes.push({ what: label, from: 'stored value', to: 'a different value' });
  }
  return changes;
}

export function formatChanges(profile: string, changes: Change[]): string {
  const width = Math.max(...changes.map((c) => c.what.length));
  return [
    `Profile "${profile}" exists; this setup changes:`,
    ...changes.map((c) => `  ${c.what.padEnd(width)}  ${c.from} → ${c.to}`),
  ].join('\n');
}

/** The refusal when changes need a yes that nobody can give: no terminal and no --yes. */
export function unconfirmedChanges(profile: string, changes: Change[]): ValidationError {
  return new ValidationError(
    changes.map((c) => ({ field: c.what, message: `would change from ${c.from} to ${c.to}` })),
    { hint: `setup changes an existing profile "${profile}" only when confirmed: run it in a terminal, or add --yes to apply; nothing was stored` },
  );
}

/** What to do with a connector that already has the configured name. */
export type ConnectorDecision =
  | { kind: 'none' }
  /** This profile's (its recorded id, or the same app and folder): reconcile updates it without asking. */
  | { kind: 'ours'; id: string }
  /** Someone else's, perhaps: the user must say whether to take it over. */
  | { kind: 'foreign'; connector: SourceConnectorInformation; reason: string };

/**
 * Looks at the connectors listed before the browser step for one that holds the configured name. The service's
 * names are unique across types, so any type counts.
 */
export function connectorDecision(sources: SourceConnectorInformation[], gathered: Gathered, state: ProfileState | undefined): ConnectorDecision {
  const holder = sources.find((s) => s.name === gathered.connectorName);
  if (!holder) return { kind: 'none' };
  if (state?.connectorId === holder.id && state.connectorName === gathered.connectorName) return { kind: 'ours', id: holder.id };
  const reason = notOurs(holder, { remoteUrl: gathered.remoteUrl, appKey: gathered.appKey });
  return reason === undefined ? { kind: 'ours', id: holder.id } : { kind: 'foreign', connector: holder, reason };
}

/** A connector of another type can never be taken over: its configuration is not a Dropbox one. */
export function unadoptable(decision: Extract<ConnectorDecision, { kind: 'foreign' }>, name: string): SyncauthError | undefined {
  if (decision.connector.type === 'dropbox') return undefined;
  return new SyncauthError(
    'SYNCAUTH_CONNECTOR_NAME_TAKEN',
    `a source connector named "${name}" (${decision.connector.id}) already exists on the service and is of type ${decision.connector.type}, not dropbox`,
    { exitCode: ExitCode.usage, hint: 'choose another name with --connector-name (or SYNCAUTH_CONNECTOR_NAME); nothing was stored' },
  );
}

/** The refusal of a takeover nobody confirmed (--yes or no terminal, and no --adopt). */
export function unconfirmedAdoption(decision: Extract<ConnectorDecision, { kind: 'foreign' }>, name: string): SyncauthError {
  const { connector, reason } = decision;
  return new SyncauthError(
    'SYNCAUTH_CONNECTOR_NOT_OURS',
    `a source connector named "${name}" (${connector.id}) already exists on the service and may not be this profile's: ${reason}`,
    {
      exitCode: ExitCode.usage,
      hint: `add --adopt to take it over (its folder and credentials become this profile's), or choose another name with ` +
        `--connector-name; nothing was stored`,
    },
  );
}
