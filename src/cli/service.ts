// Opens the service client from resolved settings (and, after `setup`, the profile's saved base URL and stored
// API key), or says exactly which setting is missing.
import { syncauthCommand } from '../profile/name.js';
import { ExitCode, SyncauthError } from '../errors.js';
import { howToSet } from '../config.js';
import type { ServiceClient } from '../service/client.js';
import type { CommandContext } from './context.js';

export async function openServiceClient(context: CommandContext): Promise<ServiceClient> {
  let { baseUrl, apiKey, apiKeyHeader } = context.settings.values;
  if (!baseUrl || !apiKey) {
    // Only now load and touch the profile and its store: a command configured by the environment never needs them.
    const { openSession, readSecrets } = await import('./session.js');
    const session = await openSession(context);
    // The session's, not the context's: a `.env`'s base URL is passed over once the store supplies the key.
    baseUrl = session.values.baseUrl;
    apiKeyHeader = session.values.apiKeyHeader;
    if (!baseUrl) {
      throw new SyncauthError('SYNCAUTH_MISSING_SETTING', "the service's base URL is not set", {
        exitCode: ExitCode.usage,
        hint: `set ${howToSet('baseUrl')}, e.g. https://platform.example.com, or run \`${syncauthCommand('setup')}\``,
      });
    }
    apiKey ??= (await readSecrets(session)).apiKey;
  }
  if (!apiKey) {
    throw new SyncauthError('SYNCAUTH_NO_API_KEY', 'no service API key is available', {
      exitCode: ExitCode.authRequired,
      hint: `set SYNCAUTH_API_KEY in the environment or a .env file (generate a key under API Keys in the service web interface), or run \`${syncauthCommand('setup')}\``,
    });
  }
  return context.factory.serviceClient({ baseUrl, apiKey, apiKeyHeader });
}

/** Runs `work` with a client and always closes its connection pool, so the process can exit promptly. */
export async function withServiceClient<T>(context: CommandContext, work: (client: ServiceClient) => Promise<T>): Promise<T> {
  const client = await openServiceClient(context);
  try {
    return await work(client);
  } finally {
    await client.close();
  }
}
