// The step shared by `setup`, `refresh` and the daemon: make the service hold one `dropbox` connector for the
// profile, carrying the current credentials and the freshest access token, and (when a workflow is named) make
// that workflow read from it.
import path from 'node:path';
import { assertProfileName, type ProfileState, type ProfileStateDraft, type ProfileStore, type UpdateOptions } from '../profile/index.js';
import { ProfileStoreError } from '../profile/errors.js';
import { ensurePrivateDir } from '../profile/files.js';
import { withFileLock } from '../profile/lock.js';
import { remedyHint } from '../remedy.js';
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
  /**
   * The duplicate check shared by many profiles (the daemon's, FamilyListings): whether one recent listing of
   * the workspace shows a connector of this profile's family besides the one it recorded. With it, the usual
   * cycle updates the recorded connector by id and lists nothing itself. Without it (a command reconciling one
   * profile), every reconcile lists the family, as the one check of its one-profile sweep.
   */
  familyCheck?: FamilyCheck;
}

/** Whether the workspace holds a connector of the family of `connector` besides `recordedId`; undefined: not known. */
export type FamilyCheck = (connector: DropboxConnectorSpec, recordedId: string) => Promise<boolean | undefined>;

export type ConnectorAction = 'created' | 'adopted' | 'updated' | 'recreated' | 'replaced';

/** A connector named for the user: its name and id, never its config. */
export interface ConnectorRef {
  id: string;
  name: string;
}

export interface ReconcileResult {
  connector: SourceConnectorInformation;
  action: ConnectorAction;
  /** Ids of the connectors of the family removed: replaced ones, and duplicates of the one kept. */
  removed: string[];
  /** The same connectors, with their names. */
  removedConnectors: ConnectorRef[];
  /** Connectors of the family left in place because a workflow other than the profile's reads them. */
  keptShared: (ConnectorRef & { workflows: string[] })[];
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

/** The configured name a time-stamped replacement (`<name>-<YYYYMMDDhhmmss>`) was made for; undefined for any other name. */
export function replacedName(name: string): string | undefined {
  return /^([\s\S]*)-\d{14}$/.exec(name)?.[1];
}

/** Whether `name` is the configured name or one of the time-stamped replacements made for it. */
export function isConnectorFamily(name: string, baseName: string): boolean {
  return name === baseName || replacedName(name) === baseName;
}

function stamp(date: Date): string {
  return date.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

/**
 * Makes the service hold one connector of the profile's family and the workflow read from it.
 *
 * A service without the unique-name rule may hold several connectors of the family (made by processes that each
 * found none, on hosts that do not share a lock), which an update by id alone would never see: the family is
 * listed to find them. Of several, one is kept, chosen so that every process that looks at the same workspace
 * chooses the same one: the one the profile's workflow reads; else the one the profile recorded; else the
 * oldest that no other workflow reads (a duplicate made later is always younger, so a process that lists after
 * it was made still keeps the first); else the oldest. The workflow is pointed at it, then the others are
 * deleted, except one that a workflow other than the profile's reads: that one is left and reported.
 *
 * With a shared duplicate check (`familyCheck`) that finds nothing besides the recorded connector, the usual
 * cycle is that connector's update by id (and the workflow read, when one is named): what the listing would
 * have chosen is the recorded one. The listing is taken where it can change the answer: no connector recorded,
 * the check finding others (or the workflow reading another of the family), the recorded one gone (404) or not
 * updatable (405), and a create that met a conflict.
 */
export async function reconcileConnector(input: ReconcileInput): Promise<ReconcileResult> {
  if (input.connectorId !== undefined && input.familyCheck) {
    const usual = await updateRecorded(input, input.connectorId, input.familyCheck);
    if (usual) return usual;
  }
  return reconcileListed(input);
}

/**
 * The usual cycle: the recorded connector updated by id, when the shared check finds no other of the family.
 * Undefined when the listing must decide: others found, the recorded one gone or not updatable, or the
 * workflow reading another connector of the family.
 */
async function updateRecorded(input: ReconcileInput, id: string, familyCheck: FamilyCheck): Promise<ReconcileResult | undefined> {
  const { client, connector } = input;
  if ((await familyCheck(connector, id)) === true) return undefined;
  let updated: SourceConnectorInformation;
  try {
    updated = await client.updateSource(id, dropboxConfig(connector), 'dropbox');
  } catch (error) {
    if (isServiceError(error) && (error.status === 404 || error.status === 405)) return undefined;
    throw error;
  }
  const result: ReconcileResult = { ...emptyResult(updated), action: 'updated' };
  if (!input.workflow) return result;
  const current = await client.getWorkflow(input.workflow.id);
  // The one the workflow reads is the one kept, should it be of the family: that is the listing's to settle.
  if (await readsOtherMember(client, current, id, connector)) return reconcileListed(input);
  const wired = await wireWorkflow(client, input.workflow.id, id, input.workflow.schedule, current);
  result.workflow = wired.workflow;
  result.workflowAction = wired.action;
  return result;
}

/** Whether `workflow` reads a connector of the profile's family other than `keptId`. */
async function readsOtherMember(client: ServiceClient, workflow: WorkflowInformation, keptId: string, connector: DropboxConnectorSpec): Promise<boolean> {
  for (const sourceId of workflow.sources) {
    if (sourceId.toLowerCase() === keptId.toLowerCase()) continue;
    let source: SourceConnectorInformation;
    try {
      source = await client.getSource(sourceId);
    } catch (error) {
      if (isServiceError(error) && error.status === 404) continue;
      throw error;
    }
    if (isConnectorFamily(source.name, connector.name) && notOurs(source, connector) === undefined) return true;
  }
  return false;
}

/** The reconcile that lists the family first; see reconcileConnector. */
async function reconcileListed(input: ReconcileInput): Promise<ReconcileResult> {
  const { client, connector } = input;
  const config = dropboxConfig(connector);
  const now = input.now ?? (() => new Date());
  const family = await listFamily(client, connector);
  // Which workflows read which connector: asked only when there is more than one connector to choose from or
  // to remove.
  let readers: Map<string, string[]> | undefined;
  const readersOf = async (): Promise<Map<string, string[]>> => (readers ??= await workflowReaders(client));
  const candidates = new Set([...(input.connectorId ? [input.connectorId] : []), ...family.map((s) => s.id)]);
  const keepId = candidates.size > 1 ? chooseKept(family, input.connectorId, await readersOf(), input.workflow?.id) : [...candidates][0];

  let result: ReconcileResult;
  if (keepId === undefined) {
    // Nothing to adopt. Where the service has the unique-name rule, a 409 means another process created it
    // after the listing: that one is adopted.
    const created = await createOrAdopt(client, connector.name, connector, config);
    result = created.adopted
      ? adoptedFrom(await updateKnown(client, created.connector.id, connector, config, now))
      : { ...emptyResult(created.connector), action: 'created' };
  } else if (keepId === input.connectorId) {
    result = await updateKnown(client, keepId, connector, config, now);
  } else {
    // A connector of the family the profile did not record: a previous run whose state was lost, or that
    // crashed between creating and recording, or a duplicate the workflow reads.
    result = adoptedFrom(await updateKnown(client, keepId, connector, config, now));
  }

  if (input.workflow) {
    const wired = await wireWorkflow(client, input.workflow.id, result.connector.id, input.workflow.schedule);
    result.workflow = wired.workflow;
    result.workflowAction = wired.action;
  }
  // Once the workflow reads from the one kept, the others go: duplicates, a replaced connector, one a crashed
  // cycle left behind.
  const stale = family.filter((s) => s.id !== result.connector.id);
  if (stale.length > 0) Object.assign(result, await removeStale(client, stale, await readersOf(), input.workflow?.id));
  return result;
}

function emptyResult(connector: SourceConnectorInformation): Omit<ReconcileResult, 'action'> {
  return { connector, removed: [], removedConnectors: [], keptShared: [] };
}

function adoptedFrom(result: ReconcileResult): ReconcileResult {
  return result.action === 'updated' ? { ...result, action: 'adopted' } : result;
}

/** The connector to keep of several; see reconcileConnector. `family` is oldest first. */
function chooseKept(
  family: SourceConnectorInformation[],
  recordedId: string | undefined,
  readers: Map<string, string[]>,
  workflowId: string | undefined,
): string | undefined {
  const readBy = (id: string): string[] => readers.get(id) ?? [];
  if (workflowId) {
    const read = family.find((s) => readBy(s.id).includes(workflowId));
    if (read) return read.id;
  }
  if (recordedId) return recordedId;
  return (family.find((s) => readBy(s.id).every((w) => w === workflowId)) ?? family[0])?.id;
}

/** Connector id -> ids of the workflows that read it. */
async function workflowReaders(client: ServiceClient): Promise<Map<string, string[]>> {
  const readers = new Map<string, string[]>();
  for (const workflow of await client.listWorkflows()) {
    for (const source of workflow.sources) readers.set(source, [...(readers.get(source) ?? []), workflow.id]);
  }
  return readers;
}

async function updateKnown(
  client: ServiceClient,
  id: string,
  connector: DropboxConnectorSpec,
  config: SourceConfig<'dropbox'>,
  now: () => Date,
): Promise<ReconcileResult> {
  try {
    return { ...emptyResult(await client.updateSource(id, config, 'dropbox')), action: 'updated' };
  } catch (error) {
    if (!isServiceError(error) || (error.status !== 404 && error.status !== 405)) throw error;
    // A 404 may mean the connector is gone or that this deployment has no update route (FastAPI answers
    // "Not Found" for both); reading the connector tells them apart.
    const stillThere = error.status === 405 || (await exists(client, id));
    if (!stillThere) {
      // A recreation that crashed before its id was recorded left a connector of the family: take it.
      const survivor = await findFamilyMember(client, connector, id);
      const recreated = survivor ? undefined : await createOrAdopt(client, connector.name, connector, config);
      if (recreated && !recreated.adopted) return { ...emptyResult(recreated.connector), action: 'recreated' };
      const adopted = await updateKnown(client, (recreated?.connector ?? (survivor as SourceConnectorInformation)).id, connector, config, now);
      return adopted.action === 'updated' ? { ...adopted, action: 'recreated' } : adopted;
    }
    // The connector exists but cannot be updated: make a replacement under a new name. The caller points the
    // workflow at it, then the old one is removed. One that another process made in the same second is taken
    // as it is: this deployment cannot update it either.
    const replacement = await createOrAdopt(client, `${connector.name}-${stamp(now())}`, connector, config);
    return { ...emptyResult(replacement.connector), action: 'replaced' };
  }
}

/**
 * Why `source` is not this profile's connector, or undefined when it is: a dropbox connector of the same
 * Dropbox app reading the same folder. Anything else named like ours (another profile's, another app's, a
 * connector of another type) is never adopted, updated or removed: that would hand it our credentials.
 */
export function notOurs(source: Pick<SourceConnectorInformation, 'type' | 'config'>, connector: Pick<DropboxConnectorSpec, 'remoteUrl' | 'appKey'>): string | undefined {
  if (source.type !== 'dropbox') return `it is a ${source.type} connector`;
  const { remote_url: remoteUrl, app_key: appKey } = source.config;
  if (remoteUrl !== connector.remoteUrl) return `it reads ${typeof remoteUrl === 'string' ? remoteUrl : 'another folder'}, not ${connector.remoteUrl}`;
  if (typeof appKey !== 'string' || /^\**$/.test(appKey)) return 'the service does not show its app key, so it cannot be told from another Dropbox app\'s';
  if (appKey !== connector.appKey) return 'it belongs to another Dropbox app (its app key differs)';
  return undefined;
}

/**
 * This profile's connectors named `connector.name` or one of its time-stamped replacements, oldest first (ties,
 * as when the service stamps two creations with one time, by id, so that every process orders them alike). The
 * rest of the listing is dropped as it is read.
 */
async function listFamily(client: ServiceClient, connector: DropboxConnectorSpec): Promise<SourceConnectorInformation[]> {
  const family = await client.listSources({
    sourceType: 'dropbox',
    where: (s) => isConnectorFamily(s.name, connector.name) && notOurs(s, connector) === undefined,
  });
  return family.sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** The oldest member of the family other than `exceptId`, as the one kept of several is. */
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
    // Every type: a connector of another type holds the name as well.
    const holders = await client.listSources({ where: (s) => s.name === name });
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
          ? remedyHint({ action: 'run', command: `source delete ${winner.id}` }, (command) =>
            `choose another name with --connector-name (or SYNCAUTH_CONNECTOR_NAME), or, if that connector is no longer used, ` +
            `delete it with \`${command}\` and run the command again`)
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
  read?: WorkflowInformation,
): Promise<{ workflow: WorkflowInformation; action: 'updated' | 'unchanged' }> {
  const current = read ?? (await client.getWorkflow(workflowId));
  const wired = current.sources.length === 1 && current.sources[0] === connectorId;
  const cron = current.schedule?.crontab_entries.map((e) => e.cron_expression) ?? [];
  const scheduled = schedule === undefined || (cron.length === 1 && cron[0] === SCHEDULE_CRON[schedule]);
  if (wired && scheduled) return { workflow: current, action: 'unchanged' };
  const workflow = await client.updateWorkflow(workflowId, { source_id: connectorId, ...(schedule ? { schedule } : {}) });
  return { workflow, action: 'updated' };
}

/**
 * Deletes `stale`, connectors of the family other than the one kept, except those a workflow other than the
 * profile's reads (deleting a source leaves the workflows that read it pointing at nothing). Where deletes are
 * refused, they stay; one already gone is not counted.
 */
async function removeStale(
  client: ServiceClient,
  stale: SourceConnectorInformation[],
  readers: Map<string, string[]>,
  workflowId: string | undefined,
): Promise<Pick<ReconcileResult, 'removed' | 'removedConnectors' | 'keptShared'>> {
  const removedConnectors: ConnectorRef[] = [];
  const keptShared: ReconcileResult['keptShared'] = [];
  for (const source of stale) {
    const others = (readers.get(source.id) ?? []).filter((w) => w !== workflowId);
    if (others.length > 0) {
      keptShared.push({ id: source.id, name: source.name, workflows: others });
      continue;
    }
    try {
      await client.deleteSource(source.id);
      removedConnectors.push({ id: source.id, name: source.name });
    } catch (error) {
      if (!isServiceError(error) || !(error.status === 404 || error.status === 405)) throw error;
    }
  }
  return { removed: removedConnectors.map((c) => c.id), removedConnectors, keptShared };
}

/** What a reconcile removed and left, in lines for the user: names and ids only. */
export function describeCleanup(result: Pick<ReconcileResult, 'removedConnectors' | 'keptShared'>): string[] {
  const lines: string[] = [];
  if (result.removedConnectors.length > 0) {
    lines.push(`removed ${result.removedConnectors.length} other source connector(s) of this profile: ${result.removedConnectors.map((c) => `${c.name} (${c.id})`).join(', ')}`);
  }
  for (const kept of result.keptShared) {
    lines.push(`left source connector ${kept.name} (${kept.id}) in place: workflow ${kept.workflows.join(', ')} reads it`);
  }
  return lines;
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
  return withReconcileLock(input.profiles, input.profile, async () => {
    const result = await reconcileConnector(input);
    const write = (): Promise<unknown> =>
      input.profiles.update(
        input.profile,
        (current) => {
          // The connector recorded already, and nothing else to record (the daemon's reconcile after each renewal):
          // no write, which would be the same state but for its time, made durable at every renewal.
          if (!input.fields && current?.connectorId === result.connector.id && current.connectorName === input.connector.name) return current;
          return {
            ...(input.fields ? input.fields(current) : baseState(current)),
            connectorId: result.connector.id,
            // The configured name, not a replacement's time-stamped one, so later runs find the whole family.
            connectorName: input.connector.name,
          };
        },
        input.update,
      );
    await (input.writing ? input.writing(write) : write());
    return result;
  });
}

/** How long a reconcile waits for another process's reconcile of the same profile. */
export const RECONCILE_LOCK_WAIT_MS = 60_000;
const RECONCILE_LOCK_STALE_MS = 10_000;

/**
 * Runs `fn` holding the profile's reconcile lock (`<profile>.reconcile.lock`, beside the renewal lock and apart
 * from it: a renewal never waits for a slow service). Two processes of one host that both find no connector
 * would otherwise both create one where the service has no unique-name rule; under the lock the second finds
 * the first's and adopts it. A holder killed is found dead by its owner record and its lock taken over at once.
 * The holder takes no other profile lock but the state write lock, so no two holders wait on each other.
 */
export async function withReconcileLock<T>(profiles: ProfileStore, profile: string, fn: () => Promise<T>): Promise<T> {
  assertProfileName(profile);
  const lockPath = path.join(profiles.dir, `${profile}.reconcile.lock`);
  await ensurePrivateDir(profiles.dir);
  return withFileLock(lockPath, fn, {
    waitMs: RECONCILE_LOCK_WAIT_MS,
    staleMs: RECONCILE_LOCK_STALE_MS,
    recordOwner: true,
    timeoutError: () =>
      new ProfileStoreError(
        'PROFILE_LOCK_TIMEOUT',
        `profile "${profile}" is busy: another syncauth process has held its reconcile lock (${lockPath}) for more than ` +
          `${RECONCILE_LOCK_WAIT_MS / 1000} s. Try again later; a lock left by a process that died is taken over at once.`,
        { path: lockPath },
      ),
  });
}
