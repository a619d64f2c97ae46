// `syncauth setup`: from nothing to a working connector. Everything is gathered and checked before the browser
// opens, and nothing is written until the grant is checked. Then the secrets and the profile's state are
// written together, and only then is the service asked for the connector and the workflow: Ctrl-C (which
// abandons every wait at once and never cuts a write in half) leaves either nothing, or a profile that says
// setup is unfinished and that `syncauth refresh` completes; never secrets without their state.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ExitCode, SyncauthError, ValidationError, type FieldIssue } from '../../errors.js';
import { howToSet } from '../../config.js';
import { isKeychainUnavailable, MIN_STORE_KEY_LENGTH, SECRET_FILE_NAME, openSecretStore, type FileSecretStore } from '../../credentials/index.js';
import { isServiceError } from '../../service/errors.js';
import {
  checkAccessTokenShape, checkGrantedScopes, createAuthorizationRequest, isOAuthError, listFolder, probeAuthorizePage, renewAccessToken,
  SCOPES_FOR_ACCESS, type TokenSet,
} from '../../oauth/index.js';
import { SCHEDULE_CRON, Uuid } from '../../service/models.js';
import { dropboxApiPath, dropboxRemoteUrlProblem } from '../../service/source-configs.js';
import { defaultConnectorName } from '../../sync/reconcile.js';
import { baseState } from '../../sync/renew.js';
import { ServiceClient } from '../../service/client.js';
import type { ConnectionCheck, SourceConnectorInformation } from '../../service/models.js';
import { checkFailure, runConnectionCheck, type CheckOutcome } from './source.js';
import { authorizeInteractively, dropboxCredentialIssues } from '../authorization.js';
import type { CommandContext } from '../context.js';
import { interruptSignal, writeSection } from '../interrupt.js';
import { commit, type Gathered } from '../setup/commit.js';
import { configFileOf, recordProfileChoices } from '../../profile/config-file.js';
import {
  connectorDecision, formatChanges, profileChanges, type Change, unadoptable, unconfirmedAdoption, unconfirmedChanges,
} from '../setup/changes.js';
import { chooseWorkflow, createChosenWorkflow, type WorkflowChoice } from '../setup/workflow-choice.js';
import { counted, printJson, warn } from '../output.js';
import { hiddenTail } from '../prompt.js';
import { syncauthCommand } from '../../profile/name.js';
import { openSession, readSecrets, type ProfileSession } from '../session.js';

export interface SetupOptions {
  /** `--no-check` sets this false: skip the service's connection check of the connector. */
  check?: boolean;
  browser?: boolean;
  open?: boolean;
  yes?: boolean;
  timeout?: string;
  /** `--no-workflow` sets this false: the connector alone, no workflow question, and a re-run drops the profile's. */
  workflow?: boolean;
  /** `--adopt`: take over a connector of the configured name that is not provably this profile's. */
  adopt?: boolean;
}

function checklist(session: ProfileSession, paste: boolean): string {
  const v = session.values;
  const scopes = [...SCOPES_FOR_ACCESS[v.access], 'files.metadata.read'];
  const folder = v.remoteUrl && !dropboxRemoteUrlProblem(v.remoteUrl) ? dropboxApiPath(v.remoteUrl).slice(1) : '<subfolder>';
  return [
    'Before you start, have a Dropbox app ready in the Dropbox App Console (https://www.dropbox.com/developers/apps):',
    '  1. "Create app" (or open the app you have); any name. Its Settings tab shows the app key and app secret setup asks for.',
    '  2. Scoped access, access type "App folder" (chosen when the app is made: an app made otherwise needs a new app).',
    `  3. Permissions tab: tick ${scopes.join(', ')} and click Submit (files.metadata.read lets syncauth check the folder).`,
    paste
      ? '  4. No redirect URI is needed: you will paste the code Dropbox shows.'
      : `  4. Settings tab, OAuth 2, Redirect URIs: add exactly ${v.redirectUri} (localhost and 127.0.0.1 are different URIs).`,
    ...(v.publicUrl ? [`     For the daemon's re-authorization page (--public-url): add ${v.publicUrl}/reauthorize/callback to the Redirect URIs too.`] : []),
    `  5. In Dropbox, create the folder Apps/<your app folder>/${folder}: the service cannot read the app folder itself.`,
    "  The service's API key comes from the service's UI, API keys, in the workspace the connector belongs to.",
    '  Changing permissions later means running setup again: a grant keeps the permissions it was made with.',
    '',
  ].join('\n');
}

async function gather(session: ProfileSession, context: CommandContext, options: SetupOptions): Promise<Gathered> {
  const v = session.values;
  // Reading the store first also proves it works: finding out after the browser step would waste the grant.
  const prompter = context.factory.prompter;
  const interactive = !options.yes && prompter.interactive(context.stdin);
  const secrets = await readSecretsOrSwitch(session, context, interactive);
  const issues: FieldIssue[] = [];
  const ask = async (field: string, have: string | undefined, question: string, secret: boolean, check?: (value: string) => string | undefined): Promise<string | undefined> => {
    if (have) return have;
    if (!interactive) {
      issues.push({ field, message: `is required${secret ? ' (secrets come from the environment, a .env file or a prompt, never from flags)' : ''}` });
      return undefined;
    }
    return secret ? prompter.secret(question) : prompter.text(question, check ? { validate: check } : {});
  };
  const urlCheck = (value: string) => (/^https?:\/\/[^\s/]+/.test(value) ? undefined : 'an http(s) URL, like https://platform.example.com');
  const { stderr } = context.io;
  let baseUrl = await ask(howToSet('baseUrl'), v.baseUrl, "The ingestion service's base URL", false, urlCheck);
  let apiKey = await ask('SYNCAUTH_API_KEY', secrets.apiKey, 'Service API key (hidden)', true);
  // What was just typed is checked at once, and only a refused answer is asked again: finding a wrong API key
  // after every other question would mean typing them all again.
  if (interactive && baseUrl && apiKey && (!v.baseUrl || !secrets.apiKey)) {
    for (let tries = 1; ; tries += 1) {
      const problem = await serviceProblem(baseUrl, apiKey, v.apiKeyHeader);
      if (!problem) {
        stderr.write(`  ✓ the service at ${new URL(baseUrl).host} accepts the API key\n`);
        break;
      }
      stderr.write(`! ${problem.message}\n`);
      // Past the tries, or a value that was not typed: the check before the browser says what to do, and stops.
      if (tries >= ANSWER_TRIES) break;
      if (problem.field === 'apiKey' && !secrets.apiKey) apiKey = await prompter.secret('Service API key (hidden)');
      else if (problem.field === 'baseUrl' && !v.baseUrl) baseUrl = await prompter.text("The ingestion service's base URL", { validate: urlCheck });
      else break;
    }
  }
  let appKey = await ask('SYNCAUTH_APP_KEY', secrets.appKey, 'Dropbox app key (hidden)', true);
  if (appKey && !secrets.appKey) {
    for (let tries = 1; ; tries += 1) {
      // Typed hidden, a typo cannot be seen: its end can, to compare with the App Console.
      stderr.write(`  app key: ${hiddenTail(appKey)}\n`);
      if (!interactive || tries >= ANSWER_TRIES || !(await appKeyUnknown(v.authorizeUrl, appKey))) break;
      stderr.write('! Dropbox does not know this app key (its authorize page answers "Invalid client_id"): copy the App key from the app\'s Settings tab\n');
      appKey = await prompter.secret('Dropbox app key (hidden)');
    }
  }
  const appSecret = await ask('SYNCAUTH_APP_SECRET', secrets.appSecret, 'Dropbox app secret (hidden)', true);
  const remoteUrl = await ask(howToSet('remoteUrl'), v.remoteUrl, 'Subfolder to read, as dropbox://<subfolder>', false, (value) => dropboxRemoteUrlProblem(value) ?? undefined);
  if (issues.length) throw new ValidationError(issues, { hint: `run \`${syncauthCommand('setup')}\` in a terminal to be asked, or see .env.example` });

  if (remoteUrl) {
    const problem = dropboxRemoteUrlProblem(remoteUrl);
    if (problem) issues.push({ field: howToSet('remoteUrl'), message: problem });
  }
  // --no-workflow drops a workflow the profile remembers; one named now as well is a contradiction.
  const sources = session.settings.sources;
  const noWorkflow = options.workflow === false;
  if (noWorkflow && v.workflowId && sources.workflowId !== 'profile') {
    issues.push({ field: '--no-workflow', message: `contradicts ${howToSet('workflowId')}: give one or the other` });
  }
  if (noWorkflow && v.schedule && sources.schedule !== 'profile') {
    issues.push({ field: '--no-workflow', message: `contradicts ${howToSet('schedule')}: a schedule needs a workflow` });
  }
  const workflowId = noWorkflow ? undefined : v.workflowId;
  const schedule = noWorkflow ? undefined : v.schedule;
  if (workflowId && !Uuid.safeParse(workflowId).success) issues.push({ field: howToSet('workflowId'), message: `must be a UUID, got "${workflowId}"` });
  if (schedule && !workflowId) issues.push({ field: howToSet('schedule'), message: `a schedule needs a workflow to apply to: set ${howToSet('workflowId')} too` });
  if (baseUrl) {
    try {
      // The client refuses base URLs it cannot use (credentials, query) and API keys no header can carry;
      // find out before the browser opens, naming the setting to change.
      await new ServiceClient({ baseUrl, apiKey: apiKey ?? 'x', apiKeyHeader: v.apiKeyHeader }).close();
    } catch (error) {
      const fieldOf: Record<string, string> = { baseUrl: howToSet('baseUrl'), apiKey: 'SYNCAUTH_API_KEY', apiKeyHeader: howToSet('apiKeyHeader') };
      if (error instanceof ValidationError) {
        for (const issue of error.issues) issues.push({ field: fieldOf[issue.field] ?? howToSet('baseUrl'), message: issue.message });
      } else {
        issues.push({ field: howToSet('baseUrl'), message: (error as Error).message });
      }
    }
  }
  issues.push(...dropboxCredentialIssues({ appKey, appSecret, refreshToken: v.refreshToken }));
  const keyIssue = newFileStoreKeyIssue(session);
  if (keyIssue) issues.push(keyIssue);
  // Only a grant handed in (SYNCAUTH_REFRESH_TOKEN in the environment or .env) skips the browser. A stored one
  // is not reused: it may be revoked or lack permissions ticked since, and setup is how to authorize again.
  const givenRefreshToken = v.refreshToken;
  if (session.secrets.kind === 'env' && !givenRefreshToken) {
    issues.push({
      field: 'SYNCAUTH_STORE',
      message: 'is env, which is read-only: the new grant would have nowhere to be kept. Use keychain or file, or set SYNCAUTH_REFRESH_TOKEN to use an existing grant',
    });
  }
  if (issues.length) throw new ValidationError(issues);
  return {
    baseUrl: baseUrl as string,
    apiKey: apiKey as string,
    appKey: appKey as string,
    appSecret: appSecret as string,
    ...(givenRefreshToken ? { refreshToken: givenRefreshToken } : {}),
    remoteUrl: remoteUrl as string,
    connectorName: v.connectorName ?? defaultConnectorName(remoteUrl as string),
    ...(workflowId ? { workflowId } : {}),
    ...(schedule ? { schedule } : {}),
  };
}

/** Tries of a refused answer (the API key, the base URL, the app key) in all, before setup stops on it. */
const ANSWER_TRIES = 3;

/**
 * The service's answer to one cheap authenticated read with `apiKey`, as a problem with the value to ask again;
 * undefined when it answers, or fails in a way no other answer would fix (left to the check before the browser).
 */
async function serviceProblem(baseUrl: string, apiKey: string, apiKeyHeader: string): Promise<{ field: 'baseUrl' | 'apiKey'; message: string } | undefined> {
  let client: ServiceClient;
  try {
    client = new ServiceClient({
      baseUrl, apiKey, apiKeyHeader,
      retry: { retries: 0, baseDelayMs: 250, maxDelayMs: 1_000 },
      timeouts: { connectMs: 5_000, headersMs: 10_000, totalMs: 10_000 },
    });
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    const issue = error.issues[0];
    return { field: issue?.field === 'apiKey' ? 'apiKey' : 'baseUrl', message: `${issue?.field === 'apiKey' ? 'the API key' : 'the base URL'} ${issue?.message ?? error.message}` };
  }
  const host = new URL(baseUrl).host;
  const cancel = () => client.cancel();
  interruptSignal.addEventListener('abort', cancel, { once: true });
  try {
    await client.listSources();
    return undefined;
  } catch (error) {
    interruptSignal.throwIfAborted();
    if (!isServiceError(error)) throw error;
    if (error.code === 'SERVICE_UNAUTHORIZED' || error.code === 'SERVICE_FORBIDDEN') {
      return { field: 'apiKey', message: `the service at ${host} refused the API key (${error.status ?? error.code}): use an API key of the workspace to connect (the service's UI, API keys)` };
    }
    if (error.code === 'SERVICE_NETWORK') return { field: 'baseUrl', message: `cannot reach the service at ${host}: ${error.message}` };
    if (error.code === 'SERVICE_NOT_FOUND') return { field: 'baseUrl', message: `${host} does not answer like the ingestion service (404 for its list of source connectors)` };
    return undefined;
  } finally {
    interruptSignal.removeEventListener('abort', cancel);
    await client.close();
  }
}

/** Whether Dropbox's authorize page refuses `appKey` outright; a page that does not answer is no reason to ask again. */
async function appKeyUnknown(authorizeUrl: string, appKey: string): Promise<boolean> {
  const { url } = createAuthorizationRequest({ authorizeUrl, appKey });
  return (await probeAuthorizePage(url, { signal: interruptSignal, timeoutMs: 5_000 })).kind === 'unknown-app-key';
}

/**
 * Reads the store once before the browser step, which also proves it works. A keychain out of reach (a headless
 * Linux host with no Secret Service) stops setup with both ways out; at a terminal setup offers the encrypted
 * file store instead, asking for its key, so the run can go on.
 */
async function readSecretsOrSwitch(session: ProfileSession, context: CommandContext, interactive: boolean) {
  try {
    return await readSecrets(session, { readStore: session.secrets.writable });
  } catch (error) {
    if (!interactive || !isKeychainUnavailable(error)) throw error;
    const { configDir } = session.values;
    const file = path.join(configDir, SECRET_FILE_NAME);
    context.io.stderr.write(`! ${error.message}\n`);
    const exists = existsSync(file);
    const switchNow = await context.factory.prompter.confirm(
      exists
        ? `Use the encrypted file store already in ${configDir} for profile "${session.name}" instead?`
        : `Keep profile "${session.name}"'s secrets in an encrypted file in ${configDir} instead?`,
      { initial: true },
    );
    if (!switchNow) throw error;
    const given = session.values.storeKey?.trim();
    const storeKey = given || await askNewStoreKey(exists, context);
    session.secrets = openSecretStore({
      kind: 'file', configDir, env: context.inputs.env, storeKey, onWarning: (message) => warn(context.io, message),
    });
    session.values.store = 'file';
    session.values.storeKey = storeKey;
    switchedStore.add(session.name);
    return readSecrets(session, { readStore: true });
  }
}

/** Profiles whose store setup switched to the file store in this run: the end says how later commands find it. */
const switchedStore = new Set<string>();

async function askNewStoreKey(exists: boolean, context: CommandContext): Promise<string> {
  const { secret } = context.factory.prompter;
  if (exists) return secret('The key of the encrypted file store (hidden)');
  const tooShort = (value: string) =>
    Array.from(value.trim()).length < MIN_STORE_KEY_LENGTH ? `at least ${MIN_STORE_KEY_LENGTH} characters; a long random value is best (openssl rand -base64 32)` : undefined;
  for (;;) {
    const key = await secret(`A key for the new encrypted file store, at least ${MIN_STORE_KEY_LENGTH} characters (hidden)`, { validate: tooShort });
    if (await secret('The same key again (hidden)') === key) return key;
    context.io.stderr.write('The two keys differ; once more.\n');
  }
}

/**
 * A new file store refuses a short key only when it is first written, after the browser step; say it now, in
 * the store's own words. An existing store keeps opening with its key (with a warning from the store).
 */
function newFileStoreKeyIssue(session: ProfileSession): FieldIssue | undefined {
  if (session.secrets.kind !== 'file') return undefined;
  const { file } = session.secrets as FileSecretStore;
  const key = session.values.storeKey?.trim();
  if (!key || existsSync(file) || Array.from(key).length >= MIN_STORE_KEY_LENGTH) return undefined;
  return {
    field: 'SYNCAUTH_STORE_KEY',
    message: `the key for the new store ${file} is shorter than ${MIN_STORE_KEY_LENGTH} characters; use a long random value such as the output of \`openssl rand -base64 32\``,
  };
}

/**
 * One cheap authenticated read (the workspace's dropbox connectors) and the workflow, before the browser opens:
 * a wrong URL, API key or workflow found after Allow would waste the grant. Few retries and short deadlines:
 * a person is waiting, and a service that does not answer now will not do better after the browser.
 */
async function checkService(
  session: ProfileSession,
  gathered: Gathered,
  then: (client: ServiceClient, sources: SourceConnectorInformation[]) => Promise<void>,
): Promise<void> {
  const host = new URL(gathered.baseUrl).host;
  const client = new ServiceClient({
    baseUrl: gathered.baseUrl,
    apiKey: gathered.apiKey,
    apiKeyHeader: session.values.apiKeyHeader,
    retry: { retries: 1, baseDelayMs: 250, maxDelayMs: 1_000 },
    timeouts: { connectMs: 5_000, headersMs: 10_000, totalMs: 15_000 },
  });
  const cancel = () => client.cancel();
  interruptSignal.addEventListener('abort', cancel, { once: true });
  if (interruptSignal.aborted) cancel();
  let step: 'key' | 'workflow' = 'key';
  let sources: SourceConnectorInformation[];
  try {
    try {
      // Every type: the service's connector names are unique across types.
      sources = await client.listSources();
      if (gathered.workflowId) {
        step = 'workflow';
        await client.getWorkflow(gathered.workflowId);
      }
    } catch (error) {
      interruptSignal.throwIfAborted();
      if (!isServiceError(error)) throw error;
      const header = session.values.apiKeyHeader;
      if (error.code === 'SERVICE_UNAUTHORIZED' || error.code === 'SERVICE_FORBIDDEN') {
        throw new SyncauthError('SYNCAUTH_API_KEY_REFUSED', `SYNCAUTH_API_KEY: the service at ${host} refused the API key (${error.status ?? error.code})`, {
          exitCode: ExitCode.authRequired,
          cause: error,
          hint: `set SYNCAUTH_API_KEY to an API key of the workspace to connect (the service's UI, API keys); it is sent in the header ${header} ` +
            `(${howToSet('apiKeyHeader')} changes that)`,
        });
      }
      if (step === 'workflow' && error.code === 'SERVICE_NOT_FOUND') {
        throw new SyncauthError('SYNCAUTH_WORKFLOW_NOT_FOUND', `${howToSet('workflowId')}: no workflow ${gathered.workflowId ?? ''} in this workspace`, {
          exitCode: ExitCode.usage,
          cause: error,
          hint: `list the workspace's workflows with \`${syncauthCommand('workflow list')}\`, or leave the workflow out to set up the connector alone; nothing was stored`,
        });
      }
      if (error.code === 'SERVICE_NETWORK') {
        throw new SyncauthError('SYNCAUTH_SERVICE_UNREACHABLE', `${howToSet('baseUrl')}: cannot reach the service at ${host}: ${error.message}`, {
          exitCode: ExitCode.error,
          cause: error,
          hint: 'check the URL (the service\'s address, like https://platform.example.com), the network and any proxy (HTTPS_PROXY, NO_PROXY); nothing was stored',
        });
      }
      if (step === 'key' && error.code === 'SERVICE_NOT_FOUND') {
        throw new SyncauthError('SYNCAUTH_SERVICE_NOT_FOUND', `${howToSet('baseUrl')}: ${host} does not answer like the ingestion service (404 for its list of source connectors)`, {
          exitCode: ExitCode.error,
          cause: error,
          hint: 'set it to the service\'s address, like https://platform.example.com (without a path other than /api/v1)',
        });
      }
      throw error;
    }
    await then(client, sources);
  } finally {
    interruptSignal.removeEventListener('abort', cancel);
    await client.close();
  }
}

/** The folders directly in the app folder, as the grant sees them; undefined when they cannot be listed. */
async function appFolderSubfolders(session: ProfileSession, tokens: TokenSet): Promise<string[] | undefined> {
  try {
    const listing = await listFolder({ apiUrl: session.values.dropboxApiUrl, accessToken: tokens.accessToken, path: '', signal: interruptSignal });
    return listing.entries.filter((entry) => entry.tag === 'folder').map((entry) => entry.name).sort();
  } catch {
    return undefined;
  }
}

/**
 * Checks what the grant allows against what the connector needs, before anything is stored. A folder that does
 * not exist is put to `reask` (at a terminal: the person names another, and the grant in hand is kept), which
 * answers the dropbox:// URL to check instead, or undefined to give up.
 */
async function verifyGrant(
  session: ProfileSession,
  tokens: TokenSet,
  remoteUrl: string,
  context: CommandContext,
  reask?: (problem: string) => Promise<string | undefined>,
): Promise<string[]> {
  const notes: string[] = [];
  const shape = checkAccessTokenShape(tokens.accessToken);
  if (shape) notes.push(shape);
  for (const warning of tokens.warnings) if (!notes.includes(warning)) notes.push(warning);
  // A renewal answer lists no scopes; only a fresh grant can be checked.
  if (tokens.scopes.length > 0) {
    const scopeCheck = checkGrantedScopes(tokens.scopes, session.values.access, syncauthCommand);
    if (scopeCheck.missing.length > 0) {
      throw new SyncauthError('SYNCAUTH_SCOPES_MISSING', `the grant lacks ${scopeCheck.missing.join(', ')}`, {
        exitCode: ExitCode.error,
        hint: scopeCheck.message ?? 'tick the permissions in the App Console, then run setup again',
      });
    }
  }
  if (tokens.scopes.length === 0 || tokens.scopes.includes('files.metadata.read')) {
    const folder = dropboxApiPath(remoteUrl);
    try {
      const listing = await listFolder({ apiUrl: session.values.dropboxApiUrl, accessToken: tokens.accessToken, path: folder, signal: interruptSignal });
      context.io.stderr.write(`✓ ${remoteUrl} is readable (${counted(listing.entries.length, 'entry', 'entries', listing.hasMore)})\n`);
    } catch (error) {
      if (isOAuthError(error, 'OAUTH_PATH_NOT_FOUND')) {
        const seen = await appFolderSubfolders(session, tokens);
        const problem = `the folder ${folder} does not exist in the app folder${seen === undefined ? '' : seen.length > 0 ? `; the folders setup can see there: ${seen.join(', ')}` : '; setup sees no folder there'}`;
        const other = reask ? await reask(problem) : undefined;
        if (other !== undefined) return verifyGrant(session, tokens, other, context, reask);
        throw new SyncauthError('SYNCAUTH_FOLDER_MISSING', problem, {
          exitCode: ExitCode.error,
          hint: `create it inside Dropbox/Apps/<your app folder>/ (the service cannot read the app folder's root), then run setup again`,
        });
      }
      if (isOAuthError(error, 'OAUTH_MISSING_SCOPE')) notes.push('could not check the folder: the grant lacks files.metadata.read');
      else throw error;
    }
  } else {
    notes.push(`could not check ${remoteUrl}: tick files.metadata.read in the App Console to let setup check it`);
  }
  return notes;
}

/**
 * A connector that already holds the configured name: this profile's is updated without a word; another's is
 * taken over only when the user says so (a question at a terminal, --adopt otherwise), before the browser step.
 */
async function decideConnector(
  session: ProfileSession,
  gathered: Gathered,
  sources: SourceConnectorInformation[],
  options: SetupOptions,
  interactive: boolean,
  context: CommandContext,
): Promise<void> {
  const decision = connectorDecision(sources, gathered, session.state);
  if (decision.kind !== 'foreign') return;
  const refusal = unadoptable(decision, gathered.connectorName);
  if (refusal) throw refusal;
  if (!options.adopt) {
    if (!interactive) throw unconfirmedAdoption(decision, gathered.connectorName);
    context.io.stderr.write(`! a source connector named "${gathered.connectorName}" (${decision.connector.id}) already exists and may not be this profile's: ${decision.reason}\n`);
    const take = await context.factory.prompter.confirm('Take it over? Its folder and credentials become this profile\'s (No: choose another name with --connector-name)', { initial: false });
    if (!take) {
      throw new SyncauthError('SYNCAUTH_CANCELLED', 'cancelled; nothing was written', {
        exitCode: ExitCode.error,
        hint: 'choose another name with --connector-name, or run again with --adopt',
      });
    }
  }
  gathered.adoptConnectorId = decision.connector.id;
}

/**
 * On an existing profile, says what this run changes and asks (--yes accepts; without a terminal the run is
 * refused, naming the changes). A run that changes only the grant, the usual re-authorization, asks nothing.
 */
async function confirmChanges(session: ProfileSession, gathered: Gathered, options: SetupOptions, interactive: boolean, context: CommandContext): Promise<string | undefined> {
  const { state } = session;
  if (!state) return undefined;
  const v = session.values;
  const next = {
    baseUrl: gathered.baseUrl, apiKeyHeader: v.apiKeyHeader, remoteUrl: gathered.remoteUrl, recursive: v.recursive, access: v.access,
    connectorName: gathered.connectorName, workflowId: gathered.workflowId, schedule: gathered.schedule,
    authorizeUrl: v.authorizeUrl, tokenUrl: v.tokenUrl, dropboxApiUrl: v.dropboxApiUrl, redirectUri: v.redirectUri,
  };
  const stored = session.secrets.writable ? await session.secrets.get(session.name) : {};
  const changes = profileChanges(state, next, stored, gathered);
  const { io } = context;
  if (changes.length === 0) {
    io.stderr.write(`Profile "${session.name}" exists; its settings stay as they are and the new authorization replaces its grant.\n`);
    return undefined;
  }
  io.stderr.write(`${formatChanges(session.name, changes)}\n`);
  if (!options.yes) {
    if (!interactive) throw unconfirmedChanges(session.name, changes);
    if (!(await context.factory.prompter.confirm(`Apply these changes to profile "${session.name}"?`, { initial: false }))) {
      throw new SyncauthError('SYNCAUTH_CANCELLED', 'cancelled; nothing was written', { exitCode: ExitCode.error });
    }
  }
  // Settings alone (a schedule, a folder, the service's URL or key) are applied with the grant the profile has:
  // sending the person through the browser again would win nothing. A change the grant depends on (the app,
  // the access, Dropbox's endpoints) needs a new one.
  return changes.some((c) => needsNewGrant(c)) ? undefined : stored.refresh_token;
}

/** A change the profile's grant depends on: the app it was made for, what it may access, where it came from. */
function needsNewGrant(change: Change): boolean {
  return ['access', 'Dropbox app key', 'authorize URL', 'token URL'].includes(change.what);
}

/** How many other folders setup asks for, once the one given is found missing. */
const FOLDER_TRIES = 3;

export async function setup(context: CommandContext, options: SetupOptions): Promise<void> {
  const session = await openSession(context);
  const paste = options.browser === false;
  const timeoutSeconds = Number(options.timeout ?? '300');
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1) {
    throw new ValidationError([{ field: '--timeout', message: 'must be whole seconds, at least 1' }]);
  }
  const { io } = context;
  io.stderr.write(checklist(session, paste));
  const gathered = await gather(session, context, options);
  const interactive = !options.yes && context.factory.prompter.interactive(context.stdin);
  let workflowChoice: WorkflowChoice | undefined;
  // Everything that can be checked without the person, before the browser opens (or the URL is shown), and
  // every question whose answer changes what is written.
  await checkService(session, gathered, async (client, sources) => {
    await decideConnector(session, gathered, sources, options, interactive, context);
    if (interactive && options.workflow !== false && !gathered.workflowId) {
      workflowChoice = await chooseWorkflow(client, { connectorName: gathered.connectorName, prompter: context.factory.prompter });
      if (workflowChoice.kind === 'existing') {
        gathered.workflowId = workflowChoice.id;
        if (workflowChoice.schedule) gathered.schedule = workflowChoice.schedule;
      }
    }
  });
  const storedGrant = await confirmChanges(session, gathered, options, interactive, context);

  let tokens: TokenSet | undefined;
  if (gathered.refreshToken) {
    io.stderr.write('Using the existing grant from SYNCAUTH_REFRESH_TOKEN; no browser needed.\n');
    tokens = await renewAccessToken({
      tokenUrl: session.values.tokenUrl,
      app: { appKey: gathered.appKey, appSecret: gathered.appSecret },
      refreshToken: gathered.refreshToken,
      signal: interruptSignal,
    });
  } else if (storedGrant) {
    try {
      tokens = await renewAccessToken({
        tokenUrl: session.values.tokenUrl,
        app: { appKey: gathered.appKey, appSecret: gathered.appSecret },
        refreshToken: storedGrant,
        signal: interruptSignal,
      });
      io.stderr.write(`Only settings change: applying them with the profile's grant; no browser needed.\n`);
    } catch (error) {
      // A grant revoked since, or refused with these credentials: authorizing again is what setup is for.
      if (!isOAuthError(error) || error.kind !== 'terminal') throw error;
      io.stderr.write(`! the profile's grant no longer works (${error.message}); authorize again:\n`);
    }
  }
  if (!tokens) {
    if (!paste && !context.factory.prompter.interactive(context.stdin)) {
      // Nobody may be watching: say what the wait is for before it starts, and how to do without it.
      io.stderr.write(
        `No terminal here: setup needs one browser round at Dropbox and waits up to ${timeoutSeconds} s for the browser to come back to ${session.values.redirectUri}. ` +
          `To set up without a browser here, run \`${syncauthCommand('authorize')}\` where there is one and hand its grant in as SYNCAUTH_REFRESH_TOKEN.\n`,
      );
    }
    tokens = await authorizeInteractively({
      settings: session.values,
      appKey: gathered.appKey,
      appSecret: gathered.appSecret,
      paste,
      openBrowser: options.open !== false,
      timeoutMs: timeoutSeconds * 1000,
      io,
      stdin: context.stdin,
      signal: context.factory.signals.interrupted,
      interactive: !options.yes && context.factory.prompter.interactive(context.stdin),
      prompter: context.factory.prompter,
      // Typed again after Dropbox refused the first one: that is the secret to store and give the connector.
      onAppSecret: (appSecret) => {
        gathered.appSecret = appSecret;
      },
    });
  }
  io.stderr.write(`✓ authorized${tokens.accountId ? ` Dropbox account ${tokens.accountId}` : ''}; access token valid until ${new Date(tokens.expiresAt).toISOString()}\n`);
  // A folder that is not there is asked again at a terminal: the grant just obtained is kept, not thrown away.
  const firstUrl = gathered.remoteUrl;
  let asked = 0;
  const reask = interactive
    ? async (problem: string): Promise<string | undefined> => {
        io.stderr.write(`✗ ${problem}\n`);
        if (asked++ >= FOLDER_TRIES) return undefined;
        const answer = (await context.factory.prompter.text('Subfolder to read, as dropbox://<subfolder>', { validate: (value) => dropboxRemoteUrlProblem(value) ?? undefined })).trim();
        if (dropboxRemoteUrlProblem(answer)) return undefined;
        gathered.remoteUrl = answer;
        return answer;
      }
    : undefined;
  const notes = await verifyGrant(session, tokens, gathered.remoteUrl, context, reask);
  for (const note of notes) io.stderr.write(`! ${note}\n`);
  if (gathered.remoteUrl !== firstUrl && session.values.connectorName === undefined) {
    // The connector's default name follows the folder; the one of that name is decided about as before the browser.
    gathered.connectorName = defaultConnectorName(gathered.remoteUrl);
    await checkService(session, gathered, (_client, sources) => decideConnector(session, gathered, sources, options, interactive, context));
  }

  const { result } = await commit(session, gathered, tokens);
  // Later commands open the profile with the store its secrets went to, without SYNCAUTH_STORE.
  await recordProfileChoices(session.values.configDir, session.name, { store: session.secrets.kind });
  if (workflowChoice?.kind === 'create') {
    // A workflow made for this connector, once the connector exists; the profile records it like a chosen one.
    result.workflow = await withServiceClient(gathered, session, (client) => createChosenWorkflow(client, workflowChoice as Extract<WorkflowChoice, { kind: 'create' }>, result.connector.id));
    result.workflowAction = 'created';
    const { id: createdId } = result.workflow;
    const createdSchedule = workflowChoice.schedule;
    await writeSection(() => session.profiles.update(session.name, (current) => (current
      ? { ...baseState(current), workflowId: createdId, ...(createdSchedule ? { schedule: createdSchedule } : {}) }
      : current)));
  }
  const nextCommand = syncauthCommand(result.workflow ? `workflow run ${result.workflow.id}` : `status --profile ${session.name}`);
  if (context.json) {
    const check = options.check === false ? undefined : await connectionCheck(gathered, session, result.connector.id, context);
    printJson(io, {
      check: check ? { id: check.check.id, status: check.check.status, reason: check.check.reason ?? null } : null,
      next: nextCommand,
      profile: session.name,
      store: session.secrets.kind,
      connector: { id: result.connector.id, name: result.connector.name, action: result.action },
      workflow: result.workflow ? { id: result.workflow.id, action: result.workflowAction, schedule: result.workflow.schedule ?? null } : null,
      accessTokenExpiresAt: new Date(tokens.expiresAt).toISOString(),
      notes,
    });
    if (check && !check.ok) throw setupCheckFailure(session, result.connector.id, check.check);
    return;
  }
  // What was made is said before the connection check of it starts (and says so on stderr).
  const made = [
    `✓ secrets ${session.secrets.writable ? `stored in the ${session.secrets.kind} store` : 'read from the environment (nothing stored)'} for profile "${session.name}"`,
    `✓ source connector ${result.connector.name} ${result.action} (${result.connector.id})`,
  ];
  if (result.workflow) {
    const cron = result.workflow.schedule?.crontab_entries.map((e) => e.cron_expression).join(', ');
    const chosen = gathered.schedule ?? (workflowChoice?.kind === 'create' ? workflowChoice.schedule : undefined);
    const schedule = chosen ? `, schedule ${chosen} (${SCHEDULE_CRON[chosen]})` : cron ? `, schedule ${cron}` : '';
    made.push(`✓ workflow ${result.workflow.name} (${result.workflow.id}) ${result.workflowAction === 'created' ? 'created; it reads' : 'reads'} from it${schedule}`);
  }
  io.stdout.write(`${made.join('\n')}\n`);
  const check = options.check === false ? undefined : await connectionCheck(gathered, session, result.connector.id, context);
  const lines: string[] = [];
  if (check?.ok) lines.push(`✓ the service's connection check of the connector passed`);
  if (check && !check.ok) {
    lines.push(`✗ the service's connection check of the connector failed: ${check.check.reason ?? check.check.status}`);
    io.stdout.write(`${lines.join('\n')}\n`);
    throw setupCheckFailure(session, result.connector.id, check.check);
  }
  if (switchedStore.has(session.name)) {
    lines.push(`! the secrets are in the encrypted file store, recorded in ${configFileOf(session.values.configDir)}: later commands ask for its key at a terminal; elsewhere (the daemon's service) set SYNCAUTH_STORE_KEY`);
  }
  const publicUrl = context.settings.values.publicUrl;
  if (publicUrl) {
    lines.push(`→ for the daemon's re-authorization page, add ${publicUrl}/reauthorize/callback to the app's redirect URIs in the Dropbox App Console (Settings tab, OAuth 2)`);
  }
  lines.push(
    '',
    `Next: ${result.workflow ? `run the workflow now with \`${nextCommand}\`` : `check the profile with \`${nextCommand}\``}; keep the token fresh with \`${syncauthCommand(`daemon --profile ${session.name}`)}\`.`,
  );
  io.stdout.write(`${lines.join('\n')}\n`);
}

/**
 * The service's connection check of the connector setup made: proof it can read the folder with the stored
 * grant. Ctrl-C abandons the wait; what setup made stays, complete.
 */
async function connectionCheck(gathered: Gathered, session: ProfileSession, connectorId: string, context: CommandContext): Promise<CheckOutcome> {
  return withServiceClient(gathered, session, (client) => runConnectionCheck(client, connectorId, context.io));
}

/** A service client for one step after the grant; Ctrl-C abandons its calls at once. */
async function withServiceClient<T>(gathered: Gathered, session: ProfileSession, fn: (client: ServiceClient) => Promise<T>): Promise<T> {
  const client = new ServiceClient({ baseUrl: gathered.baseUrl, apiKey: gathered.apiKey, apiKeyHeader: session.values.apiKeyHeader });
  const cancel = () => client.cancel();
  interruptSignal.addEventListener('abort', cancel, { once: true });
  if (interruptSignal.aborted) cancel();
  try {
    return await fn(client);
  } finally {
    interruptSignal.removeEventListener('abort', cancel);
    await client.close();
  }
}

/** A failed check after a complete setup: say what was kept and how to try again once the cause is fixed. */
function setupCheckFailure(session: ProfileSession, connectorId: string, check: ConnectionCheck): SyncauthError {
  const failure = checkFailure(connectorId, check);
  return new SyncauthError(failure.code, failure.message, {
    exitCode: ExitCode.error,
    hint: `setup kept the profile "${session.name}" and the connector; fix the cause (the folder, the app's permissions or the grant), ` +
      `then run \`${syncauthCommand(`source check ${connectorId}`)}\``,
  });
}
