// The one step of `setup` that writes: the grant and the profile's state, then the connector and the workflow.
// Up to here nothing is written; from here on a stop leaves a profile `refresh` can finish.
import { existsSync } from 'node:fs';
import { SyncauthError } from '../../errors.js';
import { newSecretsVersion, type ProfileState } from '../../profile/index.js';
import { syncauthCommand } from '../../profile/name.js';
import type { TokenSet } from '../../oauth/index.js';
import type { Schedule } from '../../service/models.js';
import { ServiceClient } from '../../service/client.js';
import { syncConnector, type ReconcileResult } from '../../sync/reconcile.js';
import { encodeAccessToken } from '../../sync/token-cache.js';
import { failpoint } from '../failpoint.js';
import { InterruptedError, interruptSignal, writeSection } from '../interrupt.js';
import { clearJournal, withSetupLock, writeJournal } from '../../sync/setup-journal.js';
import type { ProfileSession } from '../session.js';

/** What setup gathered and checked before the browser step. */
export interface Gathered {
  baseUrl: string;
  apiKey: string;
  appKey: string;
  appSecret: string;
  refreshToken?: string;
  remoteUrl: string;
  connectorName: string;
  workflowId?: string;
  schedule?: Schedule;
  /** A connector of the configured name that is not provably this profile's, which the user chose to take over. */
  adoptConnectorId?: string;
}

export async function commit(session: ProfileSession, gathered: Gathered, tokens: TokenSet): Promise<{ result: ReconcileResult }> {
  const v = session.values;
  const profileFields = {
    baseUrl: gathered.baseUrl,
    apiKeyHeader: v.apiKeyHeader,
    remoteUrl: gathered.remoteUrl,
    recursive: v.recursive,
    access: v.access,
    connectorName: gathered.connectorName,
    ...(gathered.workflowId ? { workflowId: gathered.workflowId } : {}),
    ...(gathered.schedule ? { schedule: gathered.schedule } : {}),
    authorizeUrl: v.authorizeUrl,
    tokenUrl: v.tokenUrl,
    dropboxApiUrl: v.dropboxApiUrl,
    redirectUri: v.redirectUri,
    // The account that granted access: re-authorization later accepts only a grant of the same one.
    ...(tokens.accountId ? { accountId: tokens.accountId } : {}),
    accessTokenExpiresAt: new Date(tokens.expiresAt).toISOString(),
    lastRenewalAt: new Date().toISOString(),
    needsReauthorization: false,
    secretsVersion: newSecretsVersion(),
  };
  // A connector of another name is not this one; reconcile is not given its id either.
  // One the user chose to take over counts as known: reconcile updates it instead of refusing its name.
  const knownConnector = (current: ProfileState | undefined) =>
    (gathered.adoptConnectorId
      ? { connectorId: gathered.adoptConnectorId }
      : current?.connectorId && current.connectorName === gathered.connectorName ? { connectorId: current.connectorId } : {});
  // A settings-only re-run renews with the stored grant, and a renewal names no account: the recorded one stays.
  const keptAccount = (current: ProfileState | undefined) =>
    (!tokens.accountId && current?.accountId ? { accountId: current.accountId } : {});
  const failure = (code: string, message: string) => ({ code, message, at: new Date().toISOString(), terminal: false });
  const finishHint = `the grant is stored; run \`${syncauthCommand(`refresh --profile ${session.name}`)}\` to finish`;

  // Up to here nothing is written, and Ctrl-C leaves nothing.
  interruptSignal.throwIfAborted();
  // The grant is kept from here on (a code cannot be used twice), with the state that names it; that state
  // says setup is unfinished until the connector is in place, so a stop (an error, Ctrl-C, a crash) leaves
  // a profile `refresh` can finish.
  const { profiles, name } = session;
  const unfinished = (current: ProfileState | undefined) => ({
    ...profileFields,
    ...keptAccount(current),
    ...knownConnector(current),
    lastError: failure('SYNCAUTH_SETUP_UNFINISHED', `setup stopped before the source connector was created or updated; \`syncauth refresh --profile ${name}\` finishes it`),
  });
  await writeSection(async () => {
    if (!session.secrets.writable) {
      await profiles.update(name, unfinished, { resetCorrupt: true });
      return;
    }
    // Two stores, two writes: the record in sync/setup-journal.ts lets the next command finish or undo them after a kill -9.
    await withSetupLock(profiles, name, async () => {
      const hadState = existsSync(profiles.fileOf(name));
      const current = await profiles.read(name).catch(() => undefined);
      const state = unfinished(current);
      await writeJournal(profiles, name, { accessTokenExpiresAt: tokens.expiresAt, hadState, state });
      await failpoint('setup.journal-written');
      await session.secrets.set(name, {
        app_key: gathered.appKey,
        app_secret: gathered.appSecret,
        refresh_token: tokens.refreshToken,
        api_key: gathered.apiKey,
        // Written last by every store: finding it proves the rest of the grant landed (see sync/setup-journal.ts).
        access_token: encodeAccessToken(
          { accessToken: tokens.accessToken, expiresAt: tokens.expiresAt, renewedAt: Date.now() },
          { appKey: gathered.appKey, refreshToken: tokens.refreshToken },
        ),
      });
      await failpoint('setup.secrets-stored');
      await profiles.update(name, () => state, { resetCorrupt: true });
      await clearJournal(profiles, name);
      // The marker has done its work. Left in place it would be a cached token that `refresh` takes as a renewal
      // of a moment ago; a kill before this line leaves just that, which is harmless.
      await session.secrets.set(name, { access_token: '' });
    });
  });
  await failpoint('setup.state-written');

  const client = new ServiceClient({ baseUrl: gathered.baseUrl, apiKey: gathered.apiKey, apiKeyHeader: v.apiKeyHeader });
  // Ctrl-C gives up on the service at once: the state above already says where setup stopped.
  const cancel = () => client.cancel();
  interruptSignal.addEventListener('abort', cancel, { once: true });
  if (interruptSignal.aborted) cancel();
  try {
    const result = await syncConnector({
      client,
      connector: {
        name: gathered.connectorName,
        remoteUrl: gathered.remoteUrl,
        recursive: v.recursive,
        appKey: gathered.appKey,
        appSecret: gathered.appSecret,
        refreshToken: tokens.refreshToken,
        accessToken: tokens.accessToken,
      },
      ...knownConnector(session.state),
      ...(gathered.workflowId ? { workflow: { id: gathered.workflowId, ...(gathered.schedule ? { schedule: gathered.schedule } : {}) } } : {}),
      profiles: session.profiles,
      profile: session.name,
      fields: (current) => ({ ...profileFields, ...keptAccount(current) }),
      update: { resetCorrupt: true },
      writing: writeSection,
    });
    return { result };
  } catch (error) {
    if (interruptSignal.aborted) throw new InterruptedError('setup was interrupted before the source connector was ready', { hint: finishHint });
    const message = error instanceof Error ? error.message : String(error);
    const code = error instanceof SyncauthError ? error.code : 'UNKNOWN';
    await writeSection(() => session.profiles.update(session.name, (current) => ({
      ...profileFields,
      ...keptAccount(current),
      ...knownConnector(current),
      lastError: failure(code, message),
    }), { resetCorrupt: true }));
    if (error instanceof SyncauthError && !error.hint) {
      throw new SyncauthError(error.code, error.message, { exitCode: error.exitCode, hint: finishHint, cause: error });
    }
    throw error;
  } finally {
    interruptSignal.removeEventListener('abort', cancel);
    await client.close();
  }
}
