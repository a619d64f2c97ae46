// Opens the service client from resolved settings, or says exactly which setting is missing.
import { ExitCode, SyncauthError } from '../errors.js';
import { howToSet } from '../config.js';
import { ServiceClient } from '../service/client.js';
import type { CommandContext } from './context.js';

export function openServiceClient(context: CommandContext): ServiceClient {
  const { values } = context.settings;
  if (!values.baseUrl) {
    throw new SyncauthError('SYNCAUTH_MISSING_SETTING', "the service's base URL is not set", {
      exitCode: ExitCode.usage,
      hint: `set ${howToSet('baseUrl')}, e.g. https://platform.example.com`,
    });
  }
  if (!values.apiKey) {
    throw new SyncauthError('SYNCAUTH_NO_API_KEY', 'no service API key is available', {
      exitCode: ExitCode.authRequired,
      hint: 'set SYNCAUTH_API_KEY in the environment or a .env file (generate a key under API Keys in the service web interface)',
    });
  }
  return new ServiceClient({ baseUrl: values.baseUrl, apiKey: values.apiKey, apiKeyHeader: values.apiKeyHeader });
}

/** Runs `work` with a client and always closes its connection pool, so the process can exit promptly. */
export async function withServiceClient<T>(context: CommandContext, work: (client: ServiceClient) => Promise<T>): Promise<T> {
  const client = openServiceClient(context);
  try {
    return await work(client);
  } finally {
    await client.close();
  }
}
