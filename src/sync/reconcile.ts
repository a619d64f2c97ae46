// The step shared by `setup`, `refresh` and the daemon: make the service hold one `dropbox` connector for the
// profile, carrying the current credentials and the freshest access token, and (when a workflow is named) make
// that workflow read from it.
import { dropboxApiPath } from '../service/source-configs.js';
import { isServiceError, type ServiceClient } from '../service/index.js';
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
  workflowAction?: 'updated' | 'unchanged';
}

/** The connector name used when none is configured: `dropbox-` and the subfolder path, `/` turned to `-`. */
export function defaultConnectorName(remoteUrl: string): string {
  return `dropbox-${dropboxApiPath(remoteUrl).slice(1).replaceAll('/', '-')}`;
}

export function dropboxConfig(spec: DropboxConnectorSpec): Record<string, unknown> {
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
    family = await listFamily(client, connector.name);
    const existing = family[0];
    if (existing) {
      result = await updateKnown(client, existing.id, connector, config, now);
      if (result.action === 'updated') result.action = 'adopted';
    } else {
      result = { connector: await client.createSource({ name: connector.name, type: 'dropbox', config }), action: 'created', removed: [] };
    }
  }

  if (input.workflow) {
    const wired = await wireWorkflow(client, input.workflow.id, result.connector.id, input.workflow.schedule);
    result.workflow = wired.workflow;
    result.workflowAction = wired.action;
  }
  // Any path that created or adopted a connector may follow a crash that left another member of the family
  // behind; once the workflow reads from the one kept, the others go.
  if (result.action !== 'updated') result.removed = await removeStaleFamily(client, connector.name, result.connector.id, family);
  return result;
}

async function updateKnown(
  client: ServiceClient,
  id: string,
  connector: DropboxConnectorSpec,
  config: Record<string, unknown>,
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
      const survivor = await findFamilyMember(client, connector.name, id);
      if (survivor) {
        const adopted = await updateKnown(client, survivor.id, connector, config, now);
        return adopted.action === 'updated' ? { ...adopted, action: 'recreated' } : adopted;
      }
      const recreated = await client.createSource({ name: connector.name, type: 'dropbox', config });
      return { connector: recreated, action: 'recreated', removed: [] };
    }
    // The connector exists but cannot be updated: make a replacement under a new name. The caller points the
    // workflow at it, then the old one is removed.
    const replacement = await client.createSource({ name: `${connector.name}-${stamp(now())}`, type: 'dropbox', config });
    return { connector: replacement, action: 'replaced', removed: [] };
  }
}

/** The dropbox connectors named `baseName` or one of its time-stamped replacements, newest first. */
async function listFamily(client: ServiceClient, baseName: string): Promise<SourceConnectorInformation[]> {
  const family = (await client.listSources({ sourceType: 'dropbox' })).filter((s) => s.type === 'dropbox' && isConnectorFamily(s.name, baseName));
  return family.sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
}

/** The newest member of the family other than `exceptId`. */
async function findFamilyMember(client: ServiceClient, baseName: string, exceptId?: string): Promise<SourceConnectorInformation | undefined> {
  return (await listFamily(client, baseName)).find((s) => s.id !== exceptId);
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
async function removeStaleFamily(client: ServiceClient, baseName: string, keepId: string, listed?: SourceConnectorInformation[]): Promise<string[]> {
  const removed: string[] = [];
  const family = (listed ?? (await listFamily(client, baseName))).filter((s) => s.id !== keepId);
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
