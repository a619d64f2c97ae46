// `syncauth profile …`: change a profile without a new authorization. `set` changes its non-secret settings,
// `rotate` replaces its service API key or Dropbox app secret, `rekey` re-encrypts the encrypted file store
// under a new key. Nothing is saved that was not proven first: a workflow id the service does not know, an API
// key it refuses or an app secret Dropbox refuses leaves the profile as it was.
import path from 'node:path';
import { existsSync } from 'node:fs';
import { SETTINGS } from '../../config.js';
import {
  SECRET_FILE_NAME, SecretStoreError, openFileSecretStore,
} from '../../credentials/index.js';
import { ExitCode, SyncauthError, ValidationError, type FieldIssue } from '../../errors.js';
import { isOAuthError, listFolder, renewAccessToken, type TokenSet } from '../../oauth/index.js';
import { newSecretsVersion, type ProfileState } from '../../profile/index.js';
import { registerAppCredentials, registerSecrets } from '../../redact.js';
import { ServiceClient } from '../../service/client.js';
import { isServiceError } from '../../service/errors.js';
import { SCHEDULES } from '../../service/models.js';
import { dropboxApiPath, dropboxRemoteUrlProblem } from '../../service/source-configs.js';
import { baseState } from '../../sync/renew.js';
import { encodeAccessToken } from '../../sync/token-cache.js';
import type { CommandContext } from '../context.js';
import { checkUuid } from '../input.js';
import { writeSection } from '../interrupt.js';
import { counted, printJson, warn } from '../output.js';
import { openSession, readSecrets, requireGrant, type ProfileSession } from '../session.js';
import { sessionAccessToken } from './shared.js';
import { reauthorizeCommand, syncauthCommand } from '../../profile/name.js';

// ---- profile set ----

export interface ProfileSetOptions {
  workflowId?: string;
  /** false for --no-workflow. */
  workflow?: boolean;
  schedule?: string;
  clearSchedule?: boolean;
  connectorName?: string;
  remoteUrl?: string;
  recursive?: boolean;
}

type Changeable = 'workflowId' | 'schedule' | 'connectorName' | 'remoteUrl' | 'recursive';

const LABELS: Record<Changeable, string> = {
  workflowId: 'workflow',
  schedule: 'schedule',
  connectorName: 'connector name',
  remoteUrl: 'remote URL',
  recursive: 'recursive',
};

interface Change {
  setting: Changeable;
  from: string | boolean | undefined;
  to: string | boolean | undefined;
}

const SET_FLAGS = '--workflow-id, --no-workflow, --schedule, --clear-schedule, --connector-name, --remote-url, --recursive, --no-recursive';

/** The flags checked on their own and against each other, before anything is read or sent. */
function checkSetOptions(options: ProfileSetOptions, state: ProfileState): void {
  const issues: FieldIssue[] = [];
  const noWorkflow = options.workflow === false;
  const given = [
    options.workflowId, noWorkflow || undefined, options.schedule, options.clearSchedule, options.connectorName, options.remoteUrl, options.recursive,
  ].some((value) => value !== undefined);
  if (!given) throw new ValidationError([{ field: '', message: `nothing to change: give at least one of ${SET_FLAGS}` }]);
  if (options.workflowId !== undefined && noWorkflow) issues.push({ field: '--no-workflow', message: 'cannot be given with --workflow-id' });
  if (options.schedule !== undefined && options.clearSchedule) issues.push({ field: '--clear-schedule', message: 'cannot be given with --schedule' });
  if (options.workflowId !== undefined) checkUuid(options.workflowId, '--workflow-id', issues);
  if (options.schedule !== undefined) {
    if (!(SCHEDULES as string[]).includes(options.schedule)) {
      issues.push({ field: '--schedule', message: `unknown schedule "${options.schedule}"; it must be one of: ${SCHEDULES.join(', ')}` });
    } else if (noWorkflow || (options.workflowId === undefined && !state.workflowId)) {
      issues.push({ field: '--schedule', message: 'a schedule needs a workflow to apply to: give --workflow-id too' });
    }
  }
  if (options.connectorName !== undefined && !options.connectorName.trim()) issues.push({ field: '--connector-name', message: 'must not be empty' });
  if (options.remoteUrl !== undefined) {
    const problem = dropboxRemoteUrlProblem(options.remoteUrl);
    if (problem) issues.push({ field: '--remote-url', message: problem });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/** What would change, compared with the stored state; a flag that repeats the stored value changes nothing. */
function plannedChanges(options: ProfileSetOptions, state: ProfileState): Change[] {
  const wanted: Partial<Record<Changeable, string | boolean | undefined>> = {};
  if (options.workflowId !== undefined) wanted.workflowId = options.workflowId;
  if (options.workflow === false) {
    wanted.workflowId = undefined;
    // A schedule is the workflow's: without a workflow there is nothing for it to apply to.
    wanted.schedule = undefined;
  }
  if (options.schedule !== undefined) wanted.schedule = options.schedule;
  if (options.clearSchedule) wanted.schedule = undefined;
  if (options.connectorName !== undefined) wanted.connectorName = options.connectorName.trim();
  if (options.remoteUrl !== undefined) wanted.remoteUrl = options.remoteUrl.trim();
  if (options.recursive !== undefined) wanted.recursive = options.recursive;
  const changes: Change[] = [];
  for (const [setting, to] of Object.entries(wanted) as [Changeable, string | boolean | undefined][]) {
    const from = setting === 'recursive' ? (state.recursive ?? false) : state[setting];
    if (from !== to) changes.push({ setting, from, to });
  }
  return changes;
}

function shown(value: string | boolean | undefined): string {
  return value === undefined ? 'none' : String(value);
}

/**
 * `syncauth profile set`: changes settings in the profile's state, after checking with the service (and
 * Dropbox, for a folder) what can be checked. The connector and workflow on the service change at the next
 * `refresh` or daemon reconcile, not here.
 */
export async function profileSet(context: CommandContext, options: ProfileSetOptions): Promise<void> {
  const session = await openSession(context);
  const state = await requireState(session);
  checkSetOptions(options, state);
  const changes = plannedChanges(options, state);
  const name = session.name;
  if (changes.length === 0) {
    if (context.json) printJson(context.io, { profile: name, changes: [], notes: [] });
    else context.io.stdout.write(`profile "${name}" already has these settings; nothing changed\n`);
    return;
  }
  const notes = await checkChanges(session, state, changes, context);
  await writeSection(() =>
    session.profiles.update(name, (current) => {
      const next = { ...baseState(current) };
      for (const change of changes) {
        if (change.setting === 'recursive') next.recursive = change.to as boolean;
        else if (change.to === undefined) delete next[change.setting];
        else next[change.setting] = change.to as string;
      }
      // The service cannot rename a connector: under a new name the next reconcile makes a new one.
      if (changes.some((change) => change.setting === 'connectorName')) delete next.connectorId;
      return next;
    }),
  );
  const it = changes.length === 1 ? 'it' : 'them';
  const apply =
    `\`${syncauthCommand(`refresh --profile ${name}`)}\` applies ${it} to the service now; a running daemon takes ${it} up when ` +
    `reloaded (SIGHUP) and applies ${it} at its next renewal`;
  if (context.json) {
    printJson(context.io, { profile: name, changes: changes.map((c) => ({ setting: c.setting, from: c.from ?? null, to: c.to ?? null })), notes: [...notes, apply] });
    return;
  }
  const out = context.io.stdout;
  out.write(`✓ profile "${name}" changed:\n`);
  for (const change of changes) out.write(`  ${LABELS[change.setting]}: ${shown(change.from)} -> ${shown(change.to)}\n`);
  for (const note of notes) out.write(`note: ${note}\n`);
  out.write(`${apply}\n`);
}

/**
 * Checks each change that can be checked before it is saved: the workflow exists for the profile's API key,
 * no other connector has the new name, the new folder exists in the app folder. Returns notes on what the
 * changes mean on the service.
 */
async function checkChanges(session: ProfileSession, state: ProfileState, changes: Change[], context: CommandContext): Promise<string[]> {
  const notes: string[] = [];
  const name = session.name;
  const change = (setting: Changeable) => changes.find((c) => c.setting === setting);
  const workflow = change('workflowId');
  const connectorName = change('connectorName');
  const remoteUrl = change('remoteUrl');
  const schedule = change('schedule');

  if (workflow?.to !== undefined || connectorName) {
    const client = await profileServiceClient(session, workflow?.to !== undefined ? '--workflow-id' : '--connector-name');
    try {
      if (workflow?.to !== undefined) await checkWorkflow(client, String(workflow.to), name);
      if (connectorName) await checkConnectorName(client, String(connectorName.to), state);
    } finally {
      await client.close();
    }
  }
  if (remoteUrl) notes.push(...(await checkFolder(session, String(remoteUrl.to), context)));

  if (workflow?.from !== undefined) {
    notes.push(`workflow ${String(workflow.from)} keeps reading from the connector on the service; syncauth no longer updates it`);
  }
  if (schedule && schedule.to === undefined && !workflow && state.workflowId) {
    notes.push(`the workflow's schedule on the service is left as it is; \`${syncauthCommand(`workflow update ${state.workflowId} --clear-schedule`)}\` removes it there`);
  }
  if (connectorName) {
    const old = state.connectorId ? `the connector ${state.connectorName ? `"${state.connectorName}" ` : ''}(${state.connectorId})` : undefined;
    notes.push(
      `the service cannot rename a connector: the next reconcile creates "${String(connectorName.to)}"` +
        `${state.workflowId || workflow?.to ? ' and points the workflow at it' : ''}` +
        (old ? `; ${old} stays on the service until you delete it: \`${syncauthCommand(`source delete ${state.connectorId}`)}\`` : ''),
    );
  }
  return notes;
}

async function profileServiceClient(session: ProfileSession, field: string): Promise<ServiceClient> {
  const secrets = await readSecrets(session);
  const baseUrl = session.values.baseUrl;
  if (!baseUrl || !secrets.apiKey) {
    throw new SyncauthError(
      'SYNCAUTH_INCOMPLETE_PROFILE',
      `${field}: cannot check it with the service: profile "${session.name}" lacks ${[!baseUrl && 'the base URL', !secrets.apiKey && 'the API key'].filter(Boolean).join(' and ')}; nothing was saved`,
      { exitCode: ExitCode.usage, hint: `run \`${reauthorizeCommand(session.name)}\`, or set SYNCAUTH_BASE_URL and SYNCAUTH_API_KEY` },
    );
  }
  return new ServiceClient({ baseUrl, apiKey: secrets.apiKey, apiKeyHeader: session.values.apiKeyHeader });
}

/** A failure of a check: the service's own code and exit code, the flag it was about, and that nothing was saved. */
function checkFailed(error: unknown, field: string, what: string): unknown {
  if (!(error instanceof SyncauthError) || error instanceof ValidationError) return error;
  return new SyncauthError(error.code, `${field}: could not check ${what} with the service: ${error.message}; nothing was saved`, {
    exitCode: error.exitCode,
    ...(error.hint ? { hint: error.hintSource } : {}),
    cause: error,
  });
}

async function checkWorkflow(client: ServiceClient, id: string, profile: string): Promise<void> {
  try {
    await client.getWorkflow(id);
  } catch (error) {
    if (isServiceError(error) && error.status === 404) {
      throw new ValidationError([{ field: '--workflow-id', message: `the service has no workflow ${id} in the workspace of profile "${profile}"'s API key` }], {
        hint: `\`${syncauthCommand(`workflow list --profile ${profile}`)}\` lists the workflows there`,
      });
    }
    throw checkFailed(error, '--workflow-id', `workflow ${id}`);
  }
}

async function checkConnectorName(client: ServiceClient, name: string, state: ProfileState): Promise<void> {
  let holder;
  try {
    holder = await client.findSourceByName(name);
  } catch (error) {
    throw checkFailed(error, '--connector-name', `the name "${name}"`);
  }
  if (holder && holder.id !== state.connectorId) {
    throw new ValidationError([{ field: '--connector-name', message: `a source connector named "${name}" (${holder.id}) already exists on the service` }], {
      hint: 'choose another name, or delete that connector first if it is no longer used',
    });
  }
}

/** The new folder must exist in the app folder; the grant lists it (a token kept by another command is reused). */
async function checkFolder(session: ProfileSession, remoteUrl: string, context: CommandContext): Promise<string[]> {
  const grant = requireGrant(session, await readSecrets(session));
  const folder = dropboxApiPath(remoteUrl);
  const tokens = await sessionAccessToken(session, grant, 'margin');
  try {
    await listFolder({ apiUrl: session.values.dropboxApiUrl, accessToken: tokens.accessToken, path: folder });
  } catch (error) {
    if (isOAuthError(error, 'OAUTH_PATH_NOT_FOUND')) {
      throw new ValidationError([{ field: '--remote-url', message: `the folder ${folder} does not exist in the app folder` }], {
        hint: 'create it inside Dropbox/Apps/<your app folder>/ first (the service cannot read the app folder\'s root)',
      });
    }
    if (isOAuthError(error, 'OAUTH_MISSING_SCOPE')) return [`could not check that ${remoteUrl} exists: the grant lacks files.metadata.read`];
    throw error;
  }
  if (!context.json) context.io.stderr.write(`✓ ${remoteUrl} exists in the app folder\n`);
  return [];
}

// ---- profile rotate ----

const ROTATABLE = {
  'api-key': { label: 'API key', env: SETTINGS.apiKey.env, source: 'apiKey' },
  'app-secret': { label: 'app secret', env: SETTINGS.appSecret.env, source: 'appSecret' },
} as const;
type Rotatable = keyof typeof ROTATABLE;

/**
 * `syncauth profile rotate api-key|app-secret`: reads the new value (hidden prompt or one line of stdin),
 * proves it, stores it and bumps the profile's secretsVersion so that other processes read the secrets again.
 */
export async function profileRotate(context: CommandContext, what: string): Promise<void> {
  if (!Object.hasOwn(ROTATABLE, what)) {
    throw new ValidationError([{ field: 'secret', message: `must be api-key or app-secret, got "${what}"` }]);
  }
  const secret = ROTATABLE[what as Rotatable];
  const session = await openSession(context);
  await requireProfile(session);
  if (!session.secrets.writable) {
    throw new SecretStoreError(
      'STORE_READ_ONLY',
      `cannot rotate the ${secret.label} of profile "${session.name}": with SYNCAUTH_STORE=env the secrets come from the ` +
        `environment and syncauth cannot change them. Set ${secret.env} to the new value where that environment is defined, ` +
        'and restart what runs with it.',
    );
  }
  if (what === 'api-key') await rotateApiKey(context, session);
  else await rotateAppSecret(context, session);
  if (session.settings.sources[secret.source] === 'env') {
    warn(context.io, `${secret.env} is set in this environment and wins over the stored ${secret.label}: unset it, or commands run here keep using the old one`);
  }
}

async function rotateApiKey(context: CommandContext, session: ProfileSession): Promise<void> {
  const { name, values: v } = session;
  if (!v.baseUrl) {
    throw new SyncauthError('SYNCAUTH_INCOMPLETE_PROFILE', `profile "${name}" has no service base URL to check a new API key with`, {
      exitCode: ExitCode.usage,
      hint: `run \`${reauthorizeCommand(name)}\``,
    });
  }
  const value = await readNewSecret(context, 'API key');
  registerSecrets(value);
  const stored = await session.secrets.get(name);
  if (stored.api_key === value) {
    context.io.stdout.write(`profile "${name}" already has that API key; nothing changed\n`);
    return;
  }
  const proof = await proveApiKey(session, v.baseUrl, value);
  await writeSection(async () => {
    await session.secrets.set(name, { api_key: value });
    await bumpSecretsVersion(session);
  });
  const out = context.io.stdout;
  out.write(`✓ ${proof}\n✓ the API key of profile "${name}" is replaced in the ${session.secrets.kind} store\n`);
  out.write('a running daemon uses it after a reload (SIGHUP); revoke the old key in the service once nothing uses it\n');
}

/**
 * One authenticated read with the new key: the profile's connector when it has one (which also proves the key
 * is of the workspace that holds it), else its workflow, else the list of dropbox connectors.
 */
async function proveApiKey(session: ProfileSession, baseUrl: string, apiKey: string): Promise<string> {
  const { connectorId, workflowId } = session.state ?? {};
  const client = new ServiceClient({ baseUrl, apiKey, apiKeyHeader: session.values.apiKeyHeader });
  const refused = (why: string, hint: string) =>
    new SyncauthError('SYNCAUTH_API_KEY_REFUSED', `the new API key was not stored: ${why}`, { exitCode: ExitCode.usage, hint });
  try {
    if (connectorId) {
      await client.getSource(connectorId);
      return `the service shows connector ${connectorId} to the new key`;
    }
    if (workflowId) {
      await client.getWorkflow(workflowId);
      return `the service shows workflow ${workflowId} to the new key`;
    }
    await client.listSources({ sourceType: 'dropbox' });
    return 'the service accepts the new key';
  } catch (error) {
    if (isServiceError(error) && (error.status === 401 || error.status === 403)) {
      throw refused(`the service refused it (HTTP ${error.status})`, 'copy the key again from the service (API Keys); the profile keeps its current key');
    }
    if (isServiceError(error) && error.status === 404) {
      const thing = connectorId ? `connector ${connectorId}` : `workflow ${String(workflowId)}`;
      throw refused(
        `the service does not show ${thing} to it: the key belongs to another workspace, or the ${connectorId ? 'connector' : 'workflow'} was deleted`,
        'use a key of the workspace that holds the profile\'s connector; the profile keeps its current key',
      );
    }
    if (error instanceof SyncauthError && !(error instanceof ValidationError)) {
      throw new SyncauthError(error.code, `could not check the new API key with the service: ${error.message}; nothing was stored`, {
        exitCode: error.exitCode,
        ...(error.hint ? { hint: error.hintSource } : {}),
        cause: error,
      });
    }
    throw error;
  } finally {
    await client.close();
  }
}

async function rotateAppSecret(context: CommandContext, session: ProfileSession): Promise<void> {
  const { name } = session;
  const secrets = await readSecrets(session, { readStore: true });
  if (!secrets.appKey || !secrets.refreshToken) {
    throw new SyncauthError('SYNCAUTH_NOT_AUTHORIZED', `profile "${name}" has no Dropbox grant to check a new app secret with`, {
      exitCode: ExitCode.authRequired,
      hint: `run \`${reauthorizeCommand(name)}\``,
    });
  }
  const appKey = secrets.appKey;
  const value = await readNewSecret(context, 'app secret');
  registerAppCredentials(appKey, value);
  if ((await session.secrets.get(name)).app_secret === value) {
    context.io.stdout.write(`profile "${name}" already has that app secret; nothing changed\n`);
    return;
  }
  // Under the renewal lock, as every renewal of the profile: the refresh token is read again there (another
  // process may have stored a rotated one), and what this renewal hands out is stored before the lock goes.
  const tokens = await session.profiles.withLock(name, async () => {
    const stored = await session.secrets.get(name);
    const refreshToken = session.settings.sources.refreshToken === 'env' ? (secrets.refreshToken as string) : (stored.refresh_token ?? (secrets.refreshToken as string));
    let fresh: TokenSet;
    try {
      fresh = await renewAccessToken({ tokenUrl: session.values.tokenUrl, app: { appKey, appSecret: value }, refreshToken });
    } catch (error) {
      throw appSecretRefused(error, name);
    }
    const renewedAt = Date.now();
    await writeSection(async () => {
      await session.secrets.set(name, {
        app_secret: value,
        ...(fresh.refreshToken !== refreshToken ? { refresh_token: fresh.refreshToken } : {}),
        access_token: encodeAccessToken({ accessToken: fresh.accessToken, expiresAt: fresh.expiresAt, renewedAt }, { appKey, refreshToken: fresh.refreshToken }),
      });
      await session.profiles.update(name, (current) =>
        current
          ? {
              ...baseState(current),
              accessTokenExpiresAt: new Date(fresh.expiresAt).toISOString(),
              lastRenewalAt: new Date(renewedAt).toISOString(),
              lastError: undefined,
              needsReauthorization: false,
              secretsVersion: newSecretsVersion(),
            }
          : current,
      );
    });
    return fresh;
  });
  const out = context.io.stdout;
  out.write(`✓ Dropbox renewed the access token with the new app secret (valid until ${new Date(tokens.expiresAt).toISOString()})\n`);
  out.write(`✓ the app secret of profile "${name}" is replaced in the ${session.secrets.kind} store\n`);
  out.write(
    session.state?.connectorId
      ? `the connector ${session.state.connectorId} on the service still holds the old app secret: \`${syncauthCommand(`refresh --profile ${name}`)}\` updates it now; a running daemon does at its next renewal\n`
      : 'a running daemon uses it at its next renewal\n',
  );
}

function appSecretRefused(error: unknown, profile: string): unknown {
  if (isOAuthError(error, 'OAUTH_INVALID_CLIENT')) {
    return new SyncauthError('SYNCAUTH_APP_SECRET_REFUSED', `the new app secret was not stored: Dropbox refused it (${error.error ?? 'invalid_client'})`, {
      exitCode: ExitCode.usage,
      hint: 'copy the app secret again from the App Console (Settings tab) of the app this profile uses; the profile keeps its current secret',
    });
  }
  if (isOAuthError(error) && error.kind === 'terminal') {
    return new SyncauthError(error.code, `the grant of profile "${profile}" is revoked, so the new app secret cannot be checked with it; nothing was stored`, {
      exitCode: ExitCode.authRequired,
      hint: `run \`${reauthorizeCommand(profile)}\` with the new app secret to authorize again`,
      cause: error,
    });
  }
  if (error instanceof SyncauthError && !(error instanceof ValidationError)) {
    return new SyncauthError(error.code, `could not check the new app secret with Dropbox: ${error.message}; nothing was stored`, {
      exitCode: error.exitCode,
      ...(error.hint ? { hint: error.hintSource } : {}),
      cause: error,
    });
  }
  return error;
}

// ---- profile rekey ----

/**
 * `syncauth profile rekey`: the encrypted file store, opened with SYNCAUTH_STORE_KEY, re-encrypted under a new
 * key read from a hidden prompt (asked twice) or one line of stdin.
 */
export async function profileRekey(context: CommandContext): Promise<void> {
  const v = context.settings.values;
  if (v.store !== 'file') {
    throw new ValidationError([{ field: SETTINGS.store.env, message: `profile rekey re-keys the encrypted file store, but this store is "${v.store}"; set ${SETTINGS.store.env}=file` }]);
  }
  const store = openFileSecretStore({
    configDir: v.configDir,
    storeKey: () => v.storeKey,
    // This command is the remedy the warning names.
    onWeakKey: () => undefined,
  });
  if (!existsSync(store.file)) {
    throw new SyncauthError('SYNCAUTH_NO_STORE', `there is no encrypted store at ${path.join(v.configDir, SECRET_FILE_NAME)}: nothing to re-key`, {
      hint: `check ${SETTINGS.configDir.env}; a store is made by \`${syncauthCommand('setup')}\` with ${SETTINGS.store.env}=file`,
    });
  }
  // The current key must open the store before a new one is asked for.
  await store.listProfiles();
  const newKey = await readNewSecret(context, 'store key', { confirm: true });
  registerSecrets(newKey);
  const profiles = await writeSection(() => store.rekey(newKey));
  const out = context.io.stdout;
  out.write(`✓ ${store.file} is re-encrypted with the new key (${counted(profiles.length, 'profile')}); the old key no longer opens it\n`);
  out.write(
    `set ${SETTINGS.storeKey.env} to the new key wherever syncauth uses this store, and restart a running daemon with it: ` +
      'it cannot read the store with the old key\n',
  );
}

// ---- shared ----

/**
 * The new value of a secret: from a hidden prompt on a terminal, else the first line of stdin. Never from argv.
 * A terminal on stdin without one on stderr cannot hide what is typed, so it is refused rather than read.
 */
async function readNewSecret(context: CommandContext, label: string, options: { confirm?: boolean } = {}): Promise<string> {
  const field = `new ${label}`;
  const prompter = context.factory.prompter;
  if (prompter.interactive(context.stdin)) {
    const value = await prompter.secret(`New ${label}`);
    if (options.confirm && (await prompter.secret(`The new ${label} again`)) !== value) {
      throw new ValidationError([{ field, message: 'the two entries differ' }]);
    }
    return value;
  }
  if ((context.stdin as NodeJS.ReadStream).isTTY) {
    throw new ValidationError([{ field, message: 'stdin is a terminal but stderr is not, so it cannot be asked with hidden input; pipe it on stdin' }]);
  }
  const line = await prompter.readLine(context.stdin);
  if (!line) throw new ValidationError([{ field, message: 'expected it as one line on stdin (or run in a terminal to be asked)' }]);
  return line;
}

async function bumpSecretsVersion(session: ProfileSession): Promise<void> {
  await session.profiles.update(session.name, (current) => (current ? { ...baseState(current), secretsVersion: newSecretsVersion() } : current));
}

/** The profile's state; a name with none is a typo or a profile that was never set up. */
async function requireState(session: ProfileSession): Promise<ProfileState> {
  if (session.state) return session.state;
  throw await noSuchProfile(session);
}

/** The profile has a state or (in a store that is per profile) stored secrets. */
async function requireProfile(session: ProfileSession): Promise<void> {
  if (session.state) return;
  if (session.secrets.writable && Object.keys(await session.secrets.get(session.name)).length > 0) return;
  throw await noSuchProfile(session);
}

async function noSuchProfile(session: ProfileSession): Promise<SyncauthError> {
  const known = new Set(await session.profiles.names());
  if (session.secrets.writable) for (const name of await session.secrets.listProfiles().catch(() => [])) known.add(name);
  const names = [...known].sort();
  return new SyncauthError('SYNCAUTH_NO_PROFILE', `there is no profile "${session.name}"; nothing was changed`, {
    exitCode: ExitCode.error,
    hint: names.length > 0 ? `the existing profiles are: ${names.join(', ')}; name one with --profile` : `there are no profiles yet: run \`${syncauthCommand('setup')}\` first`,
  });
}
