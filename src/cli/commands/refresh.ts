// `syncauth refresh`: renew now and bring the connector (and workflow) up to date with the fresh token. Many
// at once take turns on the profile's renewal lock, and those that waited while another renewed use its
// token (see RECENT_RENEWAL_MS) instead of renewing again.
import { ExitCode, SyncauthError } from '../../errors.js';
import type { Schedule } from '../../service/models.js';
import { defaultConnectorName, describeCleanup, syncConnector } from '../../sync/reconcile.js';
import { baseState, recordFailure } from '../../sync/renew.js';
import type { CommandContext } from '../context.js';
import { printJson } from '../output.js';
import { openSession, readSecrets, requireGrant } from '../session.js';
import { sessionAccessToken } from './shared.js';
import { reauthorizeCommand } from '../../profile/name.js';

export async function refresh(context: CommandContext): Promise<void> {
  const session = await openSession(context, undefined, { existing: true });
  const secrets = await readSecrets(session);
  const grant = requireGrant(session, secrets);
  const v = session.values;
  if (!v.baseUrl || !v.remoteUrl || !secrets.apiKey) {
    throw new SyncauthError('SYNCAUTH_INCOMPLETE_PROFILE', `profile "${session.name}" lacks ${[!v.baseUrl && 'the base URL', !v.remoteUrl && 'the remote URL', !secrets.apiKey && 'the API key'].filter(Boolean).join(', ')}`, {
      exitCode: ExitCode.usage,
      hint: `run \`${reauthorizeCommand(session.name)}\`, or set SYNCAUTH_BASE_URL, SYNCAUTH_REMOTE_URL and SYNCAUTH_API_KEY`,
    });
  }
  const tokens = await sessionAccessToken(session, grant, 'recent');
  const connectorName = v.connectorName ?? defaultConnectorName(v.remoteUrl);
  const client = await context.factory.serviceClient({ baseUrl: v.baseUrl, apiKey: secrets.apiKey, apiKeyHeader: v.apiKeyHeader });
  try {
    // The base URL is not recorded here: only setup binds endpoints to the secrets, so neither a run with
    // --endpoint-override nor a profile made of environment variables gets one recorded by a refresh.
    const result = await syncConnector({
      client,
      connector: {
        name: connectorName,
        remoteUrl: v.remoteUrl,
        recursive: v.recursive,
        appKey: grant.appKey,
        appSecret: grant.appSecret,
        refreshToken: tokens.refreshToken,
        accessToken: tokens.accessToken,
      },
      ...(session.state?.connectorId ? { connectorId: session.state.connectorId } : {}),
      ...(v.workflowId ? { workflow: { id: v.workflowId, ...(v.schedule ? { schedule: v.schedule as Schedule } : {}) } } : {}),
      profiles: session.profiles,
      profile: session.name,
      fields: (current) => ({ ...baseState(current), remoteUrl: v.remoteUrl, lastError: undefined }),
    });
    const expiresAt = new Date(tokens.expiresAt).toISOString();
    if (context.json) {
      printJson(context.io, { profile: session.name, accessTokenExpiresAt: expiresAt, connector: { id: result.connector.id, action: result.action }, removed: result.removed, removedConnectors: result.removedConnectors, keptShared: result.keptShared, workflow: result.workflowAction ?? null });
      return;
    }
    context.io.stdout.write(`✓ renewed: access token valid until ${expiresAt}\n✓ source connector ${result.connector.name} ${result.action} (${result.connector.id})\n`);
    for (const line of describeCleanup(result)) context.io.stdout.write(`✓ ${line}\n`);
    if (result.workflow) context.io.stdout.write(`✓ workflow ${result.workflow.id} ${result.workflowAction === 'updated' ? 'now reads from it' : 'already reads from it'}\n`);
  } catch (error) {
    await recordFailure(session.profiles, session.name, error);
    throw error;
  } finally {
    await client.close();
  }
}
