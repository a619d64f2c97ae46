// The step shared by `setup`, `refresh` and the daemon: make the service hold one `dropbox` connector for the
// profile, carrying the current credentials and the freshest access token, and (when a workflow is named) make
// that workflow read from it.
import type { ProfileState, ProfileStateDraft, ProfileStore, UpdateOptions } from '../profile/index.js';
import { dropboxApiPath } from '../service/source-configs.js';
import type { SourceConfig } from '../service/source-configs.js';
import { baseState } from './renew.js';
import { ServiceError, isServiceError, type ServiceClient } from '../service/index.js';
import { SCHEDULE_CRON, type Schedule, type SourceConnectorInformation, type WorkflowInformation } from '../service/models.js';

export interface DropboxConnectorSpec {
  /** The configured connector name; a replacement connector gets this name plus a time stamp. */
  name: string;
  remoteUrl: string;
  recursive: boolean;
  appKey: string;
  appSecret: string;
  refreshToken: string;
  /** The fresh access token, sent as `token` whenever we hold one (the public schema requires it). */
  accessToken?: string;
}

export interface ReconcileInput {
  client: ServiceClient;
  connector: DropboxConnectorSpec;
  /** The connector this profile made before, if any. */
  connectorId?: string;
  workflow?: { id: string; schedule?: Schedule };
  now?: () => Date;
}

export type ConnectorAction = 'created' | 'adopted' | 'updated' | 'recreated' | 'replaced';

export interface ReconcileResult {
  connector: SourceConnectorInformation;
  action: ConnectorAction;
  /** Connectors removed because a replacement took their place. */
  removed: string[];
  workflow?: WorkflowInformation;
  workflowAction?: 'created' | 'updated' | 'unchanged';
}

/** The connector name used when none is configured: `dropbox-` and the subfolder path, `/` turned to `-`. */
export function defaultConnectorName(remoteUrl: string): string {
  return `dropbox-${dropboxApiPath(remoteUrl).slice(1).replaceAll('/', '-')}`;
}

export function dropboxConfig(spec: DropboxConnectorSpec): SourceConfig<'dropbox'> {
  return {
    remote_url: spec.remoteUrl,
    // Sent explicitly: the service's documentation says the default is false, its schema says true.
    recursive: spec.recursive,
    refresh_token: spec.refreshToken,
    app_key: spec.appKey,
    app_secret: spec.appSecret,
    ...(spec.accessToken ? { token: spec.accessToken } : {}),
  };
}

/** Whether `name` is the configured name or one of the time-stamped replacements made for it. */
export function isConnectorFamily(name: string, baseName: string): boolean {
  return name === baseName || new RegExp(`^${escapeRegExp(baseName)}-\\d{14}$`).test(name);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function stamp(date: Date): string {
  return date.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

export async function reconcileConnector(input: ReconcileInput): Promise<ReconcileResult> {
  const { client, connector } = input;
  const config = dropboxConfig(connector);
  const now = input.now ?? (() => new Date());
  let result: ReconcileResult;
  // The family as listed on the way in, when it was; removal reuses it rather than listing the workspace again.
  let family: SourceConnectorInformation[] | undefined;

  if (input.connectorId) {
    result = await updateKnown(client, input.connectorId, connector, config, now);
  } else {
    // Adopt a connector of the family (a previous run whose state was lost, or that crashed between creating
    // and recording) instead of failing on the service's unique-name rule or making a second one.
    family = await listFamily(client, connector);
    const created = family[0] ? undefined : await createOrAdopt(client, connector.name, connector, config);
    if (created && !created.adopted) {
      result = { connector: created.connector, action: 'created', removed: [] };
    } else {
      // The connector listed, or the one another process created between the listing and this create.
      const existing = created?.connector ?? (family[0] as SourceConnectorInformation);
      result = await updateKnown(client, existing.id, connector, config, now);
      if (result.action === 'updated') result.action = 'adopted';
    }
  }

  if (input.workflow) {
    const wired = await wireWorkflow(client, input.workflow.id, result.connector.id, input.workflow.schedule);
    result.workflow = wired.workflow;
    result.workflowAction = wired.action;
  }
  // Any path that created or adopted a connector may follow a crash that left another member of the family
  // behind; once the workflow reads from the one kept, the others go.
  if (result.action !== 'updated') result.removed = await removeStaleFamily(client, connector, result.connector.id, family);
  return result;
}

async function updateKnown(
  client: ServiceClient,
  id: string,
  connector: DropboxConnectorSpec,
  config: SourceConfig<'dropbox'>,
  now: () => Date,
): Promise<ReconcileResult> {
  try {
    return { connector: await client.updateSource(id, config, 'dropbox'), action: 'updated', removed: [] };
  } catch (error) {
    if (!isServiceError(error) || (error.status !== 404 && error.status !== 405)) throw error;
    // A 404 may mean the connector is gone or that this deployment has no update route (FastAPI answers
    // "Not Found" for both); reading the connector tells them apart.
    const stillThere = error.status === 405 || (await exists(client, id));
    if (!stillThere) {
      // A recreation that crashed before its id was recorded left a connector of the family: take it.
      const survivor = await findFamilyMember(client, connector, id);
      const recreated = survivor ? undefined : await createOrAdopt(client, connector.name, connector, config);
      if (recreated && !recreated.adopted) return { connector: recreated.connector, action: 'recreated', removed: [] };
      const adopted = await updateKnown(client, (recreated?.connector ?? (survivor as SourceConnectorInformation)).id, connector, config, now);
      return adopted.action === 'updated' ? { ...adopted, action: 'recreated' } : adopted;
    }
    // The connector exists but cannot be updated: make a replacement under a new name. The caller points the
    // workflow at it, then the old one is removed. One that another process made in the same second is taken
    // as it is: this deployment cannot update it either.
    const replacement = await createOrAdopt(client, `${connector.name}-${stamp(now())}`, connector, config);
    return { connector: replacement.connector, action: 'replaced', removed: [] };
  }
}

/**
 * Why `source` is not this profile's connector, or undefined when it is: a dropbox connector of the same
 * Dropbox app reading the same folder. Anything else named like ours (another profile's, another app's, a
 * connector of another type) is never adopted, updated or removed: that would hand it our credentials.
 */
export function notOurs(source: SourceConnectorInformation, connector: Pick<DropboxConnectorSpec, 'remoteUrl' | 'appKey'>): string | undefined {
  if (source.type !== 'dropbox') return `it is a ${source.type} connector`;
  const { remote_url: remoteUrl, app_key: appKey } = source.config;
  if (remoteUrl !== connector.remoteUrl) return `it reads ${typeof remoteUrl === 'string' ? remoteUrl : 'another folder'}, not ${connector.remoteUrl}`;
  if (typeof appKey !== 'string' || /^\**$/.test(appKey)) return 'the service does not show its app key, so it cannot be told from another Dropbox app\'s';
  if (appKey !== connector.appKey) return 'it belongs to another Dropbox app (its app key differs)';
  return undefined;
}

/** This profile's connectors named `connector.name` or one of its time-stamped replacements, newest first. */
async function listFamily(client: ServiceClient, connector: DropboxConnectorSpec): Promise<SourceConnectorInformation[]> {
  const family = (await client.listSources({ sourceType: 'dropbox' })).filter(
    (s) => isConnectorFamily(s.name, connector.name) && notOurs(s, connector) === undefined,
  );
  return family.sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
}

/** The newest member of the family other than `exceptId`. */
async function findFamilyMember(client: ServiceClient, connector: DropboxConnectorSpec, exceptId?: string): Promise<SourceConnectorInformation | undefined> {
  return (await listFamily(client, connector)).find((s) => s.id !== exceptId);
}

/**
 * Creates the connector `name`. The service's unique-name rule answers 409 when another process (a second
 * `setup`, `refresh` or daemon of the same profile) created it after this one listed the family: that
 * connector is adopted when it is this profile's, and anything else of that name is a conflict the user
 * resolves.
 */
async function createOrAdopt(
  client: ServiceClient,
  name: string,
  connector: DropboxConnectorSpec,
  config: SourceConfig<'dropbox'>,
): Promise<{ connector: SourceConnectorInformation; adopted: boolean }> {
  try {
    return { connector: await client.createSource({ name, type: 'dropbox', config }), adopted: false };
  } catch (error) {
    if (!isServiceError(error) || error.status !== 409) throw error;
    const holders = (await client.listSources()).filter((s) => s.name === name);
    const winner = holders.sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at))[0];
    const reason = winner ? notOurs(winner, connector) : 'it could not be found right after';
    if (winner && reason === undefined) return { connector: winner, adopted: true };
    throw new ServiceError(
      'SERVICE_CONFLICT',
      `a source connector named "${name}"${winner ? ` (${winner.id})` : ''} already exists on the service and is not this profile's: ${reason}`,
      {
        status: 409,
        ...(error.method ? { method: error.method } : {}),
        ...(error.path ? { path: error.path } : {}),
        hint: winner
          ? `choose another name with --connector-name (or SYNCAUTH_CONNECTOR_NAME), or, if that connector is no longer used, ` +
            `delete it with \`syncauth source delete ${winner.id}\` and run the command again`
          : 'run the command again',
        cause: error,
      },
    );
  }
}

async function exists(client: ServiceClient, id: string): Promise<boolean> {
  try {
    await client.getSource(id);
    return true;
  } catch (error) {
    if (isServiceError(error) && error.status === 404) return false;
    throw error;
  }
}

async function wireWorkflow(
  client: ServiceClient,
  workflowId: string,
  connectorId: string,
  schedule: Schedule | undefined,
): Promise<{ workflow: WorkflowInformation; action: 'updated' | 'unchanged' }> {
  const current = await client.getWorkflow(workflowId);
  const wired = current.sources.length === 1 && current.sources[0] === connectorId;
  const cron = current.schedule?.crontab_entries.map((e) => e.cron_expression) ?? [];
  const scheduled = schedule === undefined || (cron.length === 1 && cron[0] === SCHEDULE_CRON[schedule]);
  if (wired && scheduled) return { workflow: current, action: 'unchanged' };
  const workflow = await client.updateWorkflow(workflowId, { source_id: connectorId, ...(schedule ? { schedule } : {}) });
  return { workflow, action: 'updated' };
}

/**
 * Deletes the other connectors of the family; where deletes are refused, they stay. `listed` is the family as
 * listed earlier in the same cycle: a plain create after an empty listing then costs no second listing.
 */
async function removeStaleFamily(client: ServiceClient, connector: DropboxConnectorSpec, keepId: string, listed?: SourceConnectorInformation[]): Promise<string[]> {
  const removed: string[] = [];
  const family = (listed ?? (await listFamily(client, connector))).filter((s) => s.id !== keepId);
  for (const stale of family) {
    try {
      await client.deleteSource(stale.id);
      removed.push(stale.id);
    } catch (error) {
      if (!isServiceError(error) || !(error.status === 404 || error.status === 405)) throw error;
    }
  }
  return removed;
}

export interface SyncConnectorInput extends ReconcileInput {
  profiles: ProfileStore;
  profile: string;
  /** What else the state records in the same write; by default what it held. */
  fields?: (current: ProfileState | undefined) => ProfileStateDraft;
  update?: UpdateOptions;
  /** Wraps the state write (the CLI's write section, which an interrupt lets finish). */
  writing?: <T>(write: () => Promise<T>) => Promise<T>;
}

/**
 * Syncs the connector: reconciles it with the service, then records which connector the profile has, in one
 * state write with whatever else the caller records. `setup`, `refresh` and the daemon all take this step;
 * what each does when it fails is its own.
 */
export async function syncConnector(input: SyncConnectorInput): Promise<ReconcileResult> {
  const result = await reconcileConnector(input);
  const write = (): Promise<unknown> =>
    input.profiles.update(
      input.profile,
      (current) => ({
        ...(input.fields ? input.fields(current) : baseState(current)),
        connectorId: result.connector.id,
        // The configured name, not a replacement's time-stamped one, so later runs find the whole family.
        connectorName: input.connector.name,
      }),
      input.update,
    );
  await (input.writing ? input.writing(write) : write());
  return result;
}
